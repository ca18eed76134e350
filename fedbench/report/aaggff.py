"""AAggFF chapter computations that need no training: Table 3.3 (thesis §5.1, spec aaggff.md §7)."""

from __future__ import annotations

import numpy as np

from fedbench.algorithms.aaggff import cdf

# Table 3.3's example losses and its rows, in the thesis's order.
TABLE3_3_LOSSES = (0.01, 0.10, 0.02)
TABLE3_3_ROWS = ("weibull", "frechet", "gumbel", "exponential", "logistic", "normal")


def table3_3(
    losses: tuple[float, ...] = TABLE3_3_LOSSES, input_decimals: int | None = 2, decimals: int = 2
) -> dict[str, list[float]]:
    """Transformed responses CDF(F_i / F̄) per CDF, rounded as printed.

    The thesis rounds the CDF inputs to two decimals (0.23, 2.31, 0.46) before transforming;
    `input_decimals=None` uses the exact ratios (the Normal row's third value becomes 0.30).
    """
    f = np.asarray(losses, dtype=np.float64)
    x = f / f.mean()
    if input_decimals is not None:
        x = np.round(x, input_decimals)
    return {name: [round(float(v), decimals) for v in cdf(name, x)] for name in TABLE3_3_ROWS}
