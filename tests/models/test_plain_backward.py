"""The models the sequential executor trains without a double-backward graph give the same bits
as with it (fedbench.models.PLAIN_BACKWARD), and one that may not is kept out."""

import numpy as np
import pytest
import torch

import fedbench.engine.local as local
from fedbench.algorithms import build_algorithm
from fedbench.engine.build import Run
from fedbench.engine.federation import Federation
from fedbench.engine.functional import make_apply, params_of
from fedbench.engine.loop import run_rounds
from fedbench.engine.train_config import TrainConfig
from fedbench.models import PLAIN_BACKWARD, build_model
from fedbench.models.recurrent import choose_recurrent_impl
from fedbench.rng import Streams

SHAPES = {"mobilenet": (3, 64, 64), "pfedbred_cnn": (3, 32, 32), "nextchar_lstm": (12,)}


def _rounds(arch: str, graph: bool, monkeypatch) -> dict[str, torch.Tensor]:
    shape = SHAPES.get(arch, (1, 28, 28))
    rng = np.random.default_rng(0)
    if arch == "nextchar_lstm":
        x = rng.integers(0, 50, (24, *shape)).astype(np.float32)
    else:
        x = rng.random((24, *shape), dtype=np.float32)
    classes = 80 if arch == "nextchar_lstm" else 10
    y = rng.integers(0, classes, 24)
    idx = np.arange(24).reshape(3, 8)
    fed = Federation.from_arrays(
        x, y, list(idx), [i[:0] for i in idx], x[:0], y[:0], classes, "cpu"
    )
    model = build_model(arch, shape, classes, init_seed=0)
    choose_recurrent_impl(model, "sequential")  # the fused kernel, as a run sets it
    monkeypatch.setattr(local, "_graph", lambda apply: graph)
    cfg = TrainConfig(
        rounds=2,
        batch_size=4,
        lr=0.05,
        local_epochs=1,
        clients_per_round=3,
        momentum=0.9,
        eval_every=10**6,
    )
    state = run_rounds(
        Run(
            build_algorithm("fedavg"),
            make_apply(model),
            cfg,
            params_of(model),
            executor="sequential",
        ),
        fed,
        Streams(0),
    )
    return state.global_params


@pytest.mark.parametrize("arch", sorted(PLAIN_BACKWARD))
def test_listed_models_give_the_same_bits_without_the_graph(arch, monkeypatch):
    with_graph = _rounds(arch, True, monkeypatch)
    without = _rounds(arch, False, monkeypatch)
    for k, v in with_graph.items():
        assert torch.equal(v, without[k]), k
    assert build_model(arch, SHAPES.get(arch, (1, 28, 28)), 10, init_seed=0).plain_backward


@pytest.mark.parametrize("arch", ["nextchar_lstm", "leaf_cnn"])
def test_models_that_would_move_are_not_listed(arch, monkeypatch):
    """The check above can fail: these backwards differ without the graph."""
    assert arch not in PLAIN_BACKWARD
    with_graph = _rounds(arch, True, monkeypatch)
    without = _rounds(arch, False, monkeypatch)
    assert any(not torch.equal(v, without[k]) for k, v in with_graph.items())
