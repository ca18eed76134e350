"""AAggFF's fairness metrics: tails, Gini ×100, ΔAG, AUROC, Figure 3.1's objective."""

import math

import numpy as np
import pytest

from fedbench.metrics.fairness import (
    aaggff_pack,
    auroc,
    cumulative_objective,
    parity_gap,
    tail_mean,
)


def test_tail_uses_floor_of_ten_percent_weighted():
    # 11 clients (MQP): max(1, floor(1.1)) = 1 client per tail, not ceil's 2.
    v = np.arange(11, dtype=float)
    assert tail_mean(v) == 0.0 and tail_mean(v, lowest=False) == 10.0
    # 25 clients: floor(2.5) = 2; the two lowest are 0 (weight 1) and 1 (weight 3): 3/4.
    v = np.arange(25, dtype=float)
    w = np.ones(25)
    w[1] = 3.0
    assert tail_mean(v, w) == pytest.approx(0.75)
    assert tail_mean(v, w, lowest=False) == pytest.approx(23.5)


def test_pack_by_hand():
    # values 0.2, 0.4, 0.6, 0.8 with test sizes 1, 1, 1, 5: avg = (0.2+0.4+0.6+4)/8 = 0.65.
    # Gini = Σ_i (2i - n - 1) x_(i) / (n Σx) = (-3·0.2 - 0.4 + 0.6 + 3·0.8) / (4·2) = 0.25.
    pack = aaggff_pack([0.6, 0.2, 0.8, 0.4], [1, 1, 5, 1])
    assert pack["avg"] == pytest.approx(0.65)
    assert pack["worst"] == pytest.approx(0.2) and pack["best"] == pytest.approx(0.8)
    assert pack["gini100"] == pytest.approx(25.0)
    assert pack["gap"] == pytest.approx(0.6) == parity_gap([0.6, 0.2, 0.8, 0.4])
    # A loss: the worst client is the highest value.
    loss = aaggff_pack([0.6, 0.2, 0.8, 0.4], higher_is_better=False)
    assert loss["worst"] == pytest.approx(0.8) and loss["best"] == pytest.approx(0.2)
    assert aaggff_pack([0.0, 0.0])["gini100"] == 100.0  # the release maps its NaN to 1


def test_auroc_by_hand():
    # Positives score 0.8 and 0.4, negatives 0.5 and 0.1: of the 4 (pos, neg) pairs, 3 are ordered.
    assert auroc([0.8, 0.4, 0.5, 0.1], [1, 1, 0, 0]) == pytest.approx(0.75)
    # A tie between a positive and a negative counts one half: pairs (0.5 vs 0.5) = 1/2, 1 -> 0.75.
    assert auroc([0.5, 0.5, 0.2], [1, 0, 0]) == pytest.approx(0.75)
    assert math.isnan(auroc([0.1, 0.2], [1, 1]))


def test_cumulative_objective_by_hand():
    nan = float("nan")
    F = [[1.0, 2.0, nan], [nan, 3.0, 1.0]]
    p = [[0.5, 0.25, 0.25], [0.2, 0.3, 0.5]]
    # thesis: round 1: 0.5 + 0.5 = 1; round 2: 0.9 + 0.5 = 1.4.
    np.testing.assert_allclose(cumulative_objective(F, p), [1.0, 2.4])
    np.testing.assert_allclose(
        cumulative_objective(F, p, "code"), [-math.log(2.0), -math.log(2.0) - math.log(2.4)]
    )
    with pytest.raises(ValueError, match="form"):
        cumulative_objective(F, p, "paper")
