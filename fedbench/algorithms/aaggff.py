"""AAggFF (Hahn, Kim & Lee, ICML 2024; thesis ch. III): mixing coefficients by online decisions.

The server treats each round's pre-training client losses as "returns" of a portfolio p on the
simplex and updates p by online convex optimisation on ℓ(p) = -log(1 + ⟨p, r⟩) (eq. 3.3):
AAggFF-S (cross-silo) by Online Newton Step in FTRL form (eq. 3.7), AAggFF-D (cross-device) by
linearised FTRL with an entropy regulariser, closed form (eq. 3.12), on a doubly-robust estimate of
the partially observed responses (eq. 3.10). The pure math is in module functions; the two classes
only keep the state and aggregate. `variant: code` reproduces the released code (spec aaggff.md §13:
ONS objective, DR estimate, Normal CDF, initial p); `thesis` follows the thesis equations.

Under `training.precision: bf16` only the clients' forward passes are autocast: the responses
(the CDF of float32-evaluated losses), the ONS step (float64 simplex QP) and the FTRL closed form
stay float32 or wider.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from fedbench.algorithms.base import ServerContext, State
from fedbench.algorithms.fedprox import ProxLocal
from fedbench.algorithms.opt_in import ServerOutputs
from fedbench.algorithms.server_opt import ServerOptimized
from fedbench.algorithms.simplex import simplex_qp
from fedbench.tree import weighted_mean

VARIANTS = ("code", "thesis")
# The release's `--fair_const` index of each CDF (spec aaggff.md §3.3).
CODE_INDEX = ("weibull", "exponential", "frechet", "normal", "gumbel", "logistic")


def cdf(name: str, x: np.ndarray, variant: str = "thesis") -> np.ndarray:
    """The six response transformations of thesis eq. 3.8 / §5.1, at their fixed parameters.

    `variant="code"` keeps the release's Normal "CDF" 0.5 (1 + erfc((x - 1)/√2)), which decreases
    in x with range (0.5, 1.5) (spec §3.3); the other five are the same in both.
    """
    x = np.asarray(x, dtype=np.float64)
    if name == "weibull":  # shape 2, scale 1
        return 1.0 - np.exp(-(x**2))
    if name == "exponential":  # rate 1
        return 1.0 - np.exp(-x)
    if name == "frechet":  # shape 1, scale 1; CDF(0) = 0
        with np.errstate(divide="ignore"):
            return np.where(x > 0, np.exp(-1.0 / np.where(x > 0, x, 1.0)), 0.0)
    if name == "gumbel":  # location 1, scale 1
        return np.exp(-np.exp(-(x - 1.0)))
    if name == "logistic":  # location 1, scale 1
        return 1.0 / (1.0 + np.exp(-(x - 1.0)))
    if name == "normal":  # mean 1, std 1
        from scipy.special import erf, erfc  # local: scipy is start-up cost for every other run

        if variant == "code":
            return 0.5 * (1.0 + erfc((x - 1.0) / math.sqrt(2.0)))
        return 0.5 * (1.0 + erf((x - 1.0) / math.sqrt(2.0)))
    raise ValueError(f"unknown CDF {name!r}; valid: {', '.join(CODE_INDEX)}")


def responses(
    losses: np.ndarray, name: str, c1: float, c2: float, variant: str = "thesis"
) -> np.ndarray:
    """r_i = C1 + (C2 - C1) CDF(F_i / F̄), F̄ the unweighted mean of the observed losses (eq. 3.8)."""
    f = np.asarray(losses, dtype=np.float64)
    mean = f.mean()
    x = f / mean if mean > 0 else np.ones_like(f)
    return c1 + (c2 - c1) * cdf(name, x, variant)


def ons_constants(lipschitz: float, K: int) -> tuple[float, float]:
    """α = 4 K L∞ and β = 1 / (4 L∞) (Theorem 3.1)."""
    return 4.0 * K * lipschitz, 1.0 / (4.0 * lipschitz)


def ons_step(
    p: np.ndarray,
    r: np.ndarray,
    G: np.ndarray,
    A: np.ndarray,
    b: np.ndarray,
    alpha: float,
    beta: float,
    variant: str = "thesis",
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One AAggFF-S decision: (p^(t+1), G, A, b) from p^(t), the responses r^(t) and the sums
    G = Σ g, A = Σ g gᵀ, b = Σ ⟨g, p^(τ)⟩ g of the previous rounds.

    thesis (eq. 3.7): argmin_p ⟨G, p⟩ + α/2 ‖p‖² + β/2 Σ_τ ⟨g^(τ), p - p^(τ)⟩², i.e. the QP
    ½ pᵀ(αI + βA) p + (G - βb)ᵀ p. code: ⟨G, p⟩ + α/2 ‖p‖² + β/2 pᵀ(αI + A) p (no cross-term,
    α counted twice; spec §4.2).
    """
    g = -r / (1.0 + p @ r)
    G, A, b = G + g, A + np.outer(g, g), b + (g @ p) * g
    K = len(p)
    eye = np.eye(K)
    if variant == "code":
        Q, c = (alpha + alpha * beta) * eye + beta * A, G
    else:
        Q, c = alpha * eye + beta * A, G - beta * b
    return simplex_qp(Q, c), G, A, b


