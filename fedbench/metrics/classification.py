"""Loss and top-k accuracy, as sums so that batches and clients combine exactly."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def topk_correct(logits: torch.Tensor, targets: torch.Tensor, k: int) -> torch.Tensor:
    """Number of rows whose target is among the k largest logits (k capped at the class count)."""
    k = min(k, logits.shape[-1])
    top = logits.topk(k, dim=-1).indices
    return (top == targets.unsqueeze(-1)).any(dim=-1).sum()


def classification_counts(
    logits: torch.Tensor, targets: torch.Tensor, ks: tuple[int, ...] = (1, 5)
) -> dict[str, float]:
    """Summed cross-entropy, top-k correct counts and n for one batch (divide by n for means)."""
    out = {"loss_sum": float(F.cross_entropy(logits, targets, reduction="sum")), "n": len(targets)}
    for k in ks:
        out[f"top{k}_correct"] = float(topk_correct(logits, targets, k))
    return out
