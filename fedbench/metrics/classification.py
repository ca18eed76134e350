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
    """Summed cross-entropy, top-k correct counts and n for one batch (divide by n for means).

    Softmax cross-entropy only; the engine scores every objective through
    fedbench.objectives."""
    out = {"loss_sum": float(F.cross_entropy(logits, targets, reduction="sum")), "n": len(targets)}
    for k in ks:
        out[f"top{k}_correct"] = float(topk_correct(logits, targets, k))
    return out


def auroc_per_group(
    scores: torch.Tensor, positive: torch.Tensor, owner: torch.Tensor, groups: int
) -> torch.Tensor:
    """Exact AUROC of each group's samples: the Mann-Whitney U over positives x negatives, ties
    counted one half (tie-averaged ranks), as sklearn's roc_auc_score; NaN for a group with one
    class only (undefined; sklearn raises there) or with a non-finite score.

    scores [n] float, positive [n] bool, owner [n] in [0, groups); returns [groups] float64.
    """
    dev = scores.device
    s = scores.detach().to(torch.float64)
    owner = owner.to(torch.long)
    pos = positive.to(torch.bool)
    # Sort by (owner, score): a stable sort by score, then a stable sort by owner.
    by_score = torch.sort(s, stable=True).indices
    order = by_score[torch.sort(owner[by_score], stable=True).indices]
    so, ss, sp = owner[order], s[order], pos[order]
    n = len(ss)
    idx = torch.arange(n, device=dev)
    counts = torch.bincount(owner, minlength=groups)
    start = torch.cumsum(counts, 0) - counts  # first sorted position of each group
    rank = (idx - start[so]).to(torch.float64) + 1.0  # 1-based rank within the group
    # Blocks of equal (owner, score) share the mean of their ranks.
    new = torch.ones(n, dtype=torch.bool, device=dev)
    if n > 1:
        new[1:] = (so[1:] != so[:-1]) | (ss[1:] != ss[:-1])
    block = torch.cumsum(new.to(torch.long), 0) - 1
    nblocks = int(block[-1]) + 1 if n else 0
    rsum = torch.zeros(nblocks, dtype=torch.float64, device=dev).index_add_(0, block, rank)
    rcnt = torch.bincount(block, minlength=nblocks).to(torch.float64)
    avg_rank = (rsum / rcnt)[block]
    n_pos = torch.bincount(so, weights=sp.to(torch.float64), minlength=groups)
    n_neg = counts.to(torch.float64) - n_pos
    pos_rank = torch.zeros(groups, dtype=torch.float64, device=dev)
    pos_rank.index_add_(0, so, torch.where(sp, avg_rank, torch.zeros_like(avg_rank)))
    u = pos_rank - n_pos * (n_pos + 1) / 2
    out = u / (n_pos * n_neg)
    bad = torch.bincount(owner, weights=(~torch.isfinite(s)).to(torch.float64), minlength=groups)
    ok = (n_pos > 0) & (n_neg > 0) & (bad == 0)
    return torch.where(ok, out, torch.full_like(out, float("nan")))
