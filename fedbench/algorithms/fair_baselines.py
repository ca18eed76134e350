"""Fair-FL aggregation baselines of the AAggFF chapter (thesis Table 3.2, spec aaggff.md §2.4).

Each rule is a pure function of the clients' updates, pre-training losses F_i (the global model's
loss on the client's training split, `needs_pre_loss`) and sizes; the classes only wire them to the
engine. Defaults follow the AAggFF release, which produced the thesis tables: no n_i in q-FedAvg,
TERM and AFL (`weighted: true` gives Table 3.2's n_i-weighted forms).

Under `training.precision: bf16` only the clients' forward passes are autocast: the pre-training
losses F_i come from float32 evaluation, and F_i^q (q-FedAvg), exp(t F_i) (TERM), the λ and
FedMGDA+ simplex problems (`simplex.py`, float64) and PropFair's log-barrier all stay float32 or
wider.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from fedbench.algorithms.base import Algorithm, ServerContext
from fedbench.algorithms.server_opt import FedOpt, compensated_lr
from fedbench.algorithms.simplex import project_simplex, simplex_qp
from fedbench.tree import Params, weighted_mean

# The official q-FFL code adds this to every loss before the power (fair_flearn qffedavg.py).
QFFL_EPS = 1e-10
AFL_VARIANTS = ("code", "whole")


def _flat(stacked: Params) -> torch.Tensor:
    """[clients, total parameters] view of stacked per-client trees."""
    return torch.cat([v.reshape(v.shape[0], -1) for v in stacked.values()], dim=1)


def qfedavg_update(
    deltas: Params, losses: torch.Tensor, q: float, L: float, sizes: torch.Tensor | None = None
) -> Params:
    """q-FedAvg's server update (Li et al. 2020, Alg. 2; spec qffl-dqnfed.md §A.10).

    With Δw_k = L (θ - θ_k) = -L δ_k: θ ← θ - Σ F_k^q Δw_k / Σ h_k, h_k = q F_k^(q-1) ‖Δw_k‖² +
    L F_k^q. Returns the additive update -Σ F_k^q Δw_k / Σ h_k. `sizes` multiplies numerator and
    denominator terms by n_k / n (thesis eq. 3.18); None is the official code (no n_k).
    """
    f = losses.to(torch.float64) + QFFL_EPS
    sq = _flat(deltas).to(torch.float64).pow(2).sum(dim=1) * L * L
    fq = f.pow(q)
    h = q * f.pow(q - 1) * sq + L * fq
    num = fq * L
    if sizes is not None:
        w = sizes.to(torch.float64) / sizes.sum()
        num, h = num * w, h * w
    coef = num / h.sum()
    return {k: torch.tensordot(coef.to(v.dtype), v, dims=1) for k, v in deltas.items()}


def term_weights(
    losses: torch.Tensor, lam: float, sizes: torch.Tensor | None = None
) -> torch.Tensor:
    """TERM: p_i ∝ exp(λ F_i) (release: softmax over the sampled clients; eq. 3.20 with n_i)."""
    z = lam * losses.to(torch.float64)
    if sizes is not None:
        z = z + torch.log(sizes.to(torch.float64))
    return torch.softmax(z, dim=0)


def propfair_weights(losses: torch.Tensor, M: float, sizes: torch.Tensor) -> torch.Tensor:
    """PropFair's implied mixing coefficients p_i ∝ n_i / (M - F_i) (thesis eq. 3.23)."""
    w = sizes.to(torch.float64) / (M - losses.to(torch.float64))
    return w / w.sum()


def propfair_loss(loss: torch.Tensor, M: float, threshold: float = 0.2) -> torch.Tensor:
    """The release's PropFair minibatch loss: -log(1 - ℓ/M) if M - ℓ ≥ 0.2, else ℓ/M."""
    safe = torch.clamp(loss, max=M - threshold)
    return torch.where(M - loss >= threshold, -torch.log1p(-safe / M), loss / M)


