"""SuPerFed (Hahn et al., KDD 2022; thesis ch. II, Alg. 2.1/2.2, eqs. 2.3-2.6).

Each client keeps a local model θ^l (its own random initialisation) beside the federated model θ^f.
From round L on, every mini-batch trains both through the mixed model θ(λ) = (1-λ)θ^f + λθ^l with
λ ~ U(0,1) (one λ per model: MM; one per layer: LM), plus a proximity term to the received global
model and an orthogonality term between θ^f and θ^l. Only θ^f is sent and averaged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch

from fedbench.algorithms.base import Algorithm, Batch, ClientContext, ServerContext, State
from fedbench.algorithms.fedprox import PROX_FORMS, prox_term
from fedbench.algorithms.opt_in import LocalSteps, PersonalEvaluation
from fedbench.tree import Apply, Params, tree_sub, weighted_mean

FED, LOC = "fed.", "loc."
MODES = ("mm", "lm")
AGGREGATE = ("weights", "all")
LAMBDA_GRID = tuple(round(0.1 * i, 1) for i in range(11))


def module_groups(names: list[str]) -> list[list[str]]:
    """Parameter names grouped by the module that owns them (one λ per group in LM).

    A module is the name without its last component, so a BatchNorm's weight and bias share a
    group and a multi-layer nn.LSTM (weight_ih_l0, weight_ih_l1, ...) is one group, as in the code.
    """
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(name.rsplit(".", 1)[0], []).append(name)
    return list(groups.values())


def orthogonality(fed: Params, loc: Params, eps: float) -> torch.Tensor:
    """cos²(θ^f, θ^l) over the flattened models (eq. 2.5); `eps` per element product (code)."""
    dot = sum((fed[k] * loc[k]).sum() + eps * fed[k].numel() for k in fed)
    fed_sq = sum((fed[k] ** 2).sum() for k in fed)
    loc_sq = sum((loc[k] ** 2).sum() for k in loc)
    return dot**2 / (fed_sq * loc_sq)


@dataclass(frozen=True)
class SuPerFed(LocalSteps, PersonalEvaluation, Algorithm):
    """SuPerFed-MM / -LM. Defaults follow the released code that produced Tables 2.3-2.7.

    `start`: L as a fraction of T; mixing (and the local model's training) from round
    floor(start * T) + 1 on (1-based rounds; thesis "t >= L" with t from 0 is the same round).
    `prox`: "layer_norm" = the code's mu * sum_l ||θ^f_l - θ^g_l|| (biases excluded);
    "squared" = the thesis' (mu/2)||θ^f - θ^g||². `ortho_eps`: the code adds 1e-6 per element
    product in the cosine's numerator (thesis: 0). `ortho_before_start`: the thesis' Alg. 2.2
    keeps Ω (with the orthogonality term) before L; the code switches it on with mixing.
    `aggregate`: "weights" = the code averages only tensors named *weight (BN biases stay at the
    server's value); "all" averages every federated tensor.
    """

    name: ClassVar[str] = "superfed"
    mode: str = "mm"
    mu: float = 0.01
    nu: float = 1.0
    start: float = 0.4
    prox: str = "layer_norm"
    ortho_eps: float = 1e-6
    ortho_before_start: bool = False
    aggregate_keys: str = "weights"

    personal_protocols: ClassVar[tuple[str, ...]] = tuple(f"lambda{v}" for v in LAMBDA_GRID)
    selections: ClassVar[dict] = {"best_lambda": (personal_protocols, "top1")}
    val_selections: ClassVar[dict] = {"val_lambda": (personal_protocols, "top1")}

    def __post_init__(self):
        checks = {
            "mode": self.mode in MODES,
            "prox": self.prox in PROX_FORMS,
            "aggregate_keys": self.aggregate_keys in AGGREGATE,
            "mu": self.mu >= 0,
            "nu": self.nu >= 0,
            "start": 0 <= self.start <= 1,
        }
        for key, ok in checks.items():
            if not ok:
                raise ValueError(f"superfed: bad {key} = {getattr(self, key)!r}")

    def mixing(self, ctx: ClientContext) -> bool:
        """Whether round ctx.round mixes (and trains the local model)."""
        return ctx.round > math.floor(self.start * ctx.rounds)

    def init_client_state(self, client_id: int, global_params: Params, fresh) -> State:
        return {"local": fresh()}

    def client_begin(self, global_params, server_state, client_state, ctx: ClientContext):
        params = {FED + k: v for k, v in global_params.items()}
        carry = {"anchor": global_params}
        if self.mixing(ctx):
            params.update({LOC + k: v for k, v in client_state["local"].items()})
        elif self.ortho_before_start:
            carry["local"] = client_state["local"]  # a constant: θ^l is frozen before L
        return params, carry

    def step_noise(self, rng, ctx: ClientContext, global_params):
        if not self.mixing(ctx):
            return None
        width = 1 if self.mode == "mm" else len(module_groups(list(global_params)))
        return torch.rand(ctx.num_steps, width, generator=rng)

    def local_loss(self, apply: Apply, params: Params, batch: Batch, carry, noise):
        fed = {k[len(FED) :]: v for k, v in params.items() if k.startswith(FED)}
        loc = {k[len(LOC) :]: v for k, v in params.items() if k.startswith(LOC)}
        loss = self.mu * prox_term(fed, carry["anchor"], self.prox)
        if loc:
            lam = self._lambdas(list(fed), noise)
            mixed = {k: (1 - lam[k]) * fed[k] + lam[k] * loc[k] for k in fed}
            loss = loss + self.nu * orthogonality(fed, loc, self.ortho_eps)
        else:
            mixed = fed
            if self.ortho_before_start and self.nu:
                loss = loss + self.nu * orthogonality(fed, carry["local"], self.ortho_eps)
        return self.data_loss(apply, mixed, batch) + loss

    def _lambdas(self, names: list[str], noise: torch.Tensor) -> dict[str, torch.Tensor]:
        if self.mode == "mm":
            return dict.fromkeys(names, noise[0])
        lam = {}
        for g, group in enumerate(module_groups(names)):
            lam.update(dict.fromkeys(group, noise[g]))
        return lam

    def client_end(self, global_params, params, carry, client_state, ctx: ClientContext):
        fed = {k: params[FED + k] for k in global_params}
        if LOC + next(iter(global_params)) in params:
            client_state = {"local": {k: params[LOC + k] for k in global_params}}
        return {"delta": tree_sub(fed, global_params), "weight": float(ctx.num_train)}, client_state

    def aggregate(self, global_params, messages, server_state, ctx: ServerContext):
        mean_delta = weighted_mean(messages["delta"], messages["weight"])
        new = dict(global_params)
        for k in global_params:
            if self.aggregate_keys == "all" or k.endswith("weight"):
                new[k] = global_params[k] + mean_delta[k]
        return new, server_state

    def personal_params(self, protocol: str, global_params: Params, client_state: State) -> Params:
        lam = float(protocol[len("lambda") :])
        local = client_state["local"]
        return {k: (1 - lam) * global_params[k] + lam * local[k] for k in global_params}
