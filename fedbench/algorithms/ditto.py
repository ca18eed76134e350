"""Ditto (Li, Hu, Beirami & Smith, ICML 2021): FedAvg plus a local model pulled to the global."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from fedbench.algorithms.base import Algorithm, Batch, ClientContext, State
from fedbench.algorithms.fedprox import PROX_FORMS, prox_term
from fedbench.algorithms.opt_in import LocalSteps, PersonalEvaluation
from fedbench.algorithms.pair import FED, LOC, joined, split
from fedbench.algorithms.partial_sharing import tail_phase
from fedbench.tree import Apply, Params, tree_sub

SCHEDULES = ("phases", "joint")


@dataclass(frozen=True)
class Ditto(LocalSteps, PersonalEvaluation, Algorithm):
    """Ditto (Li et al. 2021, Alg. 1; local objective F_k(v) + (λ/2)||v - w*||², eq. 2).

    Each round the federated model trains E epochs on CE exactly as in FedAvg and is sent; then
    the client's local model v trains `tau` epochs on CE + mu * prox(v, θ^g), θ^g = the global
    model received this round (SuPerFed release: tau = 5, mu = 1). `prox: layer_norm` is the
    release's mu * sum_l ||v_l - θ^g_l||_2 (weight tensors, unsquared); `squared` is the paper's
    (mu/2)||v - θ^g||². v starts equal to the global initialisation (release; the paper leaves it
    open) and persists across rounds; a never-sampled client keeps it. Each phase freezes the
    other model (weights, momentum, weight decay), as if each had its own optimiser.
    Protocol `personal` = the client's local model.

    `schedule: joint` is the paper's Alg. 1 instead: every local step updates both models on
    the step's batch (w on CE; v on CE + the prox), with no extra epochs (`tau` unused), so it
    also runs when local training counts steps (pFedBreD's R = 20; its Table 8 row).
    """

    name: ClassVar[str] = "ditto"
    personal_protocols: ClassVar[tuple[str, ...]] = ("personal",)
    mu: float = 1.0
    tau: int = 5
    prox: str = "layer_norm"
    schedule: str = "phases"

    def __post_init__(self):
        if self.mu < 0:
            raise ValueError(f"ditto: mu must be >= 0, got {self.mu}")
        if not isinstance(self.tau, int) or self.tau < 1:
            raise ValueError(f"ditto: tau must be a positive integer, got {self.tau!r}")
        if self.prox not in PROX_FORMS:
            raise ValueError(f"ditto: prox must be one of {PROX_FORMS}, got {self.prox!r}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"ditto: schedule must be one of {SCHEDULES}, got {self.schedule!r}")

    def local_epochs(self, epochs: int) -> int:
        return epochs + (self.tau if self.schedule == "phases" else 0)

    def init_client_state(self, client_id: int, global_params: Params, fresh) -> State:
        return {"local": dict(global_params)}

    def client_begin(self, global_params, server_state, client_state, ctx: ClientContext):
        params = {**joined(FED, global_params), **joined(LOC, client_state["local"])}
        return params, {"anchor": global_params}

    def step_noise(self, rng, ctx: ClientContext, global_params):
        # 1 = local-model phase (the last tau epochs); deterministic, so `rng` is not used.
        if self.schedule == "joint":
            return None
        return tail_phase(ctx, self.tau, self.name)

    def local_loss(self, apply: Apply, params: Params, batch: Batch, carry: State, noise):
        fed, loc = split(params, FED), split(params, LOC)
        prox = prox_term(loc, carry["anchor"], self.prox)
        if noise is None:  # joint: both models step on this batch
            data = self.data_loss(apply, fed, batch) + self.data_loss(apply, loc, batch)
            return data + self.mu * prox
        # With a 0/1 phase this blend is exactly the active model: one forward pass per step,
        # and the inactive model gets no gradient (it is also frozen by update_mask).
        active = {k: (1 - noise) * fed[k] + noise * loc[k] for k in fed}
        return self.data_loss(apply, active, batch) + noise * self.mu * prox

    def update_mask(self, params, carry, noise):
        if noise is None:
            return None
        return {k: noise if k.startswith(LOC) else 1 - noise for k in params}

    def client_end(self, global_params, params, carry, client_state, ctx: ClientContext):
        message = {
            "delta": tree_sub(split(params, FED), global_params),
            "weight": float(ctx.num_train),
        }
        return message, {"local": split(params, LOC)}

    def personal_params(self, protocol: str, global_params: Params, client_state: State) -> Params:
        if protocol != "personal":
            return super().personal_params(protocol, global_params, client_state)
        return dict(client_state["local"])
