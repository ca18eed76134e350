"""Training objectives: how a model's outputs are scored against the labels, for training and for
every evaluation (loss, top-k, calibration, AUROC). A run names one (`training.objective`).

`cross_entropy` (the default) is softmax cross-entropy over C logits. The others reproduce what the
AAggFF release trains (specs/aaggff.md §9.4-9.5, §13 items 9-10, §15.11-15.12):

- `bce_logit`: one logit, BCEWithLogits; predicted class 1 when logit > 0; AUROC on the logit.
- `class_weighted_ce`: cross-entropy with class weights w_c = (N + C) / (count_c + 1) from each
  client's own training labels (the release's `--use_class_weights`, computed per client from its
  training set in FedavgClient.__init__; the spec leaves this unsaid), as torch's weighted mean
  sum_i w_yi l_i / sum_i w_yi over a batch or a split.
- `token_ce`: language modelling over all positions (the release's Seq2SeqLoss and `seqacc`):
  logits [N, V, L], target ids in row 1 of the input x [N, 2, L] (the `leaf_reddit` layout); the
  special ids 0-3 (PAD, UNK, BOS, EOS) are ignored in the loss and in every metric, so loss and
  top-k are means over a split's word tokens.

Evaluation works on units: samples, or word tokens for `token_ce`; `units` gives the per-unit
values and the sample each unit belongs to.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F


def binary_score(logits: torch.Tensor) -> torch.Tensor | None:
    """The positive-class (label 1) score of a 2-class model, logit_1 - logit_0 (None otherwise).

    It orders samples as the softmax probability of class 1 does (a monotone map of it) without
    the float saturation that ties probabilities near 0 and 1.
    """
    if logits.ndim != 2 or logits.shape[-1] != 2:
        return None
    return logits[:, 1] - logits[:, 0]


KS = (1, 5)


def masked_mean(per_sample: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Mean over the real samples of a (possibly padded) batch."""
    if mask is None:
        return per_sample.mean()
    return (per_sample * mask).sum() / mask.sum().clamp(min=1)


def _topk_hits(logits: torch.Tensor, y: torch.Tensor) -> dict[int, torch.Tensor]:
    out = {}
    for k in KS:
        top = logits.topk(min(k, logits.shape[-1]), dim=-1).indices
        out[k] = (top == y.unsqueeze(-1)).any(dim=-1).float()
    return out


