"""The per-client distribution pack every paper's tables draw on (mean, spread, tails, Gini)."""

from __future__ import annotations

import math
import re

import numpy as np

PACK_STATS = (
    "mean",
    "wmean",
    "std",
    "min",
    "max",
    "worst10",
    "best10",
    "gini",
    "worst10_release",
    "best10_release",
)


# A table cell may read one client's own value instead of a pack stat: `client<k>` (client id k;
# DQN-Fed's Table 9 prints each of its three class-clients' accuracy). Read from the run's
# per-client values, not stored in the pack.
CLIENT_STAT = re.compile(r"client(\d+)")


def client_stat(stat: str) -> int | None:
    """The client id k of a per-client stat `client<k>`, else None."""
    match = CLIENT_STAT.fullmatch(str(stat))
    return int(match.group(1)) if match else None


def gini(values: np.ndarray) -> float:
    """Gini coefficient: mean absolute pairwise difference over twice the mean (0 = equal)."""
    return _gini_sorted(np.sort(np.asarray(values, dtype=np.float64)))


def _gini_sorted(v: np.ndarray) -> float:
    """`gini` of values already sorted ascending (float64)."""
    n = len(v)
    if n == 0:
        return float("nan")
    mean = v.mean()
    if mean == 0:
        return 0.0
    # sum_{i,j} |v_i - v_j| = 2 * sum_i (2i - n + 1) v_i for ascending v (0-based i).
    diff_sum = 2.0 * np.sum((2 * np.arange(n) - n + 1) * v)
    return float(diff_sum / (2.0 * n * n * mean))


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
    return _release_tails(v, w, tail)[0 if lowest else 1]


def _release_tails(v: np.ndarray, w: np.ndarray, tail: float) -> tuple[float, float]:
    """`tail_mean`'s lowest and highest tails of checked arrays, from one stable argsort."""
    num = max(1, math.floor(tail * len(v)))
    order = np.argsort(v, kind="stable")
    return tuple(_weighted_mean(v, w, pick) for pick in (order[:num], order[::-1][:num]))


def _weighted_mean(v: np.ndarray, w: np.ndarray, pick: np.ndarray) -> float:
    """The `w`-weighted mean of v[pick] (the plain mean where those weights are all 0)."""
    if w[pick].sum() == 0:
        return float(v[pick].mean())
    return float(np.sum(v[pick] * w[pick]) / w[pick].sum())


def distribution_pack(values, weights=None, tail: float = 0.1) -> dict[str, float]:
    """Summary of per-client values: mean, weighted mean, population std, min, max, tails, Gini.

    `worst10` / `best10` average the lowest / highest ceil(tail * K) values (at least one client);
    `worst10_release` / `best10_release` the max(1, floor(tail * K)) lowest / highest weighted by
    `weights` (the test-set sizes), as the AAggFF release does (its tables' Worst / Best 10 %).
    "worst" means lowest, so for a loss read `best10` as the worst clients.
    """
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 1 or len(v) == 0:
        raise ValueError(f"distribution_pack needs a non-empty 1-D array, got shape {v.shape}")
    w = np.ones_like(v) if weights is None else np.asarray(weights, dtype=np.float64)
    if w.shape != v.shape or np.any(w < 0) or w.sum() <= 0:
        raise ValueError("weights must be non-negative, of the same length as values, not all 0")
    m = max(1, math.ceil(tail * len(v)))
    s = np.sort(v)  # one sort and one stable argsort serve every stat below
    worst_release, best_release = _release_tails(v, w, tail)
    return {
        "mean": float(v.mean()),
        "wmean": float(np.sum(w * v) / w.sum()),
        "std": float(v.std()),
        "min": float(s[0]),
        "max": float(s[-1]),
        "worst10": float(s[:m].mean()),
        "best10": float(s[-m:].mean()),
        "gini": _gini_sorted(s),
        "worst10_release": worst_release,
        "best10_release": best_release,
    }