def dr_estimate(
    r_obs: np.ndarray,
    sampled: np.ndarray,
    K: int,
    C: float,
    variant: str = "thesis",
    reference: float | None = None,
) -> tuple[np.ndarray, float]:
    """Doubly-robust response estimate (eq. 3.10) and r̄, the mean observed response.

    thesis: r̄ for unsampled clients, r̄ + (r_i - r̄)/C for sampled ones. code: (r_i - r̄)/C for
    sampled ones (the "+ r̄" dropped; spec §5.3). `reference` replaces r̄ as the imputed value
    (Lemma 3.2's unbiasedness assumes it does not depend on the sample; the in-sample r̄ of the
    algorithm gives E[r̆_i] - r_i = (1/|S| - 1/K)(mean_{j≠i} r_j - r_i) under uniform sampling).
    """
    rbar = float(np.mean(r_obs)) if reference is None else float(reference)
    est = np.full(K, rbar)
    ipw = (np.asarray(r_obs, dtype=np.float64) - rbar) / C
    est[sampled] = ipw if variant == "code" else rbar + ipw
    return est, rbar


def linearised_grad(r_est: np.ndarray, rbar: float, p: np.ndarray) -> np.ndarray:
    """ğ = -r̆/(1 + ⟨p, r0⟩) + r0 ⟨p, r̆ - r0⟩/(1 + ⟨p, r0⟩)², r0 = r̄·1 (Lemma 3.3, eq. 3.11)."""
    r0 = np.full_like(r_est, rbar)
    denom = 1.0 + p @ r0
    return -r_est / denom + r0 * (p @ (r_est - r0)) / denom**2


def dr_lipschitz(c1: float, c2: float, C: float) -> float:
    """L̆∞ = C2/(1 + C1) + 2 (C2 - C1) / (C (1 + C1)) (Lemma 3.5); C + 2 at C1 = 0, C2 = C."""
    return c2 / (1.0 + c1) + 2.0 * (c2 - c1) / (C * (1.0 + c1))


def eg_decision(grad_sum: np.ndarray, round_: int, lipschitz: float) -> np.ndarray:
    """p^(t+1) ∝ exp(-√(log K) Σ_τ ğ^(τ) / (L̆∞ √(t+1))) at 1-based round t (eq. 3.12)."""
    K = len(grad_sum)
    logits = -grad_sum * math.sqrt(math.log(K)) / (lipschitz * math.sqrt(round_ + 1))
    e = np.exp(logits - logits.max())
    return e / e.sum()


def sampled_weights(p: np.ndarray, sampled: np.ndarray) -> np.ndarray:
    """p̃_i = p_i / Σ_{j∈S} p_j over the sampled clients (Alg. 3.2)."""
    w = p[sampled]
    return w / w.sum()


def _vec(x: torch.Tensor | np.ndarray) -> np.ndarray:
    return np.asarray(x.cpu().numpy() if isinstance(x, torch.Tensor) else x, dtype=np.float64)


@dataclass(frozen=True)
class _AAggFF(ServerOutputs, ServerOptimized):
    """Shared fields: CDF, response range, variant, and the server optimiser the p-weighted update
    goes through (plug-and-play with FedAvgM/FedAdam/FedYogi/FedAdagrad, Table 3.10)."""

    needs_pre_loss: ClassVar[bool] = True
    server_scalars: ClassVar[tuple[str, ...]] = ("objective", "objective_code")
    cdf: str = "weibull"
    c1: float = 0.0
    c2: float | None = None  # None: 1/K (AAggFF-S) or C (AAggFF-D), thesis §5.2
    variant: str = "code"

    def __post_init__(self):
        super().__post_init__()
        if self.cdf not in CODE_INDEX:
            raise ValueError(f"{self.name}: unknown cdf {self.cdf!r}; valid: {CODE_INDEX}")
        if self.variant not in VARIANTS:
            raise ValueError(
                f"{self.name}: variant must be one of {VARIANTS}, got {self.variant!r}"
            )

    def server_metrics(self, server_state: State) -> dict[str, float]:
        """Figure 3.1's cumulative global objective Σ_t Σ_i p_i^(t) F_i (thesis) and the release's
        Σ_t -log(1 + ⟨F, p^(t)⟩) logged under the same name (spec §11)."""
        keys = ("objective", "objective_code")
        return {k: server_state[k] for k in keys if k in server_state}

    def _initial_p(self, K: int, C: float) -> np.ndarray:
        # The release starts from C·1_K (FedavgServer's mix_coefs), the thesis from 1/K.
        return np.full(K, C if self.variant == "code" else 1.0 / K)

    def _apply(self, global_params, messages, weights: np.ndarray, server_state: State, ctx):
        w = torch.as_tensor(weights, dtype=torch.float64)
        update = weighted_mean(messages["delta"], w)
        return self.server_update(global_params, update, server_state, ctx)


