"""FedFomo (Zhang et al., ICLR 2021): each client mixes in the downloaded models that lower its
own validation loss, weighted by the first-order gain per unit of distance."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch

from fedbench.algorithms.base import Algorithm, ClientContext, ServerContext, ServerSetup, State
from fedbench.algorithms.opt_in import CandidateModels, PersonalEvaluation
from fedbench.tree import Params, weighted_mean

OWN = -1  # candidate key of the client's own previous model


def fomo_weights(own_loss: float, losses: list[float], distances: list[float]) -> list[float]:
    """w_n = max(0, (L(θ_i) - L(θ_n)) / ‖θ_n - θ_i‖), normalised to sum 1 when any is > 0."""
    raw = [
        max(0.0, (own_loss - loss) / dist) if dist > 0 and math.isfinite(loss) else 0.0
        for loss, dist in zip(losses, distances)
    ]
    total = sum(raw)
    return [w / total for w in raw] if total > 0 else raw


def distance(a: Params, b: Params) -> float:
    """‖a - b‖ over all leaves."""
    return math.sqrt(sum(float(((a[k] - b[k]) ** 2).sum()) for k in a))


@dataclass(frozen=True)
class FedFomo(PersonalEvaluation, CandidateModels, Algorithm):
    """FedFomo (Zhang et al. 2021, Alg. 1, eqs. 4-5): the server keeps every client's latest
    upload. A sampled client i downloads `models` of them: with probability ε_t (ε-greedy,
    ε_t = max(0, epsilon - epsilon_decay·(t - 1))) uniformly among the clients that have
    uploaded, else the top ones by its affinity P_i. With L_i its loss on its validation split
    (the engine's `candidates` hook; the training split without one), it weights each
    downloaded θ_n by w_n = max(0, (L_i(θ_i) - L_i(θ_n)) / ‖θ_n - θ_i‖), normalises them, starts
    local training from θ_i + Σ_n w_n (θ_n - θ_i) (its own previous model when no w_n > 0), and
    adds w_n to P_i[n]. Its trained model is its upload and its personal model.

    Defaults (FedFomo paper §5 / App. as recalled, and PFLlib's fedfomo: M = 5 downloads,
    ε = 0.3 decaying by 0.05 a round); pFedBreD gives none (spec §2). The affinities are kept on
    the client (P_i only affects client i's downloads). "global" protocol: the sample-weighted
    mean of the round's uploads (a reference; FedFomo has no global model); `personal` = θ_i.
    With models = 0 every client trains alone from its own model (local training).
    """

    name: ClassVar[str] = "fedfomo"
    personal_protocols: ClassVar[tuple[str, ...]] = ("personal",)
    defaults_from: ClassVar[str | None] = (
        "FedFomo (Zhang et al., ICLR 2021), §5 and PFLlib defaults: M = 5 downloaded models, "
        "epsilon-greedy 0.3 decaying 0.05 a round"
    )
    models: int = 5
    epsilon: float = 0.3
    epsilon_decay: float = 0.05

    def __post_init__(self):
        checks = {
            "models": isinstance(self.models, int) and self.models >= 0,
            "epsilon": 0 <= self.epsilon <= 1,
            "epsilon_decay": self.epsilon_decay >= 0,
        }
        for key, ok in checks.items():
            if not ok:
                raise ValueError(f"fedfomo: bad {key} = {getattr(self, key)!r}")

    def init_server_state(self, global_params: Params, setup: ServerSetup | None = None) -> State:
        return {"models": {}}

    def init_client_state(self, client_id: int, global_params: Params, fresh) -> State:
        return {"model": dict(global_params), "affinity": {}}

    def candidates(self, rng, client_id, round_, global_params, server_state, client_state):
        pool = sorted(j for j in server_state["models"] if j != client_id)
        own = [(OWN, client_state["model"])]
        if not pool or self.models == 0:
            return own
        m = min(self.models, len(pool))
        eps = max(0.0, self.epsilon - self.epsilon_decay * (round_ - 1))
        if float(torch.rand((), generator=rng)) < eps:
            chosen = [pool[int(i)] for i in torch.randperm(len(pool), generator=rng)[:m]]
        else:  # highest affinity first; ties by client id
            aff = client_state["affinity"]
            chosen = sorted(pool, key=lambda j: (-aff.get(j, 0.0), j))[:m]
        return own + [(j, server_state["models"][j]) for j in chosen]

    def client_begin(self, global_params, server_state, client_state, ctx: ClientContext):
        own = client_state["model"]
        ids = [k for k in ctx.candidates if k != OWN]
        losses = dict(zip(ctx.candidates, ctx.candidate_losses))
        models = [server_state["models"][j] for j in ids]
        w = fomo_weights(
            losses.get(OWN, math.nan), [losses[j] for j in ids], [distance(p, own) for p in models]
        )
        start = {
            k: v + sum(wn * (p[k] - v) for wn, p in zip(w, models) if wn > 0)
            for k, v in own.items()
        }
        pad = self.models - len(ids)
        carry = {
            "ids": torch.tensor(ids + [OWN] * pad, dtype=torch.long),
            "w": torch.tensor(w + [0.0] * pad, dtype=torch.float64),
        }
        return start, carry

    def client_end(self, global_params, params, carry, client_state, ctx: ClientContext):
        affinity = dict(client_state["affinity"])
        for j, wn in zip(carry["ids"].tolist(), carry["w"].tolist()):
            if j != OWN:
                affinity[j] = affinity.get(j, 0.0) + wn
        # Copies: an executor's trained tensors may be views of its stacked buffers.
        model = {k: v.clone() for k, v in params.items()}
        return {"model": model, "weight": float(ctx.num_train)}, {
            "model": model,
            "affinity": affinity,
        }

    def aggregate(self, global_params, messages, server_state, ctx: ServerContext):
        stored = dict(server_state["models"])
        for row, cid in enumerate(ctx.client_ids):
            stored[cid] = {k: v[row].clone() for k, v in messages["model"].items()}
        return weighted_mean(messages["model"], messages["weight"]), {"models": stored}

    def personal_params(self, protocol: str, global_params: Params, client_state: State) -> Params:
        if protocol != "personal":
            return super().personal_params(protocol, global_params, client_state)
        return dict(client_state["model"])