@dataclass(frozen=True)
class Objective:
    """Softmax cross-entropy over C logits (`cross_entropy`)."""

    name: str = "cross_entropy"

    def outputs(self, num_classes: int) -> int:
        """The model's output width for a `num_classes`-class task."""
        return num_classes

    def row_weights(self, fed: Any) -> torch.Tensor | None:
        """Per-row loss weights over a Federation's pool (None: this objective weights none)."""
        return None

    def sample_loss(self, logits: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Per-sample loss [N] (unweighted)."""
        return F.cross_entropy(logits, y, reduction="none")

    def batch_loss(self, logits: torch.Tensor, batch: Any) -> torch.Tensor:
        """The scalar a local step differentiates: the mean over the batch's real samples
        (`batch.mask`, 1 = real; Per-FedAvg passes its half-batch weights there)."""
        return masked_mean(self.sample_loss(logits, batch.x, batch.y), batch.mask)

    def units(
        self, logits: torch.Tensor, x: torch.Tensor, y: torch.Tensor, w: torch.Tensor | None
    ) -> dict[str, Any]:
        """Per-unit loss, top-k hits, confidence, weight (None = 1), sample row (None = the
        units are the samples) and the positive-class score (None = no AUROC)."""
        return {
            "loss": self.sample_loss(logits, x, y),
            "hits": _topk_hits(logits, y),
            "confidence": logits.softmax(dim=-1).amax(dim=-1),
            "weight": None,
            "row": None,
            "score": binary_score(logits),
        }


@dataclass(frozen=True)
class BCELogit(Objective):
    """One logit, BCEWithLogits against y in {0, 1} (`bce_logit`)."""

    name: str = "bce_logit"

    def outputs(self, num_classes: int) -> int:
        if num_classes != 2:
            raise ValueError(f"training.objective bce_logit needs 2 classes, got {num_classes}")
        return 1

    def sample_loss(self, logits, x, y):
        return F.binary_cross_entropy_with_logits(
            logits[:, 0], y.to(logits.dtype), reduction="none"
        )

    def units(self, logits, x, y, w):
        z = logits[:, 0]
        p = torch.sigmoid(z)
        hit = ((z > 0).long() == y).float()  # the release's sigmoid > 0.5
        return {
            "loss": self.sample_loss(logits, x, y),
            "hits": {k: hit if k == 1 else torch.ones_like(hit) for k in KS},  # 2 classes
            "confidence": torch.maximum(p, 1 - p),
            "weight": None,
            "row": None,
            "score": z,
        }


@dataclass(frozen=True)
class ClassWeightedCE(Objective):
    """Cross-entropy weighted by the sample's class weight for its client (`class_weighted_ce`);
    the weights arrive per sample (`batch.weight`, `client_class_weights`)."""

    name: str = "class_weighted_ce"

    def row_weights(self, fed):
        """Each client's train, validation and test rows weighted by the class weights of the
        client's training labels (`client_class_weights`); rows of no client weigh 1."""
        table = client_class_weights(fed.y, fed.train, fed.num_classes).to(fed.x.device)
        w = torch.ones(len(fed.y), dtype=torch.float32, device=fed.x.device)
        for k in range(len(fed.train)):
            for split in (fed.train, fed.test, fed.val):
                if k < len(split) and len(split[k]):
                    w[split[k]] = table[k, fed.y[split[k]]]
        return w

    def batch_loss(self, logits, batch):
        w = batch.weight if batch.mask is None else batch.weight * batch.mask
        # A client without a batch at this step (vectorised, all weights 0) must give 0, not
        # 0/0: its update is masked by a 0 factor, and NaN * 0 is NaN. Real weights are >= 1.
        return (self.sample_loss(logits, batch.x, batch.y) * w).sum() / w.sum().clamp(min=1e-12)

    def units(self, logits, x, y, w):
        return {**super().units(logits, x, y, w), "weight": w}


@dataclass(frozen=True)
class TokenCE(Objective):
    """Cross-entropy at every position, special targets (ids < `specials`) ignored
    (`token_ce`)."""

    name: str = "token_ce"
    specials: int = 4  # PAD, UNK, BOS, EOS

    def _targets(self, logits, x):
        if logits.ndim != 3 or x.ndim != 3:
            raise ValueError(
                "training.objective token_ce needs [N, V, L] logits (stacked_lstm output: all) "
                f"and [N, 2, L] inputs, got {tuple(logits.shape)} and {tuple(x.shape)}"
            )
        t = x[:, 1].long()
        return t, (t >= self.specials).to(logits.dtype)

    def sample_loss(self, logits, x, y):
        t, word = self._targets(logits, x)
        ce = F.cross_entropy(logits, t, reduction="none")
        return (ce * word).sum(1) / word.sum(1).clamp(min=1)

    def batch_loss(self, logits, batch):
        t, word = self._targets(logits, batch.x)
        if batch.mask is not None:
            word = word * batch.mask.unsqueeze(1)
        ce = F.cross_entropy(logits, t, reduction="none")
        return (ce * word).sum() / word.sum().clamp(min=1)

    def units(self, logits, x, y, w):
        t, word = self._targets(logits, x)
        keep = word.bool()
        flat = logits.transpose(1, 2)[keep]  # [units, V]
        tgt = t[keep]
        return {
            "loss": F.cross_entropy(flat, tgt, reduction="none"),
            "hits": _topk_hits(flat, tgt),
            "confidence": flat.softmax(dim=-1).amax(dim=-1),
            "weight": None,
            "row": keep.nonzero()[:, 0],
            "score": None,
        }


OBJECTIVES: dict[str, Callable[[], Objective]] = {
    "cross_entropy": Objective,
    "bce_logit": BCELogit,
    "class_weighted_ce": ClassWeightedCE,
    "token_ce": TokenCE,
}
CROSS_ENTROPY = Objective()


def build_objective(name: str) -> Objective:
    """The objective registered as `name` (an error names the key and the valid ones)."""
    if name not in OBJECTIVES:
        raise ValueError(f"training.objective: unknown {name!r}; valid: {sorted(OBJECTIVES)}")
    return OBJECTIVES[name]()


def objective_of(apply: Any) -> Objective:
    """The objective bound to a model's `apply` (`with_objective`); cross-entropy if none."""
    return getattr(apply, "objective", CROSS_ENTROPY)


def with_objective(apply: Callable, objective: Objective) -> Callable:
    """`apply` scored by `objective`: the same forward pass, `.module` kept (batched kernels)."""

    def bound(params, x):
        return apply(params, x)

    bound.module = getattr(apply, "module", None)
    bound.objective = objective
    return bound


def client_class_weights(
    y: torch.Tensor, clients: list[torch.Tensor], num_classes: int
) -> torch.Tensor:
    """[K, C] weights w_kc = (N_k + C) / (count_kc + 1) from each client's training labels (the
    release's FedavgClient: ones + counts, divided by N_k + C, reciprocal)."""
    rows = []
    for idx in clients:
        counts = torch.bincount(y[idx], minlength=num_classes).to(torch.float32) + 1
        rows.append((counts / (len(idx) + num_classes)).reciprocal())
    return torch.stack(rows) if rows else torch.zeros(0, num_classes)
