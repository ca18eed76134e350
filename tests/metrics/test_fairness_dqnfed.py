"""DQN-Fed's fairness readings (specs/qffl-dqnfed.md §B.6, B.12 test 4): Angle = atan(σ_a/ā) for
any vector, worst/best p % over max(1, int(p·K)) clients, KL(a‖u) >= 0 with equality iff all
accuracies are equal."""

import numpy as np
import pytest

from fedbench.metrics.fairness import angle_to_uniform, kl_to_uniform, qffl_tail


@pytest.mark.parametrize("seed", range(5))
def test_the_angle_is_atan_of_std_over_mean(seed):
    a = np.random.default_rng(seed).uniform(1, 100, size=7 + seed)
    assert angle_to_uniform(a) == pytest.approx(np.degrees(np.arctan(a.std() / a.mean())))
    assert angle_to_uniform(np.full(4, 63.0)) == pytest.approx(0.0, abs=1e-6)


def test_tails_take_max_one_int_p_k_clients_unweighted():
    a = np.array([50.0, 10.0, 90.0, 30.0, 70.0, 20.0, 60.0, 80.0, 40.0, 100.0, 0.0])
    assert qffl_tail(a, 0.1) == 0.0  # int(1.1) = 1 client
    assert qffl_tail(a, 0.1, lowest=False) == 100.0
    assert qffl_tail(a, 0.2) == pytest.approx(5.0)  # int(2.2) = 2 clients
    assert qffl_tail(a[:5], 0.1) == 10.0  # int(0.5) = 0 -> at least 1
    with pytest.raises(ValueError, match="p must"):
        qffl_tail(a, 0.0)


def test_kl_to_uniform_is_zero_only_for_equal_accuracies():
    assert kl_to_uniform([70.0, 70.0, 70.0]) == pytest.approx(0.0, abs=1e-12)
    a = np.array([80.0, 60.0, 40.0])
    p = a / a.sum()
    assert kl_to_uniform(a) == pytest.approx(float(np.sum(p * np.log(3 * p))))
    assert kl_to_uniform(a) > 0
    assert kl_to_uniform([1.0, 0.0]) == pytest.approx(np.log(2))
    with pytest.raises(ValueError, match="non-negative"):
        kl_to_uniform([0.0, 0.0])