# DQN-Fed's fairness readings (specs/qffl-dqnfed.md §B.6), over per-client accuracies a_k.


def qffl_tail(values, p: float, lowest: bool = True, at_least_one: bool = True) -> float:
    """The unweighted mean of the n lowest (highest) of the K values: the q-FFL code's "worst
    (best) p of the clients" (fair_flearn's plot_fairness.py: n = int(p·K)); p = 0.1 for
    "Worst 10 %", 0.05 for Table 1's Setup 1. Where p·K < 1 the release's n is 0 and its mean
    NaN (empty slice); here, by default, n = max(1, int(p·K)): the single lowest (highest)
    client. `at_least_one=False` is the release's reading, NaN when int(p·K) = 0."""
    v, _ = _arrays(values, None)
    if not 0 < p <= 1:
        raise ValueError(f"qffl_tail: p must be in (0, 1], got {p!r}")
    n = int(p * len(v))
    if n == 0:
        if not at_least_one:
            return float("nan")
        n = 1
    s = np.sort(v)
    return float(s[:n].mean() if lowest else s[-n:].mean())


def angle_to_uniform(values) -> float:
    """The angle (degrees) between the accuracy vector a and the all-ones vector,
    arccos(Σa_k / (√K ‖a‖)) (Table 5's "Ang"); it equals atan(σ_a / ā) with the population σ.
    0 when every client has the same accuracy; NaN for an all-zero vector."""
    v, _ = _arrays(values, None)
    norm = float(np.linalg.norm(v))
    if norm == 0:
        return float("nan")
    cos = float(v.sum()) / (np.sqrt(len(v)) * norm)
    return float(np.degrees(np.arccos(np.clip(cos, -1.0, 1.0))))


def kl_to_uniform(values) -> float:
    """KL(a‖u) of the accuracies normalised to a distribution, p_k = a_k / Σa_j, against the
    uniform one: Σ p_k ln(p_k K) (Table 5's "KL"); 0 iff all a_k are equal, a zero a_k adds 0."""
    v, _ = _arrays(values, None)
    if np.any(v < 0) or v.sum() <= 0:
        raise ValueError("kl_to_uniform needs non-negative values that are not all 0")
    p = v / v.sum()
    nz = p > 0
    return float(np.sum(p[nz] * np.log(p[nz] * len(v))))


def _kl_or_nan(values) -> float:
    v = np.asarray(values, dtype=np.float64)
    return float("nan") if v.sum() <= 0 else kl_to_uniform(v)


# Stats a table reads from a run's per-client values at read time (not stored in the pack that
# metrics.jsonl holds, so runs recorded before they existed can be read with them): DQN-Fed's
# worst / best p % as the q-FFL code counts them (Table 1 Setup 1 takes p = 5 %, the rest 10 %),
# the Angle (degrees) and KL(a‖u) of Table 5 (spec §B.6). Angle and KL are scale-free: a percent
# table prints them unscaled (UNSCALED_STATS).
VECTOR_STATS = {
    "worst5_qffl": lambda v: qffl_tail(v, 0.05, lowest=True),
    "best5_qffl": lambda v: qffl_tail(v, 0.05, lowest=False),
    "worst10_qffl": lambda v: qffl_tail(v, 0.1, lowest=True),
    "best10_qffl": lambda v: qffl_tail(v, 0.1, lowest=False),
    "angle": angle_to_uniform,
    "kl": _kl_or_nan,
}
UNSCALED_STATS = ("angle", "kl")


def vector_stat(stat: str, values) -> float:
    """A VECTOR_STATS stat over per-client values, NaN ones left out (NaN when none is left)."""
    if stat not in VECTOR_STATS:
        raise ValueError(f"unknown per-client stat {stat!r}; valid: {list(VECTOR_STATS)}")
    v = np.asarray([np.nan if x is None else x for x in values], dtype=np.float64)
    v = v[np.isfinite(v)]
    return float(VECTOR_STATS[stat](v)) if len(v) else float("nan")
