"""FedNew, APPROXIMATE (Elgabli et al., "FedNew: A Communication-Efficient and Privacy-Preserving
Newton-Type Method for Federated Learning", ICML 2022), as a second-order baseline of DQN-Fed,
whose paper gives no details of its deep-network implementation: the matrix-free reading the
spec recommends (specs/qffl-dqnfed.md B-D9), labelled approximate.

One ADMM pass a round on the Newton system Σ_k H_k y = Σ_k g_k, consensus form, ρ = `rho`:

- `client_begin`: the dual update λ_k ← λ_k + ρ (y_k − ȳ) with the client's last y_k and the
  ȳ the server broadcasts (exact under full participation; a client that skipped rounds uses the
  latest ȳ); λ_k and y_k start at 0.
- `before_step` (the round's single step, `training.local_steps: 1`: the client's gradient and
  Hessian are its batch's, so a full batch gives its whole data): g_k = ∇f_k(θ^t) and y_k solving
  (H_k + ρI) y = g_k − λ_k + ρ ȳ by `cg_steps` conjugate-gradient steps (10) from 0, each with a
  forward-over-reverse Hessian-vector product; the client does not move.
- `aggregate`: ȳ ← the clients' mean y_k (uniform: with λ summing to 0 this is the consensus
  average), θ ← θ − server_lr · ȳ (1: the Newton step).

A network's Hessian is indefinite; CG assumes H_k + ρI positive definite, and where it is not
its steps can grow without bound: ρ must exceed the most negative curvature (B-D9: grid-search
ρ; the tests use ρ = 10 on a small MLP where ρ = 1 diverges).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch.func import grad, grad_and_value, jvp

from fedbench.algorithms.base import (
    Algorithm,
    Batch,
    ClientContext,
    ServerContext,
    ServerSetup,
    State,
)
from fedbench.algorithms.opt_in import FrozenPasses, ServerOutputs
from fedbench.tree import Apply, Params, tree_zeros_like


def _dot(a: Params, b: Params) -> torch.Tensor:
    return sum((a[k] * b[k]).sum() for k in a)


def conjugate_gradient(matvec, b: Params, steps: int) -> Params:
    """`steps` CG iterations for A y = b from y = 0 (A symmetric positive definite, given as
    `matvec`); a fixed count, no data-dependent stopping (vmap-safe): a zero curvature pᵀAp
    leaves y where it is."""
    y = tree_zeros_like(b)
    r = dict(b)
    p = dict(b)
    rr = _dot(r, r)
    for _ in range(steps):
        ap = matvec(p)
        pap = _dot(p, ap)
        alpha = torch.where(pap > 0, rr / torch.where(pap > 0, pap, 1.0), 0.0)
        y = {k: y[k] + alpha * p[k] for k in y}
        r = {k: r[k] - alpha * ap[k] for k in r}
        rr_new = _dot(r, r)
        beta = torch.where(rr > 0, rr_new / torch.where(rr > 0, rr, 1.0), 0.0)
        p = {k: r[k] + beta * p[k] for k in r}
        rr = rr_new
    return y


@dataclass(frozen=True)
class FedNew(FrozenPasses, ServerOutputs, Algorithm):
    """One consensus-ADMM pass a round on the Newton system, CG with Hessian-vector products."""

    name: ClassVar[str] = "fednew"
    carry_updates: ClassVar[bool] = True
    server_scalars: ClassVar[tuple[str, ...]] = ("update_norm",)

    rho: float = 1.0
    cg_steps: int = 10
    server_lr: float = 1.0

    def __post_init__(self):
        if not self.rho > 0:
            raise ValueError(f"fednew: rho must be > 0 (got {self.rho!r})")
        if not isinstance(self.cg_steps, int) or self.cg_steps < 1:
            raise ValueError(f"fednew: cg_steps must be a positive integer (got {self.cg_steps!r})")
        if not self.server_lr > 0:
            raise ValueError(f"fednew: server_lr must be > 0 (got {self.server_lr!r})")

    # -- server ----------------------------------------------------------------------------
    def init_server_state(self, global_params: Params, setup: ServerSetup | None = None) -> State:
        return {"y_bar": tree_zeros_like(global_params), "update_norm": float("nan")}

    def aggregate(
        self,
        global_params: Params,
        messages: dict[str, Any],
        server_state: State,
        ctx: ServerContext,
    ) -> tuple[Params, State]:
        y_bar = {k: v.mean(0) for k, v in messages["y"].items()}
        new = {k: v - self.server_lr * y_bar[k] for k, v in global_params.items()}
        norm = self.server_lr * float(sum(v.pow(2).sum() for v in y_bar.values())) ** 0.5
        return new, {"y_bar": y_bar, "update_norm": norm}

    def server_metrics(self, server_state: State) -> dict[str, float]:
        return {"update_norm": float(server_state["update_norm"])}

    # -- clients ---------------------------------------------------------------------------
    def init_client_state(self, client_id: int, global_params: Params, fresh) -> State:
        return {"lam": tree_zeros_like(global_params), "y": tree_zeros_like(global_params)}

    def client_begin(
        self, global_params: Params, server_state: State, client_state: State, ctx: ClientContext
    ) -> tuple[Params, State]:
        if ctx.num_steps > 1:
            raise ValueError(
                "fednew: one Newton-system solve a round on one batch; set training.local_steps: 1 "
                "(with batch_size >= the client's data for its full gradient and Hessian)"
            )
        y_bar = server_state["y_bar"]
        lam = {
            k: v + self.rho * (client_state["y"][k] - y_bar[k])
            for k, v in client_state["lam"].items()
        }
        device = next(iter(global_params.values())).device
        carry = {
            "lam": lam,
            "y_bar": y_bar,
            "y": tree_zeros_like(global_params),
            "loss": torch.zeros((), device=device),
        }
        return dict(global_params), carry

    def before_step(
        self, apply: Apply, params: Params, batch: Batch, carry: State, noise: Any
    ) -> State:
        def loss(p: Params) -> torch.Tensor:
            return self.data_loss(apply, p, batch)

        g, value = grad_and_value(loss)(params)
        rhs = {k: g[k] - carry["lam"][k] + self.rho * carry["y_bar"][k] for k in g}

        def matvec(v: Params) -> Params:
            hv = jvp(grad(loss), (params,), (v,))[1]
            return {k: hv[k] + self.rho * v[k] for k in hv}

        return {"y": conjugate_gradient(matvec, rhs, self.cg_steps), "loss": value.detach()}

    def client_end(
        self,
        global_params: Params,
        params: Params,
        carry: State,
        client_state: State,
        ctx: ClientContext,
    ) -> tuple[dict[str, Any], State]:
        return {"y": carry["y"]}, {"lam": carry["lam"], "y": carry["y"]}
