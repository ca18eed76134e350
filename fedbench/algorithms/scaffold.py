"""SCAFFOLD (Karimireddy et al. 2020, Alg. 1, option II control variates)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from fedbench.algorithms.base import Algorithm, ClientContext, ServerContext, ServerSetup, State
from fedbench.algorithms.opt_in import LocalSteps
from fedbench.tree import Params, tree_sub, tree_zeros_like, weighted_mean

VARIANTS = ("standard", "superfed_code")


@dataclass(frozen=True)
class Scaffold(LocalSteps, Algorithm):
    """Local gradients corrected by c - c_i; server and client control variates kept across rounds.

    `variant: superfed_code` reproduces the SuPerFed release, whose correction is a no-op
    (spec superfed.md §3/§11), so that run behaves as FedAvg while still sending control variates.
    """

    name: ClassVar[str] = "scaffold"
    server_lr: float = 1.0
    variant: str = "standard"

    def __post_init__(self):
        if self.variant not in VARIANTS:
            raise ValueError(f"scaffold: variant must be one of {VARIANTS}, got {self.variant!r}")
        if self.server_lr <= 0:
            raise ValueError(f"scaffold: server_lr must be > 0, got {self.server_lr}")

    def init_server_state(self, global_params: Params, setup: ServerSetup | None = None) -> State:
        return {"c": tree_zeros_like(global_params)}

    def init_client_state(self, client_id: int, global_params: Params, fresh) -> State:
        return {"c": tree_zeros_like(global_params)}

    def client_begin(self, global_params, server_state: State, client_state: State, ctx):
        return dict(global_params), {"c_diff": tree_sub(server_state["c"], client_state["c"])}

    def correct_grads(self, grads: Params, params: Params, carry: State) -> Params:
        if self.variant == "superfed_code":
            return grads
        return {k: g + carry["c_diff"][k] for k, g in grads.items()}

    def client_end(self, global_params, params, carry, client_state, ctx: ClientContext):
        # Option II: c_i+ = c_i - c + (x - y_i) / (K * lr) = -c_diff + (x - y_i) / (K * lr).
        scale = 1.0 / (ctx.num_steps * ctx.lr)
        c_new = {k: -carry["c_diff"][k] + scale * (global_params[k] - params[k]) for k in params}
        message = {
            "delta": tree_sub(params, global_params),
            "delta_c": tree_sub(c_new, client_state["c"]),
            "weight": float(ctx.num_train),
        }
        return message, {"c": c_new}

    def aggregate(self, global_params, messages, server_state: State, ctx: ServerContext):
        # Sample-size weighting of the model deltas keeps round 1 identical to FedAvg.
        mean_delta = weighted_mean(messages["delta"], messages["weight"])
        new_params = {k: global_params[k] + self.server_lr * mean_delta[k] for k in global_params}
        frac = len(ctx.client_ids) / ctx.num_clients
        mean_dc = {k: v.mean(dim=0) for k, v in messages["delta_c"].items()}
        c = {k: server_state["c"][k] + frac * mean_dc[k] for k in mean_dc}
        return new_params, {"c": c}
