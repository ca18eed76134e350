"""Local batch order: index tensors drawn from the run's seeded `batches` stream."""

from __future__ import annotations

import math

import numpy as np
import torch


def num_local_steps(n: int, batch_size: int, epochs: int | None, steps: int | None) -> int:
    """Local steps of one client per round: E * ceil(n / B) (epochs) or a fixed count (steps)."""
    if steps is not None:
        return steps
    return epochs * math.ceil(n / batch_size)


def batch_plan(
    indices: torch.Tensor,
    batch_size: int,
    rng: np.random.Generator,
    epochs: int | None = 1,
    steps: int | None = None,
) -> list[torch.Tensor]:
    """Mini-batches of `indices`: reshuffled every epoch, last batch kept short (drop_last=False).

    With `steps`, batches are drawn from consecutive shuffled passes until `steps` are made.
    """
    n = len(indices)
    total = num_local_steps(n, batch_size, epochs, steps)
    plan: list[torch.Tensor] = []
    while len(plan) < total:
        order = torch.from_numpy(rng.permutation(n)).to(indices.device)
        shuffled = indices[order]
        for start in range(0, n, batch_size):
            plan.append(shuffled[start : start + batch_size])
            if len(plan) == total:
                break
    return plan
