"""A figure's optional `smooth` key: Savitzky-Golay filtering of each run's per-round curve."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from fedbench.config import ConfigError

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


def parse_smooth(where: str, raw: Any) -> Savgol | None:
    """`{savgol: {window: odd int >= 1, order: 0 <= int < window}}` or None; errors name keys."""
    if raw is None:
        return None
    if not isinstance(raw, dict) or len(raw) != 1:
        raise ConfigError(
            f"{where}.smooth: expected one smoother as a mapping, e.g. "
            f"{{savgol: {{window: 9, order: 2}}}}; valid smoothers: {list(SMOOTHERS)}; got {raw!r}"
        )
    ((name, params),) = raw.items()
    if name not in SMOOTHERS:
        raise ConfigError(f"{where}.smooth: unknown smoother {name!r}; valid: {list(SMOOTHERS)}")
    place = f"{where}.smooth.{name}"
    if not isinstance(params, dict):
        raise ConfigError(f"{place}: expected a mapping with {list(SAVGOL_KEYS)}, got {params!r}")
    unknown = sorted(set(params) - set(SAVGOL_KEYS))
    if unknown:
        raise ConfigError(f"{place}: unknown key(s) {unknown}; valid: {list(SAVGOL_KEYS)}")
    for key in SAVGOL_KEYS:
        value = params.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ConfigError(f"{place}.{key}: expected an integer >= 0, got {value!r}")
    window, order = params["window"], params["order"]
    if window < 1 or window % 2 == 0:
        raise ConfigError(f"{place}.window: expected an odd integer >= 1, got {window!r}")
    if order >= window:
        raise ConfigError(f"{place}.order: must be below the window ({window}), got {order!r}")
    return Savgol(window, order)
