"""FedLF (Pan et al., "FedLF: Layer-Wise Fair Federated Learning", AAAI 2024), a baseline of
DQN-Fed (specs/qffl-dqnfed.md §B.4), as its release runs it (zibinpan/FedLF at 7b6e0b7,
gfedplat/algorithm/FedLF/FedLF.py, Client.cal_gradient_loss, Algorithm.update_module).

How it differs from FedAvg, hook by hook:

- `client_begin` / `before_step` / `local_loss` / `update_mask`: the client does not train; over
  one pass of its batches (training.local_epochs: 1) it sums the batch-size-weighted gradients and
  losses of its model at θ^t: its full local gradient g_k and loss l_k (the release's
  `cal_gradient_loss`; `sgd_step`, one random batch, is not built).
- `client_end`: the message is (g_k, l_k).
- `aggregate`, per parameter tensor ("layer", the release's `Loc_list`): the sampled clients'
  gradient rows scaled to their mean norm μ; a fairness row h·Q (h the gradient of the angle
  between the loss vector l and the uniform preference p = 1/√m, h = ((l·p) l/‖l‖ − p‖l‖)/‖l‖²),
  scaled to μ; and, when more clients have been seen than take part in a round, the last
  gradients of clients seen within the last τ = ⌊seen/m⌋ rounds but not sampled now, each scaled
  to μ. The layer's direction is the minimum-norm point of their convex hull (the release's
  cvxopt QP; here `simplex_qp` with a 1e-12 relative ridge). The concatenated d is rescaled to
  the norm of the clients' mean gradient; while some client's directional derivative gₖ·d is below
  −1e-6 it is halved if its norm exceeds twice the unscaled d's, else the unscaled d is taken (the
  release's loop, kept as written). θ ← θ − η d, η = the run's learning rate at the round
  (training.lr with its decay: the release's global lr η^t and lr_decay; no server momentum,
  the release's default). Where the fairness row is zero (all clients' losses equal) it is left
out (the release divides by its zero norm).

With one client and no history the release's solver returns early with three values where four
are unpacked (a crash); here d = g, a gradient step. History is kept per client on the server
(its last gradient, a model-sized vector each: K models of memory under partial participation).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
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
from fedbench.algorithms.opt_in import FrozenPasses, ServerOutputs
from fedbench.algorithms.simplex import simplex_qp
from fedbench.tree import Apply, Params, tree_zeros_like

# The release's tolerance on a client's directional derivative g_k·d before d is shrunk.
CONFLICT_TOL = 1e-6


def min_norm_point(rows: torch.Tensor) -> torch.Tensor:
    """argmin over λ in the simplex of ‖λᵀ rows‖² (float64; a 1e-12 relative ridge keeps the
    active-set solves regular when rows are collinear); returns λᵀ rows."""
    q = rows.to(torch.float64)
    gram = (q @ q.T).cpu().numpy()
    n = len(gram)
    gram = gram + 1e-12 * max(1.0, float(np.trace(gram)) / n) * np.eye(n)
    lam = simplex_qp(gram, np.zeros(n), lo=0.0, hi=1.0)
    if not np.all(np.isfinite(lam)):
        lam = np.full(n, 1.0 / n)
    return torch.as_tensor(lam, device=q.device) @ q


def fair_row(losses: torch.Tensor) -> torch.Tensor:
    """h = ((l·p) l/‖l‖ − p‖l‖)/‖l‖², p = 1/√m: the release's `h_vec`, the direction in loss
    space that turns l towards the uniform vector (float64)."""
    l = losses.to(torch.float64)
    p = torch.full_like(l, 1.0 / len(l) ** 0.5)
    norm = l.norm()
    return ((l @ p) * l / norm - p * norm) / norm**2


def fedlf_direction(
    grads: torch.Tensor,
    losses: torch.Tensor,
    history: torch.Tensor | None,
    layers: list[slice],
) -> torch.Tensor:
    """The release's d before rescaling: per layer, the min-norm point of the clients' rows
    (scaled to their mean norm μ), the fairness row and the history rows (both scaled to μ)."""
    if len(grads) == 1 and history is None:
        return grads[0].to(torch.float64)
    h = fair_row(losses)
    parts = []
    for sl in layers:
        q = grads[:, sl].to(torch.float64)
        norms = q.norm(dim=1, keepdim=True)
        mu = norms.mean()
        q = q / norms * mu
        fair = h @ q
        # The release divides by ‖fair‖ unguarded: equal losses (h = 0) would give NaNs there.
        rows = [q] if fair.norm() == 0 else [q, (fair / fair.norm() * mu)[None]]
        if history is not None:
            past = history[:, sl].to(torch.float64)
            rows.append(past / past.norm(dim=1, keepdim=True) * mu)
        parts.append(min_norm_point(torch.cat(rows)))
    return torch.cat(parts)


def rescale(d: torch.Tensor, grads: torch.Tensor) -> torch.Tensor:
    """d scaled to ‖mean_k g_k‖, then the release's guard: while some client's g_k·d <
    −CONFLICT_TOL, halve d if ‖d‖ > 2‖d_unscaled‖, else return d_unscaled."""
    g = grads.to(torch.float64)
    raw = d
    d = d / d.norm() * g.mean(0).norm()
    while float((-(g @ d)).max()) > CONFLICT_TOL:
        if d.norm() > 2 * raw.norm():
            d = d / 2
        else:
            return raw
    return d


@dataclass(frozen=True)
class FullGradientPass(FrozenPasses, Algorithm):
    """Clients that do not train: one pass over their batches at θ^t sums the batch-size-weighted
    gradients and losses, and the message is the full local gradient and loss (FedLF, FedNL)."""

    carry_updates: ClassVar[bool] = True

    # -- clients ---------------------------------------------------------------------------
    def client_begin(
        self, global_params: Params, server_state: State, client_state: State, ctx: ClientContext
    ) -> tuple[Params, State]:
        if ctx.steps_per_epoch and ctx.num_steps > ctx.steps_per_epoch:
            raise ValueError(
                f"{self.name}: clients send their full gradient at θ^t (one pass, no local "
                "training); set training.local_epochs: 1"
            )
        device = next(iter(global_params.values())).device
        carry = {
            "g": tree_zeros_like(global_params),
            "n": torch.zeros((), device=device),
            "loss_sum": torch.zeros((), device=device),
            "loss": torch.zeros((), device=device),
        }
        return dict(global_params), carry

    def before_step(
        self, apply: Apply, params: Params, batch: Batch, carry: State, noise: Any
    ) -> State:
        """The batch's gradient and loss at θ^t, weighted by its sample count, added to the sums."""
        size = batch.mask.sum() if batch.mask is not None else torch.tensor(float(len(batch.y)))
        size = size.to(carry["n"])

        def loss(p: Params) -> torch.Tensor:
            return self.data_loss(apply, p, batch)

        g, value = grad_and_value(loss)(params)
        return {
            "g": {k: carry["g"][k] + size * g[k] for k in g},
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
        n = carry["n"].clamp(min=1.0)
        grad = {k: v / n for k, v in carry["g"].items()}
        return {"grad": grad, "loss": carry["loss_sum"] / n}, client_state


@dataclass(frozen=True)
class FedLF(ServerOutputs, FullGradientPass):
    """FedLF: a layer-wise min-norm direction over the clients' full gradients, a fairness row
    and recent clients' gradients; one server step a round, no local training."""

    name: ClassVar[str] = "fedlf"
    server_scalars: ClassVar[tuple[str, ...]] = ("update_norm", "history_rows")

    # -- server ----------------------------------------------------------------------------
    def init_server_state(self, global_params: Params, setup: ServerSetup | None = None) -> State:
        # seen[k]: the round client k last took part in (-1: never); last[k]: its gradient then.
        return {"seen": {}, "last": {}, "update_norm": float("nan"), "history_rows": 0.0}

    def aggregate(
        self,
        global_params: Params,
        messages: dict[str, Any],
        server_state: State,
        ctx: ServerContext,
    ) -> tuple[Params, State]:
        keys = list(global_params)
        grads = torch.cat([messages["grad"][k].flatten(1) for k in keys], dim=1)
        losses = messages["loss"]
        ids = list(ctx.client_ids)
        seen, last = dict(server_state["seen"]), dict(server_state["last"])
        history = None
        if len(seen) > len(ids):  # some client has dropped out since it was last seen
            tau = len(seen) // len(ids)
            rows = [last[k] for k in sorted(seen) if k not in ids and ctx.round - seen[k] <= tau]
            history = torch.stack(rows) if rows else None
        layers, start = [], 0
        for k in keys:
            layers.append(slice(start, start + global_params[k].numel()))
            start += global_params[k].numel()
        d = rescale(fedlf_direction(grads, losses, history, layers), grads)
        new = {
            k: v - ctx.lr * d[sl].reshape(v.shape).to(v.dtype)
            for (k, v), sl in zip(global_params.items(), layers)
        }
        for row, k in enumerate(ids):
            seen[k], last[k] = ctx.round, grads[row]
        state = {
            "seen": seen,
            "last": last,
            "update_norm": float(ctx.lr * d.norm()),
            "history_rows": float(0 if history is None else len(history)),
        }
        return new, state

    def server_metrics(self, server_state: State) -> dict[str, float]:
        return {k: float(server_state[k]) for k in self.server_scalars}