def afl_step(
    lam: np.ndarray, losses: np.ndarray, sampled: np.ndarray, gamma: float, variant: str = "code"
) -> np.ndarray:
    """AFL's projected gradient ascent on λ (Mohri et al. 2019) given the sampled clients' losses
    F_S (in the order of `sampled`); see `AFL` for the two readings.

    `code`: λ_S ← Proj_Δ(λ_S + γ F_S) on the sampled sub-vector alone, the other entries kept
    (AAggFF release, src/server/aflserver.py). `whole`: λ ← Proj_Δ(λ + γ g) on the whole
    K-vector, g = F on the sampled coordinates and 0 elsewhere.
    """
    if variant == "code":
        out = np.array(lam, dtype=np.float64)
        out[sampled] = project_simplex(out[sampled] + gamma * np.asarray(losses, np.float64))
        return out
    if variant != "whole":
        raise ValueError(f"afl: variant must be one of {AFL_VARIANTS}, got {variant!r}")
    grad = np.zeros_like(lam)
    grad[sampled] = losses
    return project_simplex(lam + gamma * grad)


def fedmgda_weights(directions: torch.Tensor, eps: float) -> np.ndarray:
    """FedMGDA+ (Hu et al. 2022): argmin ‖Σ λ_i d_i‖² over λ ∈ Δ, |λ_i - 1/N| ≤ ε, for unit
    directions d_i (rows). The Gram matrix gets a 1e-12 ridge so the active-set solves are
    regular when directions are collinear; uniform λ if the result is not finite (as the release).
    """
    d = directions.to(torch.float64).cpu().numpy()
    N = len(d)
    gram = d @ d.T
    gram = gram + 1e-12 * max(1.0, np.trace(gram) / N) * np.eye(N)
    lo, hi = max(0.0, 1.0 / N - eps), min(1.0, 1.0 / N + eps)
    lam = simplex_qp(gram, np.zeros(N), lo=lo, hi=hi)
    return lam if np.all(np.isfinite(lam)) else np.full(N, 1.0 / N)


def _combine(deltas: Params, weights: torch.Tensor) -> Params:
    """Σ_i w_i δ_i (weights used as given, not renormalised)."""
    return {
        k: torch.tensordot(weights.to(device=v.device, dtype=v.dtype), v, dims=1)
        for k, v in deltas.items()
    }


@dataclass(frozen=True)
class QFedAvg(Algorithm):
    """q-FedAvg (Li et al. 2020, "Fair Resource Allocation in FL", Alg. 2), L = 1/η at round 1."""

    name: ClassVar[str] = "qfedavg"
    needs_pre_loss: ClassVar[bool] = True
    q: float = 1.0
    weighted: bool = False
    server_lr_compensation: bool = False  # the AAggFF release's η_s · lr_1 / lr_t

    def __post_init__(self):
        if self.q < 0:
            raise ValueError(f"qfedavg: q must be >= 0, got {self.q}")

    def aggregate(self, global_params, messages, server_state, ctx: ServerContext):
        # The release fixes L at the initial client learning rate (spec aaggff.md §2.4).
        L = server_state.get("L", 1.0 / ctx.lr)
        eta, state = compensated_lr(1.0, self.server_lr_compensation, ctx, server_state)
        sizes = messages["weight"] if self.weighted else None
        up = qfedavg_update(messages["delta"], messages["pre_loss"], self.q, L, sizes)
        return {k: v + eta * up[k] for k, v in global_params.items()}, {**state, "L": L}


@dataclass(frozen=True)
class TERM(Algorithm):
    """TERM (Li et al. 2021) as an aggregation rule: p ∝ exp(λ F_i) (thesis eq. 3.20)."""

    name: ClassVar[str] = "term"
    needs_pre_loss: ClassVar[bool] = True
    lam: float = 0.1
    weighted: bool = False
    server_lr_compensation: bool = False  # the AAggFF release's η_s · lr_1 / lr_t

    def aggregate(self, global_params, messages, server_state, ctx: ServerContext):
        eta, state = compensated_lr(1.0, self.server_lr_compensation, ctx, server_state)
        sizes = messages["weight"] if self.weighted else None
        p = term_weights(messages["pre_loss"], self.lam, sizes)
        up = _combine(messages["delta"], p)
        return {k: v + eta * up[k] for k, v in global_params.items()}, state


