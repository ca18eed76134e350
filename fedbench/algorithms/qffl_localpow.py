"""The q-FFL preprint's "FedAvg-like algorithm with q-Fairness" (seed 003, Algorithm 1, as
reconstructed in specs/qffl-dqnfed.md §A.5; the body of the algorithm is an image the text
lost): local SGD whose every step follows ℓ^q ∇ℓ, the gradient of ℓ^(q+1)/(q+1), averaged with
equal client weights after each synchronisation period.

How it differs from FedAvg:

- `local_loss`: the per-example loss ℓ_j (the run's objective per sample, clamped at 0, A-Q9)
  raised to q + 1 and divided by q + 1, averaged over the batch's real samples
  (`power: per_example`, A-Q3's default: the batch mean of ℓ_j^q ∇ℓ_j); `power: per_batch` takes
  the batch's mean loss to the power instead ((mean ℓ)^q ∇ mean ℓ). q = 0 is FedAvg's step. The
  power is taken in float32 also under bf16 training (the forward pass returns float32 logits).
- `aggregate`: the mean of the clients' updates with equal weights (`weighting: equal`, A-Q1);
  `weighting: samples` is FedAvg's n_k-weighted mean.

The synchronisation period K (A-Q2: "local epochs" in the caption, local iterations in the
proof) is the run's `training.local_steps` (or one local epoch by default); the paper assumes full
participation (`training.participation: 1.0`). The logged training loss is the powered loss
this algorithm descends.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from fedbench.algorithms.base import Algorithm, Batch, ServerContext, State
from fedbench.objectives import masked_mean, objective_of
from fedbench.tree import Apply, Params, weighted_mean

POWERS = ("per_example", "per_batch")
WEIGHTINGS = ("equal", "samples")


@dataclass(frozen=True)
class QFFLLocalPow(Algorithm):
    """Local SGD on ℓ^(q+1)/(q+1) (each step ℓ^q ∇ℓ), equal-weight averaging."""

    name: ClassVar[str] = "qffl_localpow"
    q: float = 1.0
    power: str = "per_example"
    weighting: str = "equal"

    def __post_init__(self):
        if not self.q >= 0:
            raise ValueError(f"qffl_localpow: q must be >= 0 (got {self.q!r})")
        if self.power not in POWERS:
            raise ValueError(f"qffl_localpow: power must be one of {POWERS} (got {self.power!r})")
        if self.weighting not in WEIGHTINGS:
            raise ValueError(
                f"qffl_localpow: weighting must be one of {WEIGHTINGS} (got {self.weighting!r})"
            )

    def local_loss(
        self, apply: Apply, params: Params, batch: Batch, carry: State, noise: Any
    ) -> torch.Tensor:
        objective = objective_of(apply)
        logits = apply(params, batch.x)
        if self.power == "per_batch":
            mean = objective.batch_loss(logits, batch).clamp(min=0)
            return mean ** (self.q + 1) / (self.q + 1)
        per = objective.sample_loss(logits, batch.x, batch.y)
        if batch.weight is not None:
            per = per * batch.weight
        return masked_mean(per.clamp(min=0) ** (self.q + 1), batch.mask) / (self.q + 1)

    def aggregate(
        self,
        global_params: Params,
        messages: dict[str, Any],
        server_state: State,
        ctx: ServerContext,
    ) -> tuple[Params, State]:
        if self.weighting == "samples":
            return super().aggregate(global_params, messages, server_state, ctx)
        mean_delta = weighted_mean(messages["delta"], torch.ones_like(messages["weight"]))
        return {k: global_params[k] + mean_delta[k] for k in global_params}, server_state
