"""Natural clients: one client per group id (a writer, a speaker, a user)."""

from __future__ import annotations

import numpy as np

from fedbench.data.partition.common import _as_clients


def natural(groups: np.ndarray) -> list[np.ndarray]:
    """One client per distinct group id (in increasing id order)."""
    groups = np.asarray(groups)
    if groups.ndim != 1 or len(groups) == 0:
        raise ValueError("natural partition needs a non-empty 1-D array of group ids")
    order = np.argsort(groups, kind="stable")
    _, starts = np.unique(groups[order], return_index=True)
    return _as_clients(np.split(order, starts[1:]))