@dataclass(frozen=True)
class AAggFFS(_AAggFF):
    """AAggFF-S (thesis Alg. 3.1, eq. 3.7): ONS over the simplex with all K clients every round."""

    name: ClassVar[str] = "aaggff_s"

    def aggregate(self, global_params, messages, server_state, ctx: ServerContext):
        K = ctx.num_clients
        if len(ctx.client_ids) != K:
            raise ValueError(
                f"aaggff_s needs full participation (all {K} clients each round), got "
                f"{len(ctx.client_ids)}; use aaggff_d for partial participation"
            )
        st = dict(server_state)
        if "p" not in st:
            st.update(
                p=torch.as_tensor(self._initial_p(K, 1.0)),
                G=torch.zeros(K, dtype=torch.float64),
                A=torch.zeros(K, K, dtype=torch.float64),
                b=torch.zeros(K, dtype=torch.float64),
                objective=0.0,
                objective_code=0.0,
            )
        losses = _vec(messages["pre_loss"])
        c2 = 1.0 / K if self.c2 is None else self.c2
        r = responses(losses, self.cdf, self.c1, c2, self.variant)
        alpha, beta = ons_constants(c2 / (1.0 + self.c1), K)
        p = _vec(st["p"])
        p_new, G, A, b = ons_step(
            p, r, _vec(st["G"]), _vec(st["A"]), _vec(st["b"]), alpha, beta, self.variant
        )
        st.update(
            p=torch.as_tensor(p_new),
            G=torch.as_tensor(G),
            A=torch.as_tensor(A),
            b=torch.as_tensor(b),
            objective=st["objective"] + float(p @ losses),  # Figure 3.1's cumulative Σ p F
            objective_code=st["objective_code"] - math.log1p(float(p @ losses)),
        )
        ids = np.asarray(ctx.client_ids)
        return self._apply(global_params, messages, sampled_weights(p_new, ids), st, ctx)


@dataclass(frozen=True)
class AAggFFD(_AAggFF):
    """AAggFF-D (thesis Alg. 3.2, eqs. 3.10-3.12): linearised FTRL-EG on a doubly-robust
    estimate of the responses; C = |S| / K is the sampling probability."""

    name: ClassVar[str] = "aaggff_d"

    def aggregate(self, global_params, messages, server_state, ctx: ServerContext):
        K = ctx.num_clients
        ids = np.asarray(ctx.client_ids)
        C = len(ids) / K
        st = dict(server_state)
        if "p" not in st:
            st.update(
                p=torch.as_tensor(self._initial_p(K, C)),
                grad_sum=torch.zeros(K, dtype=torch.float64),
                objective=0.0,
                objective_code=0.0,
            )
        losses = _vec(messages["pre_loss"])
        c2 = C if self.c2 is None else self.c2
        r = responses(losses, self.cdf, self.c1, c2, self.variant)
        p = _vec(st["p"])
        r_est, rbar = dr_estimate(r, ids, K, C, self.variant)
        grad_sum = _vec(st["grad_sum"]) + linearised_grad(r_est, rbar, p)
        p_new = eg_decision(grad_sum, ctx.round, dr_lipschitz(self.c1, c2, C))
        st.update(
            p=torch.as_tensor(p_new),
            grad_sum=torch.as_tensor(grad_sum),
            objective=st["objective"] + float(p[ids] @ losses),  # Figure 3.1, unnormalised p
            objective_code=st["objective_code"] - math.log1p(float(p[ids] @ losses)),
        )
        return self._apply(global_params, messages, sampled_weights(p_new, ids), st, ctx)


# AAggFF + FedProx (Table 3.10): FedProx's local term composed with AAggFF's server; μ and the
# release's unsquared half-norm form (spec §9.6) as defaults.


@dataclass(frozen=True)
class AAggFFSProx(ProxLocal, AAggFFS):
    """AAggFF-S with FedProx's proximal local term."""

    name: ClassVar[str] = "aaggff_s_prox"
    mu: float = 0.001
    prox: str = "half_norm_all"


@dataclass(frozen=True)
class AAggFFDProx(ProxLocal, AAggFFD):
    """AAggFF-D with FedProx's proximal local term."""

    name: ClassVar[str] = "aaggff_d_prox"
    mu: float = 0.001
    prox: str = "half_norm_all"
