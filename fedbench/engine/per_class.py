"""Per-class test losses of personalised models (pFedBreD's deviation figures, spec §7 Figs 3/9)."""

from __future__ import annotations

import torch

from fedbench.objectives import objective_of
from fedbench.tree import Apply, Params


@torch.no_grad()
def per_class_losses(
    apply: Apply,
    params_per_client: list[Params],
    x: torch.Tensor,
    y: torch.Tensor,
    client_idx: list[torch.Tensor],
    num_classes: int,
    batch_size: int,
) -> dict[str, list]:
    """Each client's model on the union of the clients' test splits: mean loss per class there
    ("global") and on the client's own split ("local"), with the sample counts.

    Returns `global_n[c]` (the same for every model), `global_loss[i][c]`, `local_n[i][c]` and
    `local_loss[i][c]`; a mean over no samples is 0 (B.4: ℒ_{i,c} = 0 without label c).
    """
    objective = objective_of(apply)  # per-sample losses (unweighted; token means for token_ce)
    device = y.device
    union = (torch.cat(list(client_idx)) if client_idx else torch.zeros(0, dtype=torch.long)).to(
        device
    )
    owner = torch.cat(
        [
            torch.full((len(idx),), i, dtype=torch.long, device=device)
            for i, idx in enumerate(client_idx)
        ]
        or [torch.zeros(0, dtype=torch.long, device=device)]
    )
    labels = y[union]
    global_n = torch.bincount(labels, minlength=num_classes).to(torch.float64)
    out: dict[str, list] = {
        "global_n": [int(v) for v in global_n.tolist()],
        "global_loss": [],
        "local_n": [],
        "local_loss": [],
    }
    for i, params in enumerate(params_per_client):
        # One pass over the union per model: its own split is the rows `owner == i`.
        losses = []
        for s in range(0, len(union), batch_size):
            xb = x[union[s : s + batch_size]]
            losses.append(
                objective.sample_loss(apply(params, xb), xb, labels[s : s + batch_size]).to(
                    torch.float64
                )
            )
        loss = torch.cat(losses) if losses else torch.zeros(0, dtype=torch.float64, device=device)
        g_sum = torch.zeros(num_classes, dtype=torch.float64, device=device)
        g_sum.index_add_(0, labels, loss)
        mine = owner == i
        l_n = torch.bincount(labels[mine], minlength=num_classes).to(torch.float64)
        l_sum = torch.zeros(num_classes, dtype=torch.float64, device=device)
        l_sum.index_add_(0, labels[mine], loss[mine])
        out["global_loss"].append((g_sum / global_n.clamp(min=1)).tolist())
        out["local_n"].append([int(v) for v in l_n.tolist()])
        out["local_loss"].append((l_sum / l_n.clamp(min=1)).tolist())
    return out
