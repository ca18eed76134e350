"""Label noise: transition matrices of eqs. 2.7/2.8, sampled flip rates, train-only noise."""

from __future__ import annotations

import numpy as np
import pytest

from fedbench.data.noise import (
    apply_label_noise,
    code_kind,
    noisify_indices,
    noisy_partition_labels,
    transition_matrix,
)


@pytest.mark.parametrize("kind", ["pair", "symmetric"])
@pytest.mark.parametrize("n", [2, 10, 200])
def test_rows_sum_to_one_and_diagonal(kind, n):
    t = transition_matrix(kind, n, 0.4)
    assert t.shape == (n, n) and np.allclose(t.sum(1), 1.0) and np.all(t >= 0)
    assert np.allclose(np.diag(t), 0.6)


def test_pair_moves_only_to_next_class():
    t = transition_matrix("pair", 5, 0.1)
    for i in range(5):
        off = {j for j in range(5) if j != i and t[i, j] > 0}
        assert off == {(i + 1) % 5} and t[i, (i + 1) % 5] == pytest.approx(0.1)
    assert transition_matrix("symmetric", 5, 0.2)[0, 3] == pytest.approx(0.05)
    assert np.array_equal(transition_matrix("pair", 4, 0.0), np.eye(4))


def test_bad_arguments():
    with pytest.raises(ValueError, match="kind"):
        transition_matrix("asymmetric", 10, 0.1)
    with pytest.raises(ValueError, match="eps"):
        transition_matrix("pair", 10, 1.5)
    with pytest.raises(ValueError, match="num_classes"):
        transition_matrix("pair", 1, 0.1)
    with pytest.raises(ValueError, match="rows"):
        apply_label_noise(np.zeros(3, dtype=np.int64), np.ones((2, 2)), np.random.default_rng(0))
    with pytest.raises(ValueError, match="labels"):
        apply_label_noise(np.array([0, 5]), np.eye(3), np.random.default_rng(0))


# Flip counts are Binomial(n, eps): at n = 100,000 the rate is within 5 standard deviations,
# 5 * sqrt(eps (1 - eps) / n) (<= 0.008), except with probability < 1e-6 (fixed seed anyway).
N = 100_000


def _tol(p: float, n: int) -> float:
    return 5 * np.sqrt(p * (1 - p) / n)


@pytest.mark.parametrize(("kind", "eps"), [("pair", 0.1), ("pair", 0.4), ("symmetric", 0.2)])
def test_empirical_flip_rates(kind, eps):
    classes = 10
    rng = np.random.default_rng(5959)
    y = rng.integers(0, classes, N)
    noisy = apply_label_noise(y, transition_matrix(kind, classes, eps), rng)
    flipped = noisy != y
    assert abs(flipped.mean() - eps) < _tol(eps, N)
    if kind == "pair":
        assert np.all(noisy[flipped] == (y[flipped] + 1) % classes)
    else:
        share = np.bincount((noisy[flipped] - y[flipped]) % classes, minlength=classes)[1:]
        each = share / flipped.sum()
        assert np.all(np.abs(each - 1 / 9) < _tol(1 / 9, int(flipped.sum())))


def test_symmetric_sixty_percent():
    rng = np.random.default_rng(1)
    y = rng.integers(0, 10, N)
    noisy = apply_label_noise(y, transition_matrix("symmetric", 10, 0.6), rng)
    assert abs((noisy != y).mean() - 0.6) < _tol(0.6, N)
    same = apply_label_noise(y, transition_matrix("symmetric", 10, 0.6), np.random.default_rng(1))
    other = apply_label_noise(y, transition_matrix("symmetric", 10, 0.6), np.random.default_rng(1))
    assert np.array_equal(same, other)


def test_only_training_indices_are_noisy():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 10, 2000)
    clean = y.copy()
    train = [np.arange(0, 800), np.arange(1000, 1800)]
    out = noisy_partition_labels(y, train, "symmetric", 0.6, 10, np.random.default_rng(3))
    test_idx = np.setdiff1d(np.arange(2000), np.concatenate(train))
    assert np.array_equal(out[test_idx], y[test_idx])  # test labels untouched
    assert (out[np.concatenate(train)] != y[np.concatenate(train)]).mean() > 0.5
    assert np.array_equal(y, clean)  # the input is not modified
    only = noisify_indices(y, np.array([5, 5, 7]), np.eye(10)[::-1], np.random.default_rng(0))
    assert only[5] == 9 - y[5] and only[7] == 9 - y[7] and np.array_equal(only[8:], y[8:])


def test_code_compat_swaps_kinds_and_noisifies_everything():
    assert code_kind("pair") == "symmetric" and code_kind("symmetric") == "pair"
    y = np.random.default_rng(0).integers(0, 10, N)
    train = [np.arange(0, N // 2)]
    out = noisy_partition_labels(y, train, "pair", 0.4, 10, np.random.default_rng(2), "code")
    flipped = out != y
    assert abs(flipped[N // 2 :].mean() - 0.4) < _tol(0.4, N // 2)  # "test" half noisy too
    # pair requested, symmetric applied: flips land on every other class, not just i + 1.
    assert len(np.unique((out[flipped] - y[flipped]) % 10)) == 9
    with pytest.raises(ValueError, match="variant"):
        noisy_partition_labels(y, train, "pair", 0.4, 10, np.random.default_rng(2), "paper")
