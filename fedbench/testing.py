"""Helpers to test an algorithm the way fedbench tests its own (a user's method included): a tiny
federation that trains in milliseconds, one run of an algorithm in either executor, and the two
checks every algorithm gets, that both executors give the same run and that a setting which
makes it FedAvg gives FedAvg's run.

    from fedbench.testing import assert_executors_agree, assert_same_run, train_tiny

    def test_my_method_in_both_executors():
        seq = train_tiny(MyMethod(mu=0.1), executor="sequential")
        vec = train_tiny(MyMethod(mu=0.1), executor="vectorised")
        assert_executors_agree(seq, vec)

    def test_my_method_at_mu_zero_is_fedavg():
        assert_same_run(train_tiny(MyMethod(mu=0.0)), train_tiny(build_algorithm("fedavg")))
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from fedbench.algorithms.base import Algorithm
from fedbench.engine.build import Run
from fedbench.engine.federation import Federation
from fedbench.engine.functional import make_apply, params_of
from fedbench.engine.loop import RunState, run_rounds
from fedbench.engine.train_config import TrainConfig
from fedbench.models import build_model
from fedbench.rng import Streams
from fedbench.tree import Apply, Params

# The tiny run's training settings (TrainConfig fields); train_tiny's keywords replace them.
TINY_TRAINING: dict[str, Any] = dict(
    rounds=3, batch_size=4, lr=0.1, local_epochs=2, clients_per_round=2, eval_every=1
)


def make_federation(
    num_clients: int = 4,
    per_client: int = 12,
    dim: int = 6,
    classes: int = 3,
    seed: int = 0,
    device: torch.device | str = "cpu",
) -> Federation:
    """Linearly separable-ish toy data split evenly into clients with 75/25 train/test, and a
    global test set of 20 rows."""
    rng = np.random.default_rng(seed)
    n = num_clients * per_client
    w = rng.normal(size=(dim, classes))
    x = rng.normal(size=(n, dim)).astype(np.float32)
    y = (x @ w).argmax(1).astype(np.int64)
    idx = np.arange(n).reshape(num_clients, per_client)
    cut = per_client * 3 // 4
    x_test = rng.normal(size=(20, dim)).astype(np.float32)
    y_test = (x_test @ w).argmax(1).astype(np.int64)
    return Federation.from_arrays(
        x,
        y,
        [r[:cut] for r in idx],
        [r[cut:] for r in idx],
        x_test,
        y_test,
        classes,
        torch.device(device),
    )


def tiny_network(device: torch.device | str = "cpu") -> tuple[Apply, Params]:
    """(apply, initial parameters) of the one-hidden-layer MLP `train_tiny` trains (6 -> 5 -> 3,
    init seed 1), for testing a hook on its own."""
    model = build_model("mlp", (6,), 3, init_seed=1, hidden=5).to(device)
    return make_apply(model), params_of(model)


def train_tiny(
    algo: Algorithm,
    executor: str = "sequential",
    seed: int = 0,
    device: torch.device | str = "cpu",
    **training: Any,
) -> RunState:
    """`algo` trained on `make_federation()` with a one-hidden-layer MLP (6 -> 5 -> 3, init
    seed 1) under TINY_TRAINING (a keyword replaces a setting), in `executor`; the run's
    streams are `Streams(seed)`. Returns the final RunState (global parameters, client states,
    the metrics records)."""
    fed = make_federation(device=device)
    apply, params = tiny_network(device)
    cfg = TrainConfig(**{**TINY_TRAINING, **training})
    run = Run(algo, apply, cfg, params, executor=executor)
    return run_rounds(run, fed, Streams(seed))


def assert_same_run(a: RunState, b: RunState) -> None:
    """Two runs are the same run: equal global parameters, bit for bit, and equal records."""
    assert a.global_params.keys() == b.global_params.keys(), "different parameters"
    for k, v in a.global_params.items():
        assert v.equal(b.global_params[k]), f"global parameter {k} differs"
    assert a.records == b.records, "the metrics records differ"


def assert_executors_agree(
    seq: RunState, vec: RunState, params_atol: float = 1e-5, metrics_atol: float = 1e-4
) -> None:
    """A sequential and a vectorised run agree: global parameters within `params_atol`, and
    every evaluation summary statistic and training loss within `metrics_atol`, round by round
    (the executors batch the same arithmetic differently, so the last bits may differ)."""
    for k in seq.global_params:
        diff = (seq.global_params[k] - vec.global_params[k]).abs().max().item()
        assert diff <= params_atol, f"global parameter {k}: the executors differ by {diff}"
    assert len(seq.records) == len(vec.records), "the executors recorded different rounds"
    for a, b in zip(seq.records, vec.records):
        for proto, summary in a["summary"].items():
            for metric, pack in summary.items():
                for stat, value in pack.items():
                    other = b["summary"][proto][metric][stat]
                    assert _close(value, other, metrics_atol), (
                        f"round {a['round']} {proto} {metric} {stat}: {value} vs {other}"
                    )
        assert _close(a["train_loss"], b["train_loss"], metrics_atol), (
            f"round {a['round']} train_loss: {a['train_loss']} vs {b['train_loss']}"
        )


def _close(a: Any, b: Any, atol: float) -> bool:
    """pytest.approx(a, abs=atol)'s test (tolerance max(atol, 1e-6 |a|)); NaN matches NaN (an
    undefined statistic in both runs); anything not a number must be equal."""
    if not (isinstance(a, (int, float)) and isinstance(b, (int, float))):
        return a == b
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return abs(a - b) <= max(atol, 1e-6 * abs(a))