@dataclass(frozen=True)
class AFL(Algorithm):
    """Agnostic FL (Mohri et al. 2019; thesis eq. 3.15): min over θ, max over λ ∈ Δ_{K-1} of
    Σ_i λ_i F_i(θ), λ by projected gradient ascent with step γ on the sampled clients' losses F_i
    (the global model's loss on client i's training split, `needs_pre_loss`), one λ_i per client
    kept across rounds; the server adds η_s Σ_{i∈S} w_i δ_i to the global model.

    `variant: code` (default; the AAggFF release, src/server/aflserver.py, which produced Table
    3.6): λ starts at C·1_K (FedavgServer's mix_coefs; C = |S|/K, the release's C whenever C·K is
    a whole number); each round only the sampled sub-vector is projected, λ_S ← Proj_Δ(λ_S +
    γ F_S), the unsampled entries keep their values, and w = λ_S as projected (it sums to 1; not
    renormalised). `variant: whole`: λ starts at 1/K and the whole K-vector is projected,
    λ ← Proj_Δ(λ + γ g) with g_i = F_i on S and 0 elsewhere; w = λ_S / Σ_S λ. With every client
    sampled (C = 1, every AFL cell of the thesis) the two agree: Proj_Δ(v + c·1) = Proj_Δ(v), so
    the starting value drops out after the first projection (to float rounding).
    """

    name: ClassVar[str] = "afl"
    needs_pre_loss: ClassVar[bool] = True
    gamma: float = 0.01
    variant: str = "code"
    server_lr_compensation: bool = False  # the AAggFF release's η_s · lr_1 / lr_t

    def __post_init__(self):
        if self.variant not in AFL_VARIANTS:
            raise ValueError(f"afl: variant must be one of {AFL_VARIANTS}, got {self.variant!r}")

    def aggregate(self, global_params, messages, server_state, ctx: ServerContext):
        K = ctx.num_clients
        ids = np.asarray(ctx.client_ids)
        eta, state = compensated_lr(1.0, self.server_lr_compensation, ctx, server_state)
        if "lam" in state:
            lam = np.asarray(state["lam"], dtype=np.float64)
        elif self.variant == "code":
            lam = np.full(K, len(ids) / K)
        else:  # float32's 1/K, as this reading always started: earlier runs' numbers hold
            lam = np.asarray(torch.full((K,), 1.0 / K), dtype=np.float64)
        lam = afl_step(lam, messages["pre_loss"].cpu().numpy(), ids, self.gamma, self.variant)
        w = torch.as_tensor(lam[ids])
        if self.variant == "code":
            up = _combine(messages["delta"], w)
        else:
            up = weighted_mean(messages["delta"], w) if w.sum() > 0 else None
        new = (
            global_params if up is None else {k: v + eta * up[k] for k, v in global_params.items()}
        )
        return new, {**state, "lam": torch.as_tensor(lam)}


@dataclass(frozen=True)
class FedMGDA(Algorithm):
    """FedMGDA+ (Hu et al. 2022): the min-norm convex combination of normalised updates within
    ε of uniform; the server steps η_s along it (the normalised directions, as the release)."""

    name: ClassVar[str] = "fedmgda"
    eps: float = 0.5
    server_lr: float = 1.0
    server_lr_compensation: bool = False  # the AAggFF release's η_s · lr_1 / lr_t

    def __post_init__(self):
        if not 0 <= self.eps <= 1:
            raise ValueError(f"fedmgda: eps must be in [0, 1], got {self.eps}")

    def aggregate(self, global_params, messages, server_state, ctx: ServerContext):
        flat = _flat(messages["delta"]).to(torch.float64)
        norms = flat.norm(dim=1, keepdim=True).clamp(min=1e-12)
        lam = torch.as_tensor(fedmgda_weights(flat / norms, self.eps), device=flat.device)
        coef = lam / norms.squeeze(1)
        up = _combine(messages["delta"], coef)
        eta, state = compensated_lr(self.server_lr, self.server_lr_compensation, ctx, server_state)
        return {k: v + eta * up[k] for k, v in global_params.items()}, state


@dataclass(frozen=True)
class PropFair(FedOpt):
    """PropFair (Zhang et al. 2023) as released: the client minimises -log(M - ℓ) per minibatch
    (spec §2.4: -log(1 - ℓ/M), linear ℓ/M near the pole); FedAvg's aggregation (FedOpt: sgd at
    server lr 1 unless configured; `uniform_weights` for the release at C < 1)."""

    name: ClassVar[str] = "propfair"
    M: float = 2.0

    def __post_init__(self):
        super().__post_init__()
        if not self.M > 0.2:
            raise ValueError(f"propfair: M must be > 0.2, got {self.M}")

    def data_loss(self, apply, params, batch):
        return propfair_loss(super().data_loss(apply, params, batch), self.M)
