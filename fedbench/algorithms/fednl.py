"""FedNL, APPROXIMATE (Safaryan et al., "FedNL: Making Newton-Type Methods Applicable to
Federated Learning", ICML 2022), as a second-order baseline of DQN-Fed. DQN-Fed's paper gives no
details of its deep-network implementation; this is the matrix-free reading the spec recommends
(specs/qffl-dqnfed.md B-D9), labelled approximate: its numbers are not expected to match.

How it differs from FedAvg:

- Clients do not train (`FullGradientPass`): one pass at θ^t gives the full local gradient g_k
  and, per batch, a Hutchinson estimate of the Hessian's diagonal, z ⊙ (∇²f z) with a Rademacher
  z (the client's `algorithm` stream; a forward-over-reverse Hessian-vector product), averaged
  with batch-size weights: D_k.
- Each client keeps its learned diagonal H_k (0 at the start) and sends the Top-K compressed
  difference S_k = TopK(D_k − H_k) (the `top_k` largest entries in magnitude, 1 % by default),
  then H_k ← H_k + α S_k (α = `hessian_lr`, 1 for Top-K as in FedNL).
- The server keeps H (0 at the start), H ← H + α mean_k S_k over the round's clients, and steps
  θ ← θ − server_lr · ḡ / (max(H, 0) + μ), ḡ the clients' mean gradient (uniform, as FedNL
  averages its n devices), μ = `mu` (1e-3 by default, B-D9; grid-search it). Negative diagonal
  estimates are set to 0 before adding μ (FedNL projects its Hessian estimate onto {H ⪰ μI}; for
  a diagonal, max(H, μ) would be that projection; B-D9's H + μI is taken with H's negative part
  removed so the step is always a descent direction).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch.func import grad_and_value, jvp

from fedbench.algorithms.base import Batch, ClientContext, ServerContext, ServerSetup, State
from fedbench.algorithms.fedlf import FullGradientPass
from fedbench.algorithms.opt_in import ServerOutputs
from fedbench.tree import Apply, Params, tree_zeros_like


def top_k(v: torch.Tensor, k: int) -> torch.Tensor:
    """v with all but its k largest-magnitude entries set to 0 (ties: the lower index first)."""
    if k >= v.numel():
        return v.clone()
    keep = v.abs().topk(k).indices
    out = torch.zeros_like(v)
    out[keep] = v[keep]
    return out


@dataclass(frozen=True)
class FedNL(ServerOutputs, FullGradientPass):
    """Newton-type steps from a learned diagonal Hessian, its updates Top-K compressed."""

    name: ClassVar[str] = "fednl"
    server_scalars: ClassVar[tuple[str, ...]] = ("update_norm", "hessian_min", "hessian_max")

    mu: float = 1e-3
    top_k_fraction: float = 0.01
    hessian_lr: float = 1.0
    server_lr: float = 1.0

    def __post_init__(self):
        if not self.mu > 0:
            raise ValueError(f"fednl: mu must be > 0 (got {self.mu!r})")
        if not 0 < self.top_k_fraction <= 1:
            raise ValueError(
                f"fednl: top_k_fraction must be in (0, 1] (got {self.top_k_fraction!r})"
            )
        if not self.hessian_lr > 0 or not self.server_lr > 0:
            raise ValueError("fednl: hessian_lr and server_lr must be > 0")

    # -- clients ---------------------------------------------------------------------------
    def init_client_state(self, client_id: int, global_params: Params, fresh) -> State:
        return {"h": tree_zeros_like(global_params)}

    def step_noise(
        self, rng: torch.Generator, ctx: ClientContext, global_params: Params
    ) -> dict[str, torch.Tensor]:
        """Per step, a Rademacher vector of each parameter's shape (Hutchinson's probe)."""
        dev = rng.device
        return {
            k: torch.randint(0, 2, (ctx.num_steps, *v.shape), generator=rng, device=dev)
            .to(v.dtype)
            .mul_(2)
            .sub_(1)
            for k, v in global_params.items()
        }

    def client_begin(
        self, global_params: Params, server_state: State, client_state: State, ctx: ClientContext
    ) -> tuple[Params, State]:
        params, carry = super().client_begin(global_params, server_state, client_state, ctx)
        return params, {**carry, "diag": tree_zeros_like(global_params)}

    def before_step(
        self, apply: Apply, params: Params, batch: Batch, carry: State, noise: Any
    ) -> State:
        """The batch's gradient, loss and z ⊙ (∇²f z), weighted by its sample count."""
        size = batch.mask.sum() if batch.mask is not None else torch.tensor(float(len(batch.y)))
        size = size.to(carry["n"])

        def loss(p: Params) -> torch.Tensor:
            return self.data_loss(apply, p, batch)

        (g, value), (hz, _) = jvp(grad_and_value(loss), (params,), (noise,))
        return {
            "g": {k: carry["g"][k] + size * g[k] for k in g},
            "diag": {k: carry["diag"][k] + size * noise[k] * hz[k] for k in hz},
            "n": carry["n"] + size,
            "loss_sum": carry["loss_sum"] + size * value.detach(),
            "loss": value.detach(),
        }

    def client_end(
        self,
        global_params: Params,
        params: Params,
        carry: State,
        client_state: State,
        ctx: ClientContext,
    ) -> tuple[dict[str, Any], State]:
        message, _ = super().client_end(global_params, params, carry, client_state, ctx)
        n = carry["n"].clamp(min=1.0)
        h = client_state["h"]
        shift = {}
        for k, v in carry["diag"].items():
            diff = (v / n - h[k]).reshape(-1)
            kept = max(1, round(self.top_k_fraction * diff.numel()))
            shift[k] = top_k(diff, kept).reshape(v.shape)
        state = {"h": {k: h[k] + self.hessian_lr * shift[k] for k in h}}
        return {**message, "shift": shift}, state

    # -- server ----------------------------------------------------------------------------
    def init_server_state(self, global_params: Params, setup: ServerSetup | None = None) -> State:
        state: State = {"h": tree_zeros_like(global_params)}
        state.update(dict.fromkeys(self.server_scalars, float("nan")))
        return state

    def aggregate(
        self,
        global_params: Params,
        messages: dict[str, Any],
        server_state: State,
        ctx: ServerContext,
    ) -> tuple[Params, State]:
        h = {
            k: v + self.hessian_lr * messages["shift"][k].mean(0)
            for k, v in server_state["h"].items()
        }
        new, sq = {}, 0.0
        for k, v in global_params.items():
            step = self.server_lr * messages["grad"][k].mean(0) / (h[k].clamp(min=0) + self.mu)
            new[k] = v - step
            sq += float(step.pow(2).sum())
        flat = torch.cat([v.reshape(-1) for v in h.values()])
        state = {
            "h": h,
            "update_norm": sq**0.5,
            "hessian_min": float(flat.min()),
            "hessian_max": float(flat.max()),
        }
        return new, state

    def server_metrics(self, server_state: State) -> dict[str, float]:
        return {k: float(server_state[k]) for k in self.server_scalars}
