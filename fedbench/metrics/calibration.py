"""Expected and maximum calibration error (Guo et al. 2017; Naeini et al. 2015), per group.

Confidence = max softmax probability; equal-width bins on (0, 1] with the test lower < c <= upper.
ECE = sum_b (n_b / n) |acc_b - conf_b|; MCE = max over non-empty bins of |acc_b - conf_b|.
Groups are clients (a whole test split) or, for the SuPerFed release's estimator, each client's
consecutive evaluation mini-batches, whose ECE/MCE are then averaged per client.
"""

from __future__ import annotations

import torch


def calibration_by_group(
    confidence: torch.Tensor,
    correct: torch.Tensor,
    group: torch.Tensor,
    num_groups: int,
    bins: int = 15,
) -> tuple[torch.Tensor, torch.Tensor]:
    """ECE and MCE of every group (float64 tensors of length num_groups; 0 for empty groups)."""
    b = (torch.ceil(confidence.double() * bins).long() - 1).clamp(0, bins - 1)
    flat = group * bins + b
    size = num_groups * bins
    count = torch.zeros(size, dtype=torch.float64, device=confidence.device)
    conf_sum = torch.zeros_like(count)
    hit_sum = torch.zeros_like(count)
    count.index_add_(0, flat, torch.ones_like(flat, dtype=torch.float64))
    conf_sum.index_add_(0, flat, confidence.double())
    hit_sum.index_add_(0, flat, correct.double())
    gap = (hit_sum - conf_sum).abs().view(num_groups, bins)
    count = count.view(num_groups, bins)
    n = count.sum(dim=1)
    ece = gap.sum(dim=1) / n.clamp(min=1)
    per_bin = torch.where(count > 0, gap / count.clamp(min=1), torch.zeros_like(gap))
    return ece, per_bin.amax(dim=1)


def calibration_per_client(
    confidence: torch.Tensor,
    correct: torch.Tensor,
    owner: torch.Tensor,
    num_clients: int,
    bins: int = 15,
    batch_size: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-client ECE and MCE; with `batch_size`, averaged over the client's consecutive batches.

    `owner` must list each client's samples contiguously and in order (as the evaluator does).
    """
    if batch_size is None:
        return calibration_by_group(confidence, correct, owner, num_clients, bins)
    counts = torch.bincount(owner, minlength=num_clients)
    starts = torch.cumsum(counts, 0) - counts
    position = torch.arange(len(owner), device=owner.device) - starts[owner]
    batches_per_client = (counts + batch_size - 1) // batch_size
    first_batch = torch.cumsum(batches_per_client, 0) - batches_per_client
    group = first_batch[owner] + position // batch_size
    total = int(batches_per_client.sum())
    ece_b, mce_b = calibration_by_group(confidence, correct, group, total, bins)
    batch_owner = torch.repeat_interleave(
        torch.arange(num_clients, device=owner.device), batches_per_client
    )
    denom = batches_per_client.clamp(min=1).double()
    ece = torch.zeros(num_clients, dtype=torch.float64, device=owner.device)
    mce = torch.zeros_like(ece)
    ece.index_add_(0, batch_owner, ece_b)
    mce.index_add_(0, batch_owner, mce_b)
    return ece / denom, mce / denom
