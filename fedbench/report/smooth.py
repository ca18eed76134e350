"""Savitzky-Golay filtering of each run's per-round curve (a figure's `smooth` key, parsed by
`fedbench.outputs.curves`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

SMOOTHERS = ("savgol",)
SAVGOL_KEYS = ("window", "order")


@dataclass(frozen=True)
class Savgol:
    """scipy.signal.savgol_filter (mode 'interp') with a window clipped to the series length."""

    window: int
    order: int

    def clipped(self, n: int) -> tuple[int, int]:
        """(window, order) for a series of n points: the largest odd window <= n, and an order
        below it (a 2-round smoke curve gets window 1, order 0: unchanged)."""
        window = min(self.window, n if n % 2 else n - 1)
        return window, min(self.order, max(window - 1, 0))

    def series(self, s: pd.Series) -> pd.Series:
        """The smoothed series (same index)."""
        window, order = self.clipped(len(s))
        if window < 1:
            return s
        from scipy.signal import savgol_filter  # local: keeps scipy out of importers' start-up

        values = savgol_filter(s.to_numpy(dtype=np.float64), window, order, mode="interp")
        return pd.Series(values, index=s.index, name=s.name)

    def describe(self, n: int | None = None) -> str:
        """'Savitzky-Golay smoothed (window 9, order 2)', plus what clipping left at n points."""
        text = f"Savitzky-Golay smoothed (window {self.window}, order {self.order})"
        if n is not None and self.clipped(n) != (self.window, self.order):
            window, order = self.clipped(n)
            text += f", clipped to window {window}, order {order} for {n} points"
        return text
