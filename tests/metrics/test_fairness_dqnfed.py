"""DQN-Fed's fairness readings (specs/qffl-dqnfed.md §B.6, B.12 test 4): Angle = atan(σ_a/ā) for
any vector, worst/best p % over max(1, int(p·K)) clients (the release's int(p·K): NaN below one),
KL(a‖u) >= 0 with equality iff all accuracies are equal."""

import warnings

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


def _release_worst_best(accuracies):
    """fair_flearn's plot_fairness.py get_bar_y (litian96/fair_flearn f097971), one run's worst
    and best 10 %, transcribed (numpy's mean of an empty slice warns and gives NaN)."""
    num_user = len(accuracies)
    num_good = int(num_user * 0.1)
    num_bad = num_good
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        worst = np.mean(np.sort(accuracies)[:num_bad])
        best = np.mean(np.sort(accuracies)[num_user - num_good :])
    return worst, best


@pytest.mark.parametrize("k", [3, 9, 10, 23])
def test_tails_against_the_release_and_below_ten_clients(k):
    a = np.random.default_rng(k).uniform(0, 1, size=k)
    worst, best = _release_worst_best(a)
    release = (qffl_tail(a, 0.1, at_least_one=False), qffl_tail(a, 0.1, False, False))
    if k >= 10:  # int(0.1 K) >= 1: the release's reading and ours agree
        assert release == (pytest.approx(worst), pytest.approx(best))
        assert (qffl_tail(a, 0.1), qffl_tail(a, 0.1, lowest=False)) == release
        return
    # K < 10: the release's int(0.1 K) = 0 clients give NaN; by default the one extreme client
    assert np.isnan(worst) and np.isnan(best) and np.isnan(release).all()
    assert qffl_tail(a, 0.1) == a.min() and qffl_tail(a, 0.1, lowest=False) == a.max()


def test_kl_to_uniform_is_zero_only_for_equal_accuracies():
    assert kl_to_uniform([70.0, 70.0, 70.0]) == pytest.approx(0.0, abs=1e-12)
    a = np.array([80.0, 60.0, 40.0])
    p = a / a.sum()
    assert kl_to_uniform(a) == pytest.approx(float(np.sum(p * np.log(3 * p))))
    assert kl_to_uniform(a) > 0
    assert kl_to_uniform([1.0, 0.0]) == pytest.approx(np.log(2))
    with pytest.raises(ValueError, match="non-negative"):
        kl_to_uniform([0.0, 0.0])
