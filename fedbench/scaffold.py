"""`fedbench new algorithm NAME`: a user's method as a file of their own, with its tests.

Writes, in a folder (default: the current one), `NAME.py` (a FedAvg subclass: the hooks a method
usually needs are listed in its docstring, and two are overridden as the example, FedProx's
proximal term), `test_NAME.py` (pytest: equal to FedAvg where its term is off, the two
executors agree, and its term checked by hand), all through `fedbench.testing`, and `NAME.yaml`
(a config overlay: the plugin, its catalog entry and its row in the quick grid's tables).
Nothing is overwritten.
"""

from __future__ import annotations

import argparse
import keyword
import sys
from pathlib import Path

ALGORITHM = '''"""{title}: FedAvg plus a proximal term (the example; replace it with your method).

A fedbench algorithm states only how it differs from FedAvg (fedbench.algorithms.base.Algorithm,
the core, whose hooks are FedAvg's). The core's hooks a method usually overrides:

- client_begin(global_params, server_state, client_state, ctx) -> (params, carry): what a client
  starts its round from; `carry` holds what its local steps read (here: the global model).
- local_loss(apply, params, batch, carry, noise) -> loss: what each local step differentiates
  (FedAvg: self.data_loss(apply, params, batch)).
- client_end(global_params, params, carry, client_state, ctx) -> (message, client_state): what a
  client sends (FedAvg: its delta, sample-weighted) and keeps for its next round.
- aggregate(global_params, messages, server_state, ctx) -> (global_params, server_state): the
  server step (FedAvg: the weighted mean of the deltas, added to the global model).
- init_server_state / init_client_state: what the server and each client keep across rounds.

More is opt-in (fedbench/algorithms/opt_in.py): name the capability among the class's bases,
`class Mine(LocalSteps, Algorithm)`, and override its hooks. LocalSteps: correct_grads (change
each step's gradient, SCAFFOLD), update_mask (freeze parts), step_noise, before_step,
local_epochs; PersonalEvaluation: personalised models evaluated beside the global one;
ServerOutputs: server scalars, kept tensors, another evaluated model; ServerTraining: a network
the server trains (the engine fits it); FrozenPasses: client passes without an optimiser step;
OwnNetwork, ClientSelection, CandidateModels.

The engine takes the gradients, steps the optimiser and runs both executors; hyperparameters are
the dataclass's fields, set by a catalog entry's `params`.
"""

from dataclasses import dataclass
from typing import ClassVar

from fedbench.algorithms.base import Algorithm


@dataclass(frozen=True)
class {cls}(Algorithm):
    name: ClassVar[str] = "{name}"
    mu: float = 0.01  # the proximal term's weight (0: FedAvg)

    def client_begin(self, global_params, server_state, client_state, ctx):
        return dict(global_params), {{"anchor": global_params}}

    def local_loss(self, apply, params, batch, carry, noise):
        drift = sum(((params[k] - carry["anchor"][k]) ** 2).sum() for k in params)
        return self.data_loss(apply, params, batch) + self.mu / 2 * drift
'''

TESTS = '''"""Tests of {cls} (pytest {test_file}): the checks fedbench runs on its own."""

import torch
from {name} import {cls}

from fedbench.algorithms import build_algorithm
from fedbench.algorithms.base import Batch
from fedbench.testing import (
    assert_executors_agree,
    assert_same_run,
    make_federation,
    tiny_network,
    train_tiny,
)


def test_without_its_term_it_is_fedavg():
    assert_same_run(train_tiny({cls}(mu=0.0)), train_tiny(build_algorithm("fedavg")))


def test_its_term_changes_the_run():
    assert not train_tiny({cls}(mu=1.0)).records == train_tiny(build_algorithm("fedavg")).records


def test_both_executors_agree():
    seq = train_tiny({cls}(mu=0.5))
    vec = train_tiny({cls}(mu=0.5), executor="vectorised")
    assert_executors_agree(seq, vec)


def test_its_term_by_hand():
    """local_loss - data_loss = mu/2 ||w - w_g||^2; with every weight 1 above the anchor that is
    mu/2 times the number of weights."""
    apply, params = tiny_network()
    fed = make_federation()
    batch = Batch(fed.x[:4], fed.y[:4], None, None)
    algo = {cls}(mu=0.3)
    _, carry = algo.client_begin(params, {{}}, {{}}, None)
    moved = {{k: v + 1.0 for k, v in params.items()}}
    term = algo.local_loss(apply, moved, batch, carry, None) - algo.data_loss(apply, moved, batch)
    count = sum(v.numel() for v in params.values())
    torch.testing.assert_close(term, torch.tensor(0.3 / 2 * count))
'''


OVERLAY = """# {name}.yaml: {cls} as a row of the quick grid's tables, beside the published methods
# (docs/extending.md). From the fedbench checkout:
#   snakemake --cores 2 quick --configfile {overlay}
# Every run of the row uses the grid's own datasets, partitions, models and seeds.
plugins:
  algorithms:
    {name}: {plugin}:{cls}
algorithms:
  {name}:  # a catalog entry: its hyperparameters, as any of config/catalog/*.yaml
    algorithm: {name}
    mu: 0.01
add_rows:
  quick:
    to: tables  # or a list of its tables and figures, e.g. [table1, figure1]; or all
    rows:
      - {{id: {name}, label: "{cls} (mu = 0.01)", algorithm: {name}}}
"""


def _class_name(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


def new_algorithm(name: str, folder: Path) -> list[Path]:
    """Write NAME.py and test_NAME.py into `folder`; return their paths. Refuses a name that is
    not a Python module name, one that fedbench already has, and existing files."""
    if not name.isidentifier() or keyword.iskeyword(name) or name != name.lower():
        raise ValueError(
            f"{name!r} is not a lowercase Python module name (letters, digits, underscores): "
            "choose e.g. 'my_method'"
        )
    from fedbench.algorithms import ALGORITHMS

    if name in ALGORITHMS:
        raise ValueError(
            f"fedbench already has an algorithm {name!r} ({ALGORITHMS.target(name)}): "
            "choose another name"
        )
    cls = _class_name(name)
    where = folder.resolve()
    files = {
        folder / f"{name}.py": ALGORITHM.format(title=cls, cls=cls, name=name),
        folder / f"test_{name}.py": TESTS.format(cls=cls, name=name, test_file=f"test_{name}.py"),
        folder / f"{name}.yaml": OVERLAY.format(
            cls=cls, name=name, plugin=where / f"{name}.py", overlay=where / f"{name}.yaml"
        ),
    }
    existing = [str(p) for p in files if p.exists()]
    if existing:
        raise FileExistsError(f"{', '.join(existing)} exist(s): move them, or choose another name")
    folder.mkdir(parents=True, exist_ok=True)
    for path, text in files.items():
        path.write_text(text)
    return list(files)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="fedbench new",
        description="Write a new algorithm (a FedAvg subclass) and its tests into a folder.",
    )
    ap.add_argument("what", choices=["algorithm"], help="what to create")
    ap.add_argument("name", help="its module and registry name, e.g. my_method")
    ap.add_argument("--dir", default=".", help="the folder to write into (default: here)")
    args = ap.parse_args(argv)
    try:
        paths = new_algorithm(args.name, Path(args.dir))
    except (ValueError, FileExistsError) as err:
        print(f"fedbench new: {err}", file=sys.stderr)
        return 2
    for path in paths:
        print(f"wrote {path}")
    print(f"test it: pytest {paths[1]}")
    print(f"run it beside the baselines: snakemake --cores 2 quick --configfile {paths[2]}")
    return 0
