"""build_run: one spec -> the run's model (objective-sized head), algorithm, config, objective;
the loss landscape of a bce_logit run is built on the network that run trained."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from fedbench.config import load_catalog, resolve_run
from fedbench.data import prepare_dataset
from fedbench.data.base import save_dataset
from fedbench.data.partition import make_partition, save_partition
from fedbench.engine.build import build_run
from fedbench.engine.landscape import compute_run_landscape
from fedbench.engine.run import execute_run
from fedbench.io import DamagedFile
from fedbench.landscape_file import LandscapeSettings, load_landscape
from fedbench.rng import Streams

CATALOG = Path(__file__).resolve().parents[2] / "config" / "config.yaml"


@pytest.fixture(scope="module")
def binary(tmp_path_factory):
    """A two-class stand-in (MNIST's labels mod 2), its split, and the catalog."""
    root = tmp_path_factory.mktemp("build")
    m = prepare_dataset(
        "mnist", {"n_train": 80, "n_test": 24}, None, "standin", Streams(0).generator("standin")
    )
    ds = dataclasses.replace(m, y_train=m.y_train % 2, y_test=m.y_test % 2, num_classes=2)
    save_dataset(ds, root / "data.npz")
    spec_part = {"kind": "iid", "num_clients": 4, "test_fraction": 0.25}
    part = make_partition(ds.y_train, None, spec_part, Streams(0).generator("partition"))
    save_partition(root / "part.npz", part)
    return root, ds, load_catalog(CATALOG)


def _spec(catalog, model: str) -> dict:
    spec = resolve_run(catalog, "smoke", "mnist", "iid-k100", model, "fedavg", 0)
    spec["training"].update(rounds=2, eval_every=1, clients_per_round=2)
    return spec


def _head(model: torch.nn.Module) -> int:
    return [p for p in model.parameters() if p.dim() == 2][-1].shape[0]


def test_head_is_sized_by_the_objective(binary):
    _, ds, catalog = binary
    bce = build_run(_spec(catalog, "aaggff-logreg"), ds)  # training.objective: bce_logit
    assert bce.config.objective == bce.objective.name == "bce_logit"
    assert _head(bce.model) == 1
    ce = build_run(_spec(catalog, "aaggff-logreg-softmax"), ds)
    assert ce.objective.name == "cross_entropy" and _head(ce.model) == ds.num_classes == 2
    spec = _spec(catalog, "aaggff-logreg-softmax")
    spec["training"]["objective"] = "bce_logit"  # a spec's own objective counts the same way
    assert _head(build_run(spec, ds).model) == 1


def test_same_spec_same_initial_weights_and_fresh_inits_differ(binary):
    _, ds, catalog = binary
    spec = _spec(catalog, "aaggff-logreg")
    a, b = build_run(spec, ds), build_run(spec, ds)
    for (k, p), q in zip(a.model.named_parameters(), b.model.parameters()):
        assert torch.equal(p, q), k
    f0, f1, g0 = a.fresh_init(0), a.fresh_init(1), b.fresh_init(0)
    assert all(torch.equal(f0[k], g0[k]) for k in f0)
    assert any(not torch.equal(f0[k], f1[k]) for k in f0)


def test_bce_landscape_is_computed_on_the_one_logit_network(binary):
    root, _, catalog = binary
    out = root / "bce"
    spec = _spec(catalog, "aaggff-logreg")
    paths = (root / "data.npz", root / "part.npz", out / "m.jsonl", out / "run.yaml")
    execute_run(spec, *paths, params_path=out / "p.pt")
    assert _head_of_saved(out / "p.pt") == 1
    settings = LandscapeSettings(span=0.5, points=3)
    meta = compute_run_landscape(
        out / "run.yaml", out / "p.pt", root / "data.npz", out / "l.npz", settings
    )
    land = load_landscape(out / "l.npz")
    assert meta["objective"] == land["objective"] == "bce_logit"
    final = json.loads((out / "m.jsonl").read_text().splitlines()[-1])
    # the centre is the run's own final global-test loss: BCE on its one logit
    assert land["loss"][1, 1] == pytest.approx(final["global_test"]["loss"], rel=1e-5)


def test_a_damaged_parameter_file_names_the_command_that_rewrites_it(binary):
    root, _, catalog = binary
    out = root / "damaged"
    spec = _spec(catalog, "aaggff-logreg")
    paths = (root / "data.npz", root / "part.npz", out / "m.jsonl", out / "run.yaml")
    execute_run(spec, *paths, params_path=out / "p.pt")
    (out / "p.pt").write_bytes((out / "p.pt").read_bytes()[:100])  # truncated
    settings = LandscapeSettings(span=0.5, points=3)
    with pytest.raises(DamagedFile, match="parameter file .* is damaged") as err:
        compute_run_landscape(
            out / "run.yaml", out / "p.pt", root / "data.npz", out / "l", settings
        )
    assert str(err.value).endswith(f"--forcerun {out / 'p.pt'}")
    assert not (out / "l.npz").exists()


def _head_of_saved(path: Path) -> int:
    params = torch.load(path, weights_only=True)
    return [v for v in params.values() if v.dim() == 2][-1].shape[0]
