"""Verdicts of one comparison over seeds, and how a claim's comparisons combine.

A comparison is a per-seed quantity Δ whose claimed side is Δ > 0 (or Δ ≥ 0 for a non-strict
one: "within a tolerance", "at least d"). Over seeds, not over means: with the same seeds in every
cell it reads, Δ is computed seed by seed and a two-sided 95 % t-interval of its mean is taken
over those paired values (n - 1 degrees of freedom); a difference of cells that share too few
seeds takes Welch's interval of the difference of their means instead. The verdict:

- supported: the interval lies on the claimed side (its lower end > 0);
- contradicted: the interval lies on the other side (its upper end < 0, or ≤ 0 for a strict one);
- inconclusive: the interval straddles 0;
- not run: a cell has no finished run, or fewer than 2 seeds (never a verdict from one seed).

A computed cell (a closed-form table, no seeds) is exact: its Δ decides alone. On the paper's
own printed numbers there is no interval: a comparison holds or fails.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

SUPPORTED = "supported"
CONTRADICTED = "contradicted"
INCONCLUSIVE = "inconclusive"
NOT_RUN = "not run"
VERDICTS = (SUPPORTED, CONTRADICTED, INCONCLUSIVE, NOT_RUN)
# The paper's own printed values: one number per cell, so a comparison holds or it does not.
HOLDS = "holds"
FAILS = "fails"
NO_VALUES = "no printed values"
PAPER_VERDICTS = (HOLDS, FAILS, NO_VALUES)
LEVEL = 0.95
QUANTIFIERS = ("every", "most")
# Printed numbers are compared with this slack, so 74.87 - 71.81 >= 3.06 holds in floating point.
EPS = 1e-9


@dataclass(frozen=True)
class Interval:
    """A 95 % t-interval of a comparison's Δ over seeds (lo == hi == mean when exact)."""

    n: int
    mean: float
    lo: float
    hi: float
    how: str  # "paired (n seeds)", "Welch", "exact"


def t_interval(values: Sequence[float], level: float = LEVEL) -> Interval:
    """The paired t-interval: mean ± t_{(1+level)/2, n-1} · sd / √n of per-seed differences."""
    x = np.asarray(values, dtype=np.float64)
    n = len(x)
    if n < 2:
        raise ValueError(f"a t-interval needs at least 2 values, got {n}")
    mean = float(x.mean())
    half = float(stats.t.ppf(0.5 + level / 2, n - 1) * x.std(ddof=1) / math.sqrt(n))
    return Interval(n, mean, mean - half, mean + half, f"paired over {n} seeds")


def welch_interval(
    terms: Sequence[tuple[float, Sequence[float]]], const: float = 0.0, level: float = LEVEL
) -> Interval:
    """Σ c_i · mean(x_i) + const ± t · √(Σ c_i² s_i² / n_i), Welch-Satterthwaite degrees of
    freedom: cells whose runs do not share seeds (each needs 2 or more)."""
    means, variances, dfs = [], [], []
    for coef, vals in terms:
        x = np.asarray(vals, dtype=np.float64)
        if len(x) < 2:
            raise ValueError(f"Welch's interval needs at least 2 values per cell, got {len(x)}")
        means.append(coef * x.mean())
        variances.append(coef**2 * x.var(ddof=1) / len(x))
        dfs.append(len(x) - 1)
    mean = float(sum(means) + const)
    var = float(sum(variances))
    if var == 0:
        return Interval(min(d + 1 for d in dfs), mean, mean, mean, "Welch")
    df = var**2 / sum(v**2 / d for v, d in zip(variances, dfs) if v > 0)
    half = float(stats.t.ppf(0.5 + level / 2, df) * math.sqrt(var))
    return Interval(min(d + 1 for d in dfs), mean, mean - half, mean + half, "Welch")


def interval_verdict(iv: Interval, strict: bool) -> str:
    """supported / contradicted / inconclusive from where the interval lies against 0."""
    if (iv.lo > 0) if strict else (iv.lo >= 0):
        return SUPPORTED
    if (iv.hi <= 0) if strict else (iv.hi < 0):
        return CONTRADICTED
    return INCONCLUSIVE


def printed_verdict(delta: float, strict: bool) -> str:
    """holds / fails of one comparison on printed numbers (slack EPS for their rounding)."""
    return HOLDS if (delta > EPS if strict else delta >= -EPS) else FAILS


def combine(verdicts: Sequence[str], quantifier: str = "every") -> str:
    """The verdict of comparisons that must all hold ("every") or more than half ("most").

    every: contradicted if any is, supported if all are, else not run if any is, else
    inconclusive. most (N comparisons): supported if more than N/2 are, contradicted if N/2 or
    more are (the rest cannot make a majority), else not run if any is, else inconclusive.
    Paper verdicts (holds / fails / no printed values) combine the same way.
    """
    if quantifier not in QUANTIFIERS:
        raise ValueError(f"quantifier must be one of {list(QUANTIFIERS)}, got {quantifier!r}")
    if not verdicts:
        raise ValueError("nothing to combine")
    paper = any(v in PAPER_VERDICTS for v in verdicts)
    yes, no, missing = (HOLDS, FAILS, NO_VALUES) if paper else (SUPPORTED, CONTRADICTED, NOT_RUN)
    n = len(verdicts)
    n_yes, n_no = verdicts.count(yes), verdicts.count(no)
    if quantifier == "every":
        if n_no:
            return no
        if n_yes == n:
            return yes
    else:
        if n_yes > n / 2:
            return yes
        if n_no >= n / 2:
            return no
    if missing in verdicts:
        return missing
    return INCONCLUSIVE
