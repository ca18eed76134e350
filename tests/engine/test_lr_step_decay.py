"""Step learning-rate decay (AAggFF §9.6: lr * phi^floor((r - 1) / s))."""

from __future__ import annotations

import math

import pytest

from fedbench.engine.train_config import TrainConfig

CFG = {"rounds": 10, "batch_size": 4, "lr": 0.1, "local_epochs": 1, "clients_per_round": 2}


def test_step_decay_by_hand():
    cfg = TrainConfig(**CFG, lr_decay=0.5, lr_decay_every=3)
    # rounds 1-3 at lr, 4-6 at lr / 2, 7-9 at lr / 4, 10 at lr / 8
    want = [0.1] * 3 + [0.05] * 3 + [0.025] * 3 + [0.0125]
    assert all(math.isclose(cfg.lr_at(t), w) for t, w in zip(range(1, 11), want, strict=True))
    every_round = TrainConfig(**CFG, lr_decay=0.5)
    assert math.isclose(every_round.lr_at(3), 0.025)  # the default decays every round


@pytest.mark.parametrize("bad", [0, -2, 1.5])
def test_step_must_be_a_positive_integer(bad):
    with pytest.raises(ValueError, match="lr_decay_every"):
        TrainConfig(**CFG, lr_decay=0.5, lr_decay_every=bad)
