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

E > 1 (FEMNIST's E = 2; B.3.7, B-D3/B-D4/B-D5): the client runs 2E − 1 engine epochs
(`local_epochs`), a frozen pass, then E − 1 times one epoch of local SGD (the run's optimiser and
lr) followed by a frozen pass at the new iterate θ̂^e. Pass 0 gives the pair (θ^t − θ^{t−1},
ḡ(θ^t) − ḡ(θ^{t−1})) as at E = 1; pass e the pair (θ̂^e − θ̂^{e−1}, ḡ(θ̂^e) − ḡ(θ̂^{e−1})), each
kept under the same curvature guard; d̃ uses every kept pair (the matrix after all E updates,
B-D3). The gradient sent is `send: last_grad` (Alg. 1's ∇f(θ̂^E), the default) or
`pseudo_grad` = (θ^t − θ̂^E) / (η · SGD steps) (Appendix B.2's reading); d̃ is the gradient's
sent form's decrement. The steps' roles are per-step 0/1 marks (`step_noise`: column 0 = an SGD
step, column 1 + e = a step of pass e), so both executors run it; every step computes the
gradients at its parameters and at θ^{t−1} and the engine's gradient, masked by role, so a round
costs about 3 (2E − 1) batch gradients a step of data against E = 1's 2. Each pass's gradient
is the unweighted mean of its batches' gradients, as at E = 1; batches are drawn afresh each
epoch, so passes see the same samples in other batches (the same gradient at full batch).
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
from fedbench.algorithms.opt_in import FrozenPasses, ServerOutputs
from fedbench.tree import Apply, Params, tree_zeros_like

SENDS = ("last_grad", "pseudo_grad")  # B-D5: what a client sends when E > 1


def _flat(tree: Params, keys: list[str]) -> torch.Tensor:
    return torch.cat([tree[k].reshape(-1) for k in keys])


@dataclass(frozen=True)
class DQNFed(FrozenPasses, ServerOutputs, Algorithm):
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
    send: str = "last_grad"
    server_lr_scale: float = 1.0
    max_update_norm: float | None = None
    ridge_eps: float = 0.0

    def __post_init__(self):
        if self.bfgs_form not in BFGS_FORMS:
            raise ValueError(
                f"dqnfed: bfgs_form must be one of {BFGS_FORMS} (got {self.bfgs_form!r})"
            )
        if self.send not in SENDS:
            raise ValueError(f"dqnfed: send must be one of {SENDS} (got {self.send!r})")
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
    def local_epochs(self, epochs: int) -> int:
        return 2 * epochs - 1  # E = 1: one frozen pass; else pass, (SGD epoch, pass) x (E - 1)

    @staticmethod
    def _passes(ctx: ClientContext) -> int:
        """E, the client's number of frozen passes, from its 2E − 1 engine epochs (1 when local
        training counts steps: one frozen pass over that many batches)."""
        if not ctx.steps_per_epoch:
            return 1
        return (ctx.num_steps // ctx.steps_per_epoch + 1) // 2

    def client_begin(
        self, global_params: Params, server_state: State, client_state: State, ctx: ClientContext
    ) -> tuple[Params, State]:
        device = next(iter(global_params.values())).device
        carry = {
            "prev": server_state["prev"],
            "g": tree_zeros_like(global_params),
            "g_prev": tree_zeros_like(global_params),
            "count": torch.zeros((), device=device),
            "loss": torch.zeros((), device=device),
        }
        for e in range(1, self._passes(ctx)):  # pass e's gradient sum, count and iterate
            carry[f"g{e}"] = tree_zeros_like(global_params)
            carry[f"count{e}"] = torch.zeros((), device=device)
            carry[f"x{e}"] = tree_zeros_like(global_params)
        return dict(global_params), carry

    def step_noise(
        self, rng: torch.Generator, ctx: ClientContext, global_params: Params
    ) -> torch.Tensor | None:
        """E > 1: each step's role, [SGD, pass 0, ..., pass E−1] marks (deterministic)."""
        passes = self._passes(ctx)
        if passes == 1:
            return None
        epoch = torch.arange(ctx.num_steps) // ctx.steps_per_epoch
        marks = torch.zeros(ctx.num_steps, 1 + passes)
        marks[:, 0] = (epoch % 2 == 1).float()
        for e in range(passes):
            marks[:, 1 + e] = (epoch == 2 * e).float()
        return marks

    def before_step(
        self, apply: Apply, params: Params, batch: Batch, carry: State, noise: Any
    ) -> State:
        """The batch's gradients at θ^t and θ^{t−1}, added to the pass's sums (E > 1: at the
        step's parameters, into the sums of the pass the step belongs to)."""

        def loss(p: Params) -> torch.Tensor:
            return self.data_loss(apply, p, batch)

        g, value = grad_and_value(loss)(params)
        g_prev = grad_and_value(loss)(carry["prev"])[0]
        if noise is None:
            return {
                "g": {k: carry["g"][k] + g[k] for k in g},
                "g_prev": {k: carry["g_prev"][k] + g_prev[k] for k in g_prev},
                "count": carry["count"] + 1,
                "loss": value.detach(),
            }
        first = noise[1]
        out: State = {
            "g": {k: carry["g"][k] + first * g[k] for k in g},
            "g_prev": {k: carry["g_prev"][k] + first * g_prev[k] for k in g_prev},
            "count": carry["count"] + first,
            "loss": value.detach(),
        }
        for e in range(1, noise.shape[-1] - 1):
            m = noise[1 + e]
            out[f"g{e}"] = {k: carry[f"g{e}"][k] + m * g[k] for k in g}
            out[f"count{e}"] = carry[f"count{e}"] + m
            out[f"x{e}"] = {k: m * params[k].detach() + (1 - m) * carry[f"x{e}"][k] for k in g}
        return out

    def trains(self, noise: Any) -> bool | torch.Tensor:
        """E = 1: every step a pass; E > 1: the SGD epochs' steps train (mark 0)."""
        return False if noise is None else noise[0]

    def local_loss(
        self, apply: Apply, params: Params, batch: Batch, carry: State, noise: Any
    ) -> tuple[torch.Tensor, State]:
        """E > 1 (the only steps that reach it): an SGD step trains on the data loss; a pass step
        of the same lockstep logs the value its `before_step` found."""
        sgd = noise[0]
        return sgd * self.data_loss(apply, params, batch) + (1 - sgd) * carry["loss"], {}

    def client_end(
        self,
        global_params: Params,
        params: Params,
        carry: State,
        client_state: State,
        ctx: ClientContext,
    ) -> tuple[dict[str, Any], State]:
        keys = list(global_params)
        n = max(float(carry["count"]), 1.0)
        g = {k: v / n for k, v in carry["g"].items()}
        flat_g = _flat(g, keys).double()
        x_last = _flat(global_params, keys)  # differences in the parameters' dtype, then float64
        s = (x_last - _flat(carry["prev"], keys)).double()
        y = flat_g - _flat(carry["g_prev"], keys).double() / n
        pairs = [(s, y)] if curvature_ok(s, y) else []
        passes = self._passes(ctx)
        for e in range(1, passes):
            n_e = max(float(carry[f"count{e}"]), 1.0)
            g_e = {k: v / n_e for k, v in carry[f"g{e}"].items()}
            x_e, flat_e = _flat(carry[f"x{e}"], keys), _flat(g_e, keys).double()
            s, y = (x_e - x_last).double(), flat_e - flat_g
            if curvature_ok(s, y):
                pairs.append((s, y))
            g, flat_g, x_last = g_e, flat_e, x_e
        if passes > 1 and self.send == "pseudo_grad":
            sgd_steps = (passes - 1) * ctx.steps_per_epoch
            scale = 1.0 / (ctx.lr * sgd_steps)
            g = {k: (global_params[k] - carry[f"x{passes - 1}"][k]) * scale for k in global_params}
            flat_g = _flat(g, keys).double()
        d = decrement(flat_g, pairs, self.bfgs_form)
        return {"grad": g, "d": d, "weight": float(ctx.num_train)}, client_state
