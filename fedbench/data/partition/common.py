"""Checks and conversions every partitioner shares."""

from __future__ import annotations

from typing import Any

import numpy as np


def _check_clients(num_clients: int, n: int) -> None:
    if int(num_clients) != num_clients or num_clients < 1:
        raise ValueError(f"num_clients must be a positive integer, got {num_clients!r}")
    if num_clients > n:
        raise ValueError(f"num_clients={num_clients} exceeds the {n} samples available")


def _as_clients(parts: list[np.ndarray]) -> list[np.ndarray]:
    return [np.sort(np.asarray(p, dtype=np.int64)) for p in parts]


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)
