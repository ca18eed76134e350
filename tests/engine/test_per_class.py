"""training.per_class_loss: per-class test losses of the personalised models at the final round."""

import math

import pytest
import torch

from fedbench.algorithms import build_algorithm
from fedbench.config import _check_training_block
from fedbench.engine.build import Run
from fedbench.engine.loop import run_rounds
from fedbench.engine.per_class import per_class_losses
from fedbench.engine.train_config import TrainConfig
from fedbench.rng import Streams


def _apply(params, x):
    """Logits x * v: with v = 0 every class has probability 1/3."""
    return x * params["v"]


def test_per_class_losses_match_hand_computation():
    # Pool of 7 samples; sample 6 is in no test split and must not count.
    x = torch.tensor([[1.0], [2.0], [1.0], [1.0], [2.0], [2.0], [1.0]])
    y = torch.tensor([0, 0, 1, 0, 2, 1, 0])
    splits = [torch.tensor([0, 1, 2]), torch.tensor([3, 4, 5])]
    flat = {"v": torch.zeros(3)}
    peaked = {"v": torch.tensor([math.log(2.0), 0.0, 0.0])}
    out = per_class_losses(_apply, [flat, peaked], x, y, splits, 3, batch_size=2)

    ln = math.log
    # peaked, x = 1: logits (ln 2, 0, 0), normaliser 4; x = 2: (2 ln 2, 0, 0), normaliser 6.
    assert out["global_n"] == [3, 2, 1]
    assert out["local_n"] == [[2, 1, 0], [1, 1, 1]]
    assert out["global_loss"][0] == pytest.approx([ln(3)] * 3)
    assert out["local_loss"][0] == pytest.approx([ln(3), ln(3), 0.0])  # no class 2: 0 (B.4)
    assert out["global_loss"][1] == pytest.approx(
        [(ln(2) + ln(1.5) + ln(2)) / 3, (ln(4) + ln(6)) / 2, ln(6)]
    )
    assert out["local_loss"][1] == pytest.approx([ln(2), ln(6), ln(6)])


def test_recorded_at_the_final_round_only_and_executors_agree(tiny):
    fed, apply, p0 = tiny
    cfg = TrainConfig(
        rounds=3, batch_size=4, lr=0.1, local_epochs=1, clients_per_round=2, per_class_loss=True
    )
    runs = {
        ex: run_rounds(
            Run(build_algorithm("pfedme", mu=1.0), apply, cfg, p0, executor=ex), fed, Streams(3)
        )
        for ex in ("sequential", "vectorised")
    }
    seq, vec = runs["sequential"].records, runs["vectorised"].records
    assert ["per_class_loss" in r for r in seq] == [False, False, True]
    a, b = seq[-1]["per_class_loss"]["personal"], vec[-1]["per_class_loss"]["personal"]
    assert (
        a["global_n"]
        == b["global_n"]
        == torch.bincount(fed.y[torch.cat(fed.test)], minlength=3).tolist()
    )
    assert a["local_n"] == b["local_n"] and len(a["local_n"]) == fed.num_clients
    for key in ("global_loss", "local_loss"):
        for row_a, row_b in zip(a[key], b[key]):
            assert row_b == pytest.approx(row_a, abs=1e-4)
    # The per-class means recombine into the recorded per-client mean loss on the local split.
    clients = seq[-1]["clients"]["personal"]
    for i, loss in zip(clients["ids"], clients["loss"]):
        n = a["local_n"][i]
        total = sum(m * c for m, c in zip(a["local_loss"][i], n))
        assert total / sum(n) == pytest.approx(loss, rel=1e-4)


def test_off_by_default_and_validated(tiny):
    fed, apply, p0 = tiny
    cfg = TrainConfig(rounds=1, batch_size=4, lr=0.1, local_epochs=1, clients_per_round=2)
    state = run_rounds(Run(build_algorithm("pfedme", mu=1.0), apply, cfg, p0), fed, Streams(3))
    assert "per_class_loss" not in state.records[-1]
    with pytest.raises(ValueError, match="training.per_class_loss"):
        _check_training_block({"per_class_loss": "yes"})
