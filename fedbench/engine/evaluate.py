"""Evaluation: every client's local test split (batched across clients) and the global test set."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from fedbench.engine.functional import Apply, Params
from fedbench.metrics.calibration import calibration_per_client
from fedbench.metrics.classification import auroc_per_group, binary_score

KS = (1, 5)
MEAN_KEYS = ("loss", *(f"top{k}" for k in KS))  # per-client means of per-sample values
METRICS = (*MEAN_KEYS, "ece", "mce")  # what every evaluation reports per client
# Reported only where defined: auroc for 2-class models (positive class = label 1; NaN for a
# client whose split holds one class). Multiclass AUROC is not computed: the AAggFF release's
# only AUROC columns are binary (its multiclass path would need probabilities, spec §10.5).
OPTIONAL_METRICS = ("auroc",)


@torch.no_grad()
def _per_sample(
    apply: Apply, params: Params, x: torch.Tensor, y: torch.Tensor, batch_size: int
) -> dict[str, torch.Tensor]:
    """Per-sample loss, top-k hits and confidence (max softmax) for (x, y), forwarded in chunks."""
    losses, hits, conf, score = [], {k: [] for k in KS}, [], []
    for start in range(0, len(y), batch_size):
        logits = apply(params, x[start : start + batch_size])
        yb = y[start : start + batch_size]
        losses.append(F.cross_entropy(logits, yb, reduction="none"))
        score.append(binary_score(logits))
        conf.append(logits.softmax(dim=-1).amax(dim=-1))
        for k in KS:
            top = logits.topk(min(k, logits.shape[-1]), dim=-1).indices
            hits[k].append((top == yb.unsqueeze(-1)).any(dim=-1).float())
    out = {"loss": torch.cat(losses), "confidence": torch.cat(conf)}
    if score and score[0] is not None:
        out["score"] = torch.cat(score)  # positive-class score of a 2-class model (auroc)
    for k in KS:
        out[f"top{k}"] = torch.cat(hits[k])
    return out


def _calibration(
    per: dict[str, torch.Tensor], owner: torch.Tensor, groups: int, calib_batch: int | None
) -> tuple[list[float], list[float]]:
    """Per-group ECE and MCE (15 bins) from per-sample confidence and top-1 hits."""
    ece, mce = calibration_per_client(
        per["confidence"], per["top1"], owner, groups, batch_size=calib_batch
    )
    return ece.tolist(), mce.tolist()


def evaluate_clients_shared(
    apply: Apply,
    params: Params,
    x: torch.Tensor,
    y: torch.Tensor,
    client_idx: list[torch.Tensor],
    batch_size: int,
    calib_batch: int | None = None,
) -> dict[str, list]:
    """One model on every client's split, in one pass over the concatenated splits.

    `calib_batch`: ECE/MCE per consecutive batch of that size, averaged per client (the SuPerFed
    release's estimator); None = over the client's whole split.
    """
    ids = [i for i, idx in enumerate(client_idx) if len(idx) > 0]
    if not ids:
        return {key: [] for key in ("ids", "n", *METRICS)}
    all_idx = torch.cat([client_idx[i] for i in ids])
    owner = torch.cat(
        [torch.full((len(client_idx[i]),), j, device=all_idx.device) for j, i in enumerate(ids)]
    )
    per = _per_sample(apply, params, x[all_idx], y[all_idx], batch_size)
    n = torch.bincount(owner, minlength=len(ids)).to(torch.float64)
    out: dict[str, list] = {"ids": ids, "n": [int(v) for v in n.tolist()]}
    for key in MEAN_KEYS:
        sums = torch.zeros(len(ids), dtype=torch.float64, device=all_idx.device)
        sums.index_add_(0, owner, per[key].to(torch.float64))
        out[key] = (sums / n).tolist()
    out["ece"], out["mce"] = _calibration(per, owner, len(ids), calib_batch)
    if "score" in per:
        out["auroc"] = auroc_per_group(per["score"], y[all_idx] == 1, owner, len(ids)).tolist()
    return out


def evaluate_clients_each(
    apply: Apply,
    params_per_client: list[Params],
    x: torch.Tensor,
    y: torch.Tensor,
    client_idx: list[torch.Tensor],
    batch_size: int,
    calib_batch: int | None = None,
) -> dict[str, list]:
    """A different model per client (personalised protocols)."""
    out: dict[str, list] = {key: [] for key in ("ids", "n", *METRICS)}
    for i, (params, idx) in enumerate(zip(params_per_client, client_idx)):
        if len(idx) == 0:
            continue
        per = _per_sample(apply, params, x[idx], y[idx], batch_size)
        out["ids"].append(i)
        out["n"].append(len(idx))
        for key in MEAN_KEYS:
            out[key].append(float(per[key].to(torch.float64).mean()))
        owner = torch.zeros(len(idx), dtype=torch.long, device=idx.device)
        (ece,), (mce,) = _calibration(per, owner, 1, calib_batch)
        out["ece"].append(ece)
        out["mce"].append(mce)
        if "score" in per:
            auc = auroc_per_group(per["score"], y[idx] == 1, owner, 1)
            out.setdefault("auroc", []).append(float(auc[0]))
    return out


def evaluate_global(
    apply: Apply, params: Params, x: torch.Tensor, y: torch.Tensor, batch_size: int
) -> dict[str, float] | None:
    """The global model on the held-out global test set (None when there is none)."""
    if len(y) == 0:
        return None
    per = _per_sample(apply, params, x, y, batch_size)
    out: dict[str, float] = {k: float(per[k].to(torch.float64).mean()) for k in MEAN_KEYS}
    owner = torch.zeros(len(y), dtype=torch.long, device=y.device)
    (out["ece"],), (out["mce"],) = _calibration(per, owner, 1, None)
    if "score" in per:
        out["auroc"] = float(auroc_per_group(per["score"], y == 1, owner, 1)[0])
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
