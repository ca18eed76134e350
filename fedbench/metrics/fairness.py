"""Client-level fairness metrics as the AAggFF chapter reports them (spec aaggff.md §10.5, §11).

`distribution_pack` (distribution.py) has both tails: worst10 / best10 average the ceil(10%) lowest
/ highest values unweighted; worst10_release / best10_release take max(1, floor(10% of n)) clients
weighted by test-set size, as the AAggFF release does (`tail_mean`); the two differ at K = 11 (MQP:
2 clients vs 1) and whenever tail clients' test sizes differ. `aaggff_pack` follows the release.
"""

from __future__ import annotations

import numpy as np
import torch

from fedbench.metrics.classification import auroc_per_group
from fedbench.metrics.distribution import (
    _arrays,
    angle_to_uniform,
    gini,
    kl_to_uniform,
    qffl_tail,
    tail_mean,
)

__all__ = [
    "aaggff_pack",
    "angle_to_uniform",
    "auroc",
    "cumulative_objective",
    "kl_to_uniform",
    "parity_gap",
    "qffl_tail",
    "tail_mean",
]

AAGGFF_STATS = ("avg", "worst", "best", "gini100", "gap")


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
    s = torch.as_tensor(np.asarray(scores, dtype=np.float64))
    y = torch.as_tensor(np.asarray(labels).astype(bool))
    return float(auroc_per_group(s, y, torch.zeros(len(s), dtype=torch.long), 1)[0])


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


# DQN-Fed's fairness readings (qffl_tail, angle_to_uniform, kl_to_uniform) live in distribution.py,
# below the report layer, which reads them as table stats (VECTOR_STATS).
