"""FedProx (Li et al. 2020): FedAvg plus a proximal term pulling local weights to the global."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from fedbench.algorithms.base import Algorithm, ClientContext, State
from fedbench.tree import Params

PROX_FORMS = ("squared", "layer_norm", "half_norm_all")


@dataclass(frozen=True)
class ProxLocal:
    """Mixin: local loss + mu * prox_term(w, w_g) (reused by FedProx and AAggFF+FedProx)."""

    mu: float = 0.01
    prox: str = "squared"

    def __post_init__(self):
        if self.mu < 0:
            raise ValueError(f"{self.name}: mu must be >= 0, got {self.mu}")
        if self.prox not in PROX_FORMS:
            raise ValueError(f"{self.name}: prox must be one of {PROX_FORMS}, got {self.prox!r}")
        post = getattr(super(), "__post_init__", None)
        if post is not None:
            post()

    def client_begin(self, global_params, server_state, client_state, ctx: ClientContext):
        return dict(global_params), {"anchor": global_params}

    def local_loss(self, apply, params: Params, batch, carry: State, noise) -> torch.Tensor:
        prox = prox_term(params, carry["anchor"], self.prox)
        return self.data_loss(apply, params, batch) + self.mu * prox


@dataclass(frozen=True)
class FedProx(ProxLocal, Algorithm):
    """Local loss + (mu/2)||w - w_g||^2 (paper, eq. 2), or mu * sum_l ||w_l - w_g,l||_2 (code)."""

    name: ClassVar[str] = "fedprox"
    # "layer_norm" is the unsquared per-layer form of the SuPerFed release (spec superfed.md §3);
    # "half_norm_all" is the AAggFF release's (1/2) sum of unsquared norms over every tensor.


def prox_term(params: Params, anchor: Params, form: str) -> torch.Tensor:
    """(1/2)||p - a||^2 over all leaves ("squared"), (1/2) sum of per-tensor L2 norms over all
    leaves ("half_norm_all"), or sum of per-weight-tensor L2 norms ("layer_norm")."""
    if form == "squared":
        return 0.5 * sum(((params[k] - anchor[k]) ** 2).sum() for k in params)
    if form == "half_norm_all":
        return 0.5 * sum(torch.linalg.vector_norm(params[k] - anchor[k]) for k in params)
    # SuPerFed's release sums norms over weight tensors only (biases excluded).
    return sum(
        torch.linalg.vector_norm(params[k] - anchor[k]) for k in params if k.endswith("weight")
    )
