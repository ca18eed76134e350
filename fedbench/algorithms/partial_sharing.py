"""Partial sharing: FedPer, LG-FedAvg and FedRep share one part of the model, keep the other local.

Models name their parts `body.*` and `head.*` (the head is the SuPerFed release's `classifier`).
A client's local part lives in its state, starts at the global initialisation's part (as in the
release, so a never-sampled client is evaluated with it) and is overwritten after each round it
trains; the shared part is averaged over the sampled clients and the unshared global part is never
touched by the server.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from fedbench.algorithms.base import Algorithm, ClientContext, ServerContext, State
from fedbench.algorithms.opt_in import LocalSteps, PersonalEvaluation
from fedbench.tree import Params, tree_sub, weighted_mean

BODY, HEAD = "body.", "head."


def aggregate_shared(global_params: Params, messages: dict) -> Params:
    """Weighted mean of the sent deltas applied to the keys that were sent; others unchanged."""
    mean_delta = weighted_mean(messages["delta"], messages["weight"])
    return {
        k: global_params[k] + mean_delta[k] if k in mean_delta else v
        for k, v in global_params.items()
    }


def tail_phase(ctx: ClientContext, epochs: int, who: str) -> torch.Tensor:
    """1.0 on the steps of the last `epochs` local epochs, 0.0 before (one value per step)."""
    if ctx.num_steps and not ctx.steps_per_epoch:
        raise ValueError(f"{who}: phases are counted in epochs; set training.local_epochs")
    start = ctx.num_steps - epochs * ctx.steps_per_epoch
    return (torch.arange(ctx.num_steps) >= start).float()


@dataclass(frozen=True)
class FedPer(PersonalEvaluation, Algorithm):
    """FedPer (Arivazhagan et al. 2019, "personalization layers"): the body is federated and
    averaged as in FedAvg (eq. 1.1), the head stays on the client.

    As in the SuPerFed release (spec superfed.md §3): the whole model trains E epochs on CE and
    the head is the single `classifier` layer (the paper allows several personalisation layers).
    Protocol `personal` = global body + the client's own head.
    """

    name: ClassVar[str] = "fedper"
    personal_protocols: ClassVar[tuple[str, ...]] = ("personal",)
    # The prefix of the parameters sent to the server; the rest stays local.
    shared: ClassVar[str] = BODY

    def is_shared(self, key: str) -> bool:
        """Whether parameter `key` is sent to and averaged by the server."""
        return key.startswith(self.shared)

    def init_client_state(self, client_id: int, global_params: Params, fresh) -> State:
        shared = [k for k in global_params if self.is_shared(k)]
        if not shared or len(shared) == len(global_params):
            names = list(global_params)
            raise ValueError(f"{self.name}: needs {BODY}* and {HEAD}* parameters; got {names}")
        return {"local": {k: v for k, v in global_params.items() if not self.is_shared(k)}}

    def client_begin(self, global_params, server_state, client_state, ctx: ClientContext):
        return self.merge(global_params, client_state), {}

    def merge(self, global_params: Params, client_state: State) -> Params:
        """The global shared part with the client's own local part."""
        local = client_state["local"]
        return {k: v if self.is_shared(k) else local[k] for k, v in global_params.items()}

    def client_end(self, global_params, params, carry, client_state, ctx: ClientContext):
        shared = {k: v for k, v in params.items() if self.is_shared(k)}
        local = {k: v for k, v in params.items() if not self.is_shared(k)}
        message = {"delta": tree_sub(shared, global_params), "weight": float(ctx.num_train)}
        return message, {"local": local}

    def aggregate(self, global_params, messages, server_state, ctx: ServerContext):
        return aggregate_shared(global_params, messages), server_state

    def personal_params(self, protocol: str, global_params: Params, client_state: State) -> Params:
        if protocol != "personal":
            return super().personal_params(protocol, global_params, client_state)
        return self.merge(global_params, client_state)


@dataclass(frozen=True)
class LGFedAvg(FedPer):
    """LG-FedAvg (Liang et al. 2020, "Think locally, act globally"): local representations (body)
    stay on the client, the global head is averaged as in FedAvg (eq. 1.1).

    As in the SuPerFed release: the whole model trains E epochs on CE (no auxiliary
    representation losses; the paper's split point is the body/head boundary of the model here).
    Protocol `personal` = the client's own body + global head.
    """

    name: ClassVar[str] = "lgfedavg"
    shared: ClassVar[str] = HEAD


@dataclass(frozen=True)
class FedRep(LocalSteps, FedPer):
    """FedRep (Collins et al. 2021, Alg. 1): the head trains with the body frozen, then the body
    trains with the head frozen; only the body is averaged.

    Default = the SuPerFed release: head for E epochs, then body for `tau` = 5 epochs (the paper
    trains the head for many epochs and the body for one: set E accordingly and tau = 1). Frozen
    parts keep their weights and momentum (weight decay off) during the other phase, as if each
    phase had its own optimiser. Protocol `personal` = global body + the client's own head.
    """

    name: ClassVar[str] = "fedrep"
    tau: int = 5

    def __post_init__(self):
        if not isinstance(self.tau, int) or self.tau < 1:
            raise ValueError(f"fedrep: tau must be a positive integer, got {self.tau!r}")

    def local_epochs(self, epochs: int) -> int:
        return epochs + self.tau

    def step_noise(self, rng, ctx: ClientContext, global_params):
        # 1 = body phase (the last tau epochs); deterministic, so `rng` is not used.
        return tail_phase(ctx, self.tau, self.name)

    def update_mask(self, params, carry, noise):
        return {k: noise if self.is_shared(k) else 1 - noise for k in params}
