"""fedbench.testing: the helpers a user's method is tested with, and that they can fail."""

from __future__ import annotations

import pytest

from fedbench.algorithms import build_algorithm
from fedbench.testing import assert_executors_agree, assert_same_run, train_tiny


def test_the_same_run_twice_is_the_same_run_and_another_seed_is_not():
    fedavg = build_algorithm("fedavg")
    assert_same_run(train_tiny(fedavg), train_tiny(fedavg))
    with pytest.raises(AssertionError, match="global parameter"):
        assert_same_run(train_tiny(fedavg), train_tiny(fedavg, seed=1))
    with pytest.raises(AssertionError, match="records differ"):
        one, other = train_tiny(fedavg), train_tiny(fedavg)
        other.records[-1] = {**other.records[-1], "train_loss": -1.0}
        assert_same_run(one, other)


def test_executors_agree_and_a_difference_is_named():
    prox = build_algorithm("fedprox", mu=0.1)
    seq, vec = train_tiny(prox), train_tiny(prox, executor="vectorised")
    assert_executors_agree(seq, vec)
    key = next(iter(vec.global_params))
    vec.global_params[key] = vec.global_params[key] + 1e-3
    with pytest.raises(AssertionError, match=f"global parameter {key}: the executors differ"):
        assert_executors_agree(seq, vec)


def test_a_training_setting_is_replaced():
    run = train_tiny(build_algorithm("fedavg"), rounds=2, eval_every=2)
    assert [r["round"] for r in run.records] == [2]
