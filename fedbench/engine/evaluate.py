"""Evaluation: every client's local test split (batched across clients) and the global test set."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from fedbench.engine.functional import Apply, Params

KS = (1, 5)


@torch.no_grad()
def _per_sample(
    apply: Apply, params: Params, x: torch.Tensor, y: torch.Tensor, batch_size: int
) -> dict[str, torch.Tensor]:
    """Per-sample loss and top-k hits for (x, y), forwarded in chunks."""
    losses, hits = [], {k: [] for k in KS}
    for start in range(0, len(y), batch_size):
        logits = apply(params, x[start : start + batch_size])
        yb = y[start : start + batch_size]
        losses.append(F.cross_entropy(logits, yb, reduction="none"))
        for k in KS:
            top = logits.topk(min(k, logits.shape[-1]), dim=-1).indices
            hits[k].append((top == yb.unsqueeze(-1)).any(dim=-1).float())
    out = {"loss": torch.cat(losses)}
    for k in KS:
        out[f"top{k}"] = torch.cat(hits[k])
    return out


def evaluate_clients_shared(
    apply: Apply,
    params: Params,
    x: torch.Tensor,
    y: torch.Tensor,
    client_idx: list[torch.Tensor],
    batch_size: int,
) -> dict[str, list]:
    """One model on every client's split, in one pass over the concatenated splits."""
    ids = [i for i, idx in enumerate(client_idx) if len(idx) > 0]
    if not ids:
        return {"ids": [], "n": [], "loss": [], "top1": [], "top5": []}
    all_idx = torch.cat([client_idx[i] for i in ids])
    owner = torch.cat(
        [torch.full((len(client_idx[i]),), j, device=all_idx.device) for j, i in enumerate(ids)]
    )
    per = _per_sample(apply, params, x[all_idx], y[all_idx], batch_size)
    n = torch.bincount(owner, minlength=len(ids)).to(torch.float64)
    out: dict[str, list] = {"ids": ids, "n": [int(v) for v in n.tolist()]}
    for key, values in per.items():
        sums = torch.zeros(len(ids), dtype=torch.float64, device=all_idx.device)
        sums.index_add_(0, owner, values.to(torch.float64))
        out[key] = (sums / n).tolist()
    return out


def evaluate_clients_each(
    apply: Apply,
    params_per_client: list[Params],
    x: torch.Tensor,
    y: torch.Tensor,
    client_idx: list[torch.Tensor],
    batch_size: int,
) -> dict[str, list]:
    """A different model per client (personalised protocols)."""
    out: dict[str, list] = {"ids": [], "n": [], "loss": [], "top1": [], "top5": []}
    for i, (params, idx) in enumerate(zip(params_per_client, client_idx)):
        if len(idx) == 0:
            continue
        per = _per_sample(apply, params, x[idx], y[idx], batch_size)
        out["ids"].append(i)
        out["n"].append(len(idx))
        for key, values in per.items():
            out[key].append(float(values.to(torch.float64).mean()))
    return out


def evaluate_global(
    apply: Apply, params: Params, x: torch.Tensor, y: torch.Tensor, batch_size: int
) -> dict[str, float] | None:
    """The global model on the held-out global test set (None when there is none)."""
    if len(y) == 0:
        return None
    per = _per_sample(apply, params, x, y, batch_size)
    out = {k: float(v.to(torch.float64).mean()) for k, v in per.items()}
    out["n"] = len(y)
    return out


def client_losses(
    apply: Apply,
    params: Params,
    x: torch.Tensor,
    y: torch.Tensor,
    client_idx: list[torch.Tensor],
    batch_size: int,
) -> list[float]:
    """Mean loss of one model on each given client split (q-FedAvg's / AAggFF's F_k)."""
    res = evaluate_clients_shared(apply, params, x, y, client_idx, batch_size)
    by_id = dict(zip(res["ids"], res["loss"]))
    return [by_id.get(i, float("nan")) for i in range(len(client_idx))]
