"""DQN-Fed (Hamidi & Ye, "Distributed Quasi-Newton Method for Fair and Fast Federated
Learning"; specs/qffl-dqnfed.md Part B): every client's first-order decrease equals its
quasi-Newton decrement. The paper's code is not public; each open choice takes the spec's
recommendation (B-D1..B-D8, B-D25, B-D26), named here and in the run's settings.

How it differs from FedAvg, hook by hook (E = 1, the setting of every table but FEMNIST's):

- `init_server_state`: the previous global model θ^{t−1} (the server broadcasts it with θ^t,
  B-D8); before round 1 there is none and θ^0 stands in, so no curvature pair exists then.
- `client_begin` / `before_step` / `local_loss` / `update_mask`: the client does not move
  (every parameter frozen); over one pass of its batches `before_step` accumulates the
  mini-batch gradients of its loss at θ^t and at θ^{t−1} on the same batches (B-D7's "local
  GD" reading: the pass's mean gradient), and the step's loss value for the training loss
  (`local_loss` returns it detached: no parameter gradient is taken twice).
- `client_end`: g = the mean gradient at θ^t, the pair s = θ^t − θ^{t−1}, y = g − g(θ^{t−1})
  (kept when sᵀy > 0 by a relative margin), d̃ = gᵀHg by the inverse-BFGS two-loop recursion
  (fedbench/algorithms/dqnfed_math.py; `bfgs_form: direct_literal` reads eq. 19 as printed);
  the message is (g, d̃).
- `aggregate`: u = Gᵀ(GGᵀ)⁻¹d̃ in float64 (= the scaled Gram-Schmidt + minimum-norm step of
  eqs. 7-17, §B.3.6), θ ← θ − server_lr_scale·u (1 = the paper; `max_update_norm` clips ‖u‖ as
  an opt-in ablation, B-D26). Logged each round: η = Σ‖g̃_k‖⁻², ‖u‖, min/max d̃_k, the Gram
  condition number and any ridge the solve needed.

E > 1 (FEMNIST's E = 2: curvature pairs along local SGD epochs, B-D4/B-D5) is not built yet and
is refused with that message.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch.func import grad_and_value

from fedbench.algorithms.base import (
    Algorithm,
    Batch,
    ClientContext,
    ServerContext,
    ServerSetup,
    State,
)
from fedbench.algorithms.dqnfed_math import BFGS_FORMS, curvature_ok, decrement, min_norm_step
from fedbench.tree import Apply, Params, tree_zeros_like


def _flat(tree: Params, keys: list[str]) -> torch.Tensor:
    return torch.cat([tree[k].reshape(-1) for k in keys])


@dataclass(frozen=True)
class DQNFed(Algorithm):
    """DQN-Fed: quasi-Newton decrements, orthogonalised and met by a minimum-norm step."""

    name: ClassVar[str] = "dqnfed"
    carry_updates: ClassVar[bool] = True
    server_scalars: ClassVar[tuple[str, ...]] = (
        "eta",
        "update_norm",
        "d_min",
        "d_max",
        "gram_condition",
        "ridge",
    )

    bfgs_form: str = "inverse"
    server_lr_scale: float = 1.0
    max_update_norm: float | None = None
    ridge_eps: float = 0.0

    def __post_init__(self):
        if self.bfgs_form not in BFGS_FORMS:
            raise ValueError(
                f"dqnfed: bfgs_form must be one of {BFGS_FORMS} (got {self.bfgs_form!r})"
            )
        if not self.server_lr_scale > 0:
            raise ValueError(f"dqnfed: server_lr_scale must be > 0 (got {self.server_lr_scale!r})")
        if self.max_update_norm is not None and not self.max_update_norm > 0:
            raise ValueError(
                f"dqnfed: max_update_norm must be > 0 or null (got {self.max_update_norm!r})"
            )
        if not self.ridge_eps >= 0:
            raise ValueError(f"dqnfed: ridge_eps must be >= 0 (got {self.ridge_eps!r})")

    # -- server ----------------------------------------------------------------------------
    def init_server_state(self, global_params: Params, setup: ServerSetup | None = None) -> State:
        state: State = {"prev": {k: v.clone() for k, v in global_params.items()}}
        state.update(dict.fromkeys(self.server_scalars, math.nan))
        return state

    def aggregate(
        self,
        global_params: Params,
        messages: dict[str, Any],
        server_state: State,
        ctx: ServerContext,
    ) -> tuple[Params, State]:
        keys = list(global_params)
        grads = torch.cat([messages["grad"][k].flatten(1) for k in keys], dim=1)
        d = messages["d"].to(dtype=torch.float64, device=grads.device)
        step = min_norm_step(grads, d, self.ridge_eps)
        u = step.u * self.server_lr_scale
        norm = float(u.norm())
        if self.max_update_norm is not None and norm > self.max_update_norm:
            u = u * (self.max_update_norm / norm)
        new, start = {}, 0
        for k in keys:
            v = global_params[k]
            n = v.numel()
            new[k] = v - u[start : start + n].reshape(v.shape).to(v.dtype)
            start += n
        state = {
            "prev": dict(global_params),
            "eta": step.eta,
            "update_norm": float(u.norm()),
            "d_min": float(d.min()),
            "d_max": float(d.max()),
            "gram_condition": step.gram_condition,
            "ridge": step.ridge,
        }
        return new, state

    def server_metrics(self, server_state: State) -> dict[str, float]:
        return {k: float(server_state[k]) for k in self.server_scalars}

    # -- clients ---------------------------------------------------------------------------
    def client_begin(
        self, global_params: Params, server_state: State, client_state: State, ctx: ClientContext
    ) -> tuple[Params, State]:
        if ctx.steps_per_epoch and ctx.num_steps > ctx.steps_per_epoch:
            raise ValueError(
                "dqnfed: local_epochs > 1 (curvature pairs along local SGD epochs, FEMNIST's "
                "E = 2) is not implemented yet; set training.local_epochs: 1"
            )
        device = next(iter(global_params.values())).device
        carry = {
            "prev": server_state["prev"],
            "g": tree_zeros_like(global_params),
            "g_prev": tree_zeros_like(global_params),
            "count": torch.zeros((), device=device),
            "loss": torch.zeros((), device=device),
        }
        return dict(global_params), carry

    def before_step(
        self, apply: Apply, params: Params, batch: Batch, carry: State, noise: Any
    ) -> State:
        """The batch's gradients at θ^t and θ^{t−1}, added to the pass's sums."""

        def loss(p: Params) -> torch.Tensor:
            return self.data_loss(apply, p, batch)

        g, value = grad_and_value(loss)(params)
        g_prev = grad_and_value(loss)(carry["prev"])[0]
        return {
            "g": {k: carry["g"][k] + g[k] for k in g},
            "g_prev": {k: carry["g_prev"][k] + g_prev[k] for k in g_prev},
            "count": carry["count"] + 1,
            "loss": value.detach(),
        }

    def local_loss(
        self, apply: Apply, params: Params, batch: Batch, carry: State, noise: Any
    ) -> tuple[torch.Tensor, State]:
        return carry["loss"], {}  # detached: the engine takes no gradient; the value is logged

    def update_mask(self, params: Params, carry: State, noise: Any) -> dict[str, torch.Tensor]:
        return {k: torch.zeros((), device=v.device) for k, v in params.items()}

    def client_end(
        self,
        global_params: Params,
        params: Params,
        carry: State,
        client_state: State,
        ctx: ClientContext,
    ) -> tuple[dict[str, Any], State]:
        n = max(float(carry["count"]), 1.0)
        g = {k: v / n for k, v in carry["g"].items()}
        keys = list(global_params)
        flat_g = _flat(g, keys).double()
        s = (_flat(global_params, keys) - _flat(carry["prev"], keys)).double()
        y = flat_g - _flat(carry["g_prev"], keys).double() / n
        pairs = [(s, y)] if curvature_ok(s, y) else []
        d = decrement(flat_g, pairs, self.bfgs_form)
        return {"grad": g, "d": d, "weight": float(ctx.num_train)}, client_state
