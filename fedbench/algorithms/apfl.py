"""APFL (Deng, Kamani & Mahdavi 2020): a federated model and a local model mixed with weight α."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from fedbench.algorithms.base import Algorithm, Batch, ClientContext, State
from fedbench.algorithms.opt_in import LocalSteps, PersonalEvaluation
from fedbench.algorithms.pair import FED, LOC, joined, mix, split
from fedbench.algorithms.superfed import LAMBDA_GRID
from fedbench.tree import Apply, Params, tree_sub

ALPHA = "mix.alpha"
VARIANTS = ("paper", "superfed_code")


@dataclass(frozen=True)
class APFL(LocalSteps, PersonalEvaluation, Algorithm):
    """APFL (Deng et al. 2020, Alg. 1; personalised model v̄ = α v + (1 - α) w).

    Every local step trains the federated model w on CE (FedAvg's step) and the local model v on
    the CE of a mixture (1 - α) w' + α v in which w' is a constant, so only v learns from it.
    Only w is sent and averaged. v starts equal to the global initialisation (release; a
    never-sampled client keeps it). Protocol `personal` = (1 - α) θ^g + α v_i (the tables);
    protocols `lambda0.0` … `lambda1.0` = (1 - λ) θ^g + λ v_i on SuPerFed's λ grid (thesis
    Fig. 2.5), so `lambda0.0` is the global model, `lambda1.0` the local one and λ = α gives
    `personal`.

    `variant: paper` (Alg. 1): w' = w as it is before this step, both models stepped from the
    same state; the run's momentum and weight decay apply to both (one engine optimiser).
    `variant: superfed_code` (the SuPerFed release, src/algorithm.py `apfl_update`, which
    produced its tables): w' = the federated model as the client's round began (the release's
    `personalized_model` is a copy taken then, whose federated weights its local optimiser never
    updates); per batch a federated step (SGD, momentum 0.9, no weight decay) then a local step
    (SGD, momentum 0.9, weight decay 1e-4), both at the round's lr. As w' is fixed and the two
    parameter sets are disjoint, one step on the sum of the two losses is exactly those two
    steps. The release's split decay runs with `training.weight_decay: 0` and
    `local_weight_decay: 1e-4` (catalog entry `apfl-sf`).

    `local_weight_decay` (either variant) adds λ_wd v to v's gradient before the engine's step,
    as torch.optim.SGD's weight_decay does, on top of the run's decay.

    `alpha` is fixed by default (release: 0.25). `adaptive_alpha` (paper variant only) follows
    the paper's per-client update α ← α - η ⟨v - w, ∇f(v̄)⟩ (α is a trained scalar, clipped to
    [0, 1] where used and after the round); deviation: the engine's SGD applies its momentum and
    weight decay to α too.
    """

    name: ClassVar[str] = "apfl"
    personal_protocols: ClassVar[tuple[str, ...]] = (
        "personal",
        *(f"lambda{v}" for v in LAMBDA_GRID),
    )
    alpha: float = 0.25
    adaptive_alpha: bool = False
    variant: str = "paper"
    local_weight_decay: float = 0.0

    def __post_init__(self):
        if not 0 <= self.alpha <= 1:
            raise ValueError(f"apfl: alpha must be in [0, 1], got {self.alpha}")
        if self.variant not in VARIANTS:
            raise ValueError(f"apfl: variant must be one of {VARIANTS}, got {self.variant!r}")
        if self.variant == "superfed_code" and self.adaptive_alpha:
            raise ValueError("apfl: adaptive_alpha is the paper's; the release keeps α fixed")
        if self.local_weight_decay < 0:
            raise ValueError(
                f"apfl: local_weight_decay must be >= 0, got {self.local_weight_decay}"
            )

    def init_client_state(self, client_id: int, global_params: Params, fresh) -> State:
        state: State = {"local": dict(global_params)}
        if self.adaptive_alpha:
            dtype = next(iter(global_params.values())).dtype
            state["alpha"] = torch.tensor(self.alpha, dtype=dtype)
        return state

    def client_begin(self, global_params, server_state, client_state, ctx: ClientContext):
        params = {**joined(FED, global_params), **joined(LOC, client_state["local"])}
        if self.adaptive_alpha:
            params[ALPHA] = client_state["alpha"]
        # The release mixes with the federated model the round started from: kept as a constant.
        return params, ({"fed0": global_params} if self.variant == "superfed_code" else {})

    def local_loss(self, apply: Apply, params: Params, batch: Batch, carry, noise):
        fed, loc = split(params, FED), split(params, LOC)
        a = params[ALPHA].clamp(0, 1) if self.adaptive_alpha else self.alpha
        # w' is a constant in the mixture: the local step moves v (and α), never w.
        anchor = carry["fed0"] if "fed0" in carry else {k: v.detach() for k, v in fed.items()}
        mixed = mix(anchor, loc, a)
        return self.data_loss(apply, fed, batch) + self.data_loss(apply, mixed, batch)

    def correct_grads(self, grads: Params, params: Params, carry: State) -> Params:
        if not self.local_weight_decay:
            return grads
        wd = self.local_weight_decay
        return {k: g + wd * params[k] if k.startswith(LOC) else g for k, g in grads.items()}

    def client_end(self, global_params, params, carry, client_state, ctx: ClientContext):
        message = {
            "delta": tree_sub(split(params, FED), global_params),
            "weight": float(ctx.num_train),
        }
        state: State = {"local": split(params, LOC)}
        if self.adaptive_alpha:
            state["alpha"] = params[ALPHA].clamp(0, 1)
        return message, state

    def personal_params(self, protocol: str, global_params: Params, client_state: State) -> Params:
        if protocol == "personal":
            a = client_state["alpha"] if self.adaptive_alpha else self.alpha
        elif protocol in self.personal_protocols:
            a = float(protocol[len("lambda") :])
        else:
            return super().personal_params(protocol, global_params, client_state)
        return mix(global_params, client_state["local"], a)
