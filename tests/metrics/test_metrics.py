import math

import numpy as np
import pytest
import torch

from fedbench.metrics import PACK_STATS, classification_counts, distribution_pack, gini


def test_pack_by_hand():
    v = [0.2, 0.4, 0.6, 0.8, 1.0, 0.0, 0.5, 0.9, 0.3, 0.7, 0.1]  # K = 11 -> tails of 2 clients
    w = [1] * 10 + [9]
    p = distribution_pack(v, w)
    assert p["mean"] == pytest.approx(5.5 / 11)
    assert p["wmean"] == pytest.approx((5.5 - 0.1 + 0.9) / 19)
    assert p["std"] == pytest.approx(np.std(v))
    assert (p["min"], p["max"]) == (0.0, 1.0)
    assert p["worst10"] == pytest.approx(0.05) and p["best10"] == pytest.approx(0.95)


def test_tails_have_at_least_one_client():
    p = distribution_pack([0.3, 0.9])
    assert p["worst10"] == 0.3 and p["best10"] == 0.9


def test_gini_by_hand():
    assert gini(np.array([1.0, 1.0, 1.0])) == 0.0
    # [0, 0, 0, 1]: sum |xi - xj| = 6, mean 0.25 -> 6 / (2 * 16 * 0.25) = 0.75
    assert gini(np.array([0.0, 0.0, 0.0, 1.0])) == pytest.approx(0.75)
    assert math.isnan(gini(np.array([])))


def _pack_before(values, weights, tail=0.1):
    """The pack as computed before one sort and one argsort served every stat (2026-12-05): each
    stat on its own, the same numpy operations. Kept to prove the recorded bits unchanged."""
    v, w = np.asarray(values, dtype=np.float64), np.asarray(weights, dtype=np.float64)
    m, s = max(1, math.ceil(tail * len(v))), np.sort(v)

    def release(lowest):
        num = max(1, math.floor(tail * len(v)))
        order = np.argsort(v, kind="stable")
        pick = order[:num] if lowest else order[::-1][:num]
        if w[pick].sum() == 0:
            return float(v[pick].mean())
        return float(np.sum(v[pick] * w[pick]) / w[pick].sum())

    g = np.sort(v)
    mean = g.mean()
    n = len(g)
    diff = 2.0 * np.sum((2 * np.arange(n) - n + 1) * g)
    values = (
        v.mean(),
        np.sum(w * v) / w.sum(),
        v.std(),
        s[0],
        s[-1],
        s[:m].mean(),
        s[-m:].mean(),
        0.0 if mean == 0 else diff / (2.0 * n * n * mean),
        release(True),
        release(False),
    )  # in PACK_STATS order
    return {key: float(x) for key, x in zip(PACK_STATS, values, strict=True)}


@pytest.mark.parametrize("k", [1, 2, 3, 9, 10, 11, 19, 20, 21, 99, 100, 101, 1000])
def test_pack_bits_unchanged(k):
    """Every stat of the pack bit for bit as before, over values with ties, zeros, a NaN and
    test-set sizes with zeros (accuracies on a grid of 1/n, losses, all equal)."""
    rng = np.random.default_rng(k)
    n = rng.integers(0, 40, k)
    n[0] = max(n[0], 1)
    for v in (
        rng.random(k),
        np.round(rng.random(k) * 10) / 10,  # ties
        rng.exponential(2.0, k),
        np.zeros(k),
        np.full(k, 0.25),
        np.where(rng.random(k) < 0.1, np.nan, rng.random(k)),
    ):
        for w in (n, np.ones(k), None):
            got = distribution_pack(list(v), None if w is None else list(w))
            want = _pack_before(v, np.ones(k) if w is None else w)
            assert got.keys() == want.keys()
            for key in want:
                assert np.float64(got[key]).tobytes() == np.float64(want[key]).tobytes(), key


def test_pack_rejects_bad_input():
    with pytest.raises(ValueError):
        distribution_pack([])
    with pytest.raises(ValueError):
        distribution_pack([1.0, 2.0], [1.0])


def test_classification_counts_by_hand():
    logits = torch.tensor([[2.0, 1.0, 0.0], [0.0, 1.0, 2.0], [1.0, 3.0, 2.0]])
    y = torch.tensor([0, 0, 2])
    c = classification_counts(logits, y, ks=(1, 2, 5))
    assert c["n"] == 3 and c["top1_correct"] == 1 and c["top2_correct"] == 2
    assert c["top5_correct"] == 3  # k capped at the 3 classes
    expected = sum(-torch.log_softmax(logits, 1)[i, y[i]].item() for i in range(3))
    assert c["loss_sum"] == pytest.approx(expected)


def test_release_tails_by_hand():
    # 20 clients 0.0, 0.1, ..., 1.9: the release takes max(1, floor(2.0)) = 2 clients per tail,
    # weighted by test size; the lowest two 0.0 (size 3) and 0.1 (size 1): 0.1 / 4 = 0.025; the
    # highest two 1.9 (size 1) and 1.8 (size 4): (1.9 + 7.2) / 5 = 1.82. The ceil tails are
    # unweighted: 0.05 and 1.85.
    v = np.arange(20) / 10
    w = np.ones(20)
    w[0], w[18] = 3.0, 4.0
    perm = np.random.default_rng(0).permutation(20)
    p = distribution_pack(v[perm], w[perm])
    assert p["worst10_release"] == pytest.approx(0.025)
    assert p["best10_release"] == pytest.approx(1.82)
    assert p["worst10"] == pytest.approx(0.05) and p["best10"] == pytest.approx(1.85)
    # K = 11 (MQP): the release's 1 client per tail against ceil's 2.
    q = distribution_pack(np.arange(11) / 10)
    assert (q["worst10_release"], q["best10_release"]) == (0.0, 1.0)
    assert q["worst10"] == pytest.approx(0.05) and q["best10"] == pytest.approx(0.95)
