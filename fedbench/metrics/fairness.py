"""Client-level fairness metrics as the AAggFF chapter reports them (spec aaggff.md §10.5, §11).

`distribution_pack` (distribution.py) averages the ceil(10%) lowest values unweighted; the AAggFF
release takes max(1, floor(10% of n)) clients and weights them by test-set size, and the two differ
at K = 11 (MQP: 2 clients vs 1). `aaggff_pack` follows the release.
"""

from __future__ import annotations

import math

import numpy as np

from fedbench.metrics.distribution import gini

AAGGFF_STATS = ("avg", "worst", "best", "gini100", "gap")


def _arrays(values, weights) -> tuple[np.ndarray, np.ndarray]:
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 1 or len(v) == 0:
        raise ValueError(f"need a non-empty 1-D array of per-client values, got shape {v.shape}")
    w = np.ones_like(v) if weights is None else np.asarray(weights, dtype=np.float64)
    if w.shape != v.shape or np.any(w < 0) or w.sum() <= 0:
        raise ValueError("weights must be non-negative, of the same length as values, not all 0")
    return v, w


def tail_mean(values, weights=None, tail: float = 0.1, lowest: bool = True) -> float:
    """Weighted mean of the max(1, floor(tail·n)) lowest (or highest) values (AAggFF release)."""
    v, w = _arrays(values, weights)
    num = max(1, math.floor(tail * len(v)))
    order = np.argsort(v, kind="stable")
    pick = order[:num] if lowest else order[::-1][:num]
    if w[pick].sum() == 0:
        return float(v[pick].mean())
    return float(np.sum(v[pick] * w[pick]) / w[pick].sum())


def aaggff_pack(
    values, weights=None, tail: float = 0.1, higher_is_better: bool = True
) -> dict[str, float]:
    """Avg (weighted by `weights`, the test-set sizes), worst / best 10%, Gini ×100, and the
    accuracy-parity gap ΔAG = best - worst (Tables 3.6-3.9). For a loss (`higher_is_better`
    False) the worst clients are the highest values. Gini of all-zero values is 100, as the
    release maps its NaN to 1."""
    v, w = _arrays(values, weights)
    worst = tail_mean(v, w, tail, lowest=higher_is_better)
    best = tail_mean(v, w, tail, lowest=not higher_is_better)
    g = 1.0 if not np.any(v) else gini(v)
    return {
        "avg": float(np.sum(v * w) / w.sum()),
        "worst": worst,
        "best": best,
        "gini100": 100.0 * g,
        "gap": abs(best - worst),
    }


def parity_gap(values, weights=None, tail: float = 0.1) -> float:
    """ΔAG: best minus worst performing clients (Tables 3.8-3.9), as in `aaggff_pack`."""
    return aaggff_pack(values, weights, tail)["gap"]


def auroc(scores, labels) -> float:
    """Area under the ROC curve (Mann-Whitney U with tie-averaged ranks); NaN with one class."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels).astype(bool)
    pos, neg = int(y.sum()), int((~y).sum())
    if pos == 0 or neg == 0:
        return float("nan")
    order = np.argsort(s, kind="mergesort")
    ranks = np.empty(len(s))
    sorted_s = s[order]
    i = 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and sorted_s[j + 1] == sorted_s[i]:
            j += 1
        ranks[order[i : j + 1]] = 0.5 * (i + j) + 1.0
        i = j + 1
    return float((ranks[y].sum() - pos * (pos + 1) / 2.0) / (pos * neg))


def cumulative_objective(losses, p, form: str = "thesis") -> np.ndarray:
    """Figure 3.1's cumulative global objective over rounds.

    `losses` [T, K]: each client's pre-training loss F_i(θ^(t)), NaN where not observed (not
    sampled); `p` [T, K]: the coefficients in force before round t's decision (unnormalised in
    cross-device). thesis: cumsum_t Σ_{observed i} p_i F_i. code: cumsum_t -log(1 + ⟨F, p⟩) with
    0 for unobserved F (what the release logs under the same name; spec §11).
    """
    F = np.asarray(losses, dtype=np.float64)
    P = np.asarray(p, dtype=np.float64)
    if F.shape != P.shape or F.ndim != 2:
        raise ValueError(f"losses and p must both be [rounds, clients], got {F.shape}, {P.shape}")
    seen = np.nan_to_num(F, nan=0.0)
    if form == "thesis":
        per_round = np.sum(P * seen, axis=1)
    elif form == "code":
        per_round = -np.log1p(np.sum(P * seen, axis=1))
    else:
        raise ValueError(f"form must be 'thesis' or 'code', got {form!r}")
    return np.cumsum(per_round)
