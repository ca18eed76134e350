"""DQN-Fed's maths (Part B of specs/qffl-dqnfed.md, §B.3): the client's quasi-Newton decrement
and the server's orthogonalisation + minimum-norm step, as pure functions over flat vectors.

DQN-Fed's code is not public; where the paper leaves a choice open these take the spec's
recommendation (B-D1..B-D8, B-D25), named in the docstrings.

- Client (eq. 18, B-D1/B-D2): d̃_k = g_kᵀ H g_k with H the inverse-BFGS approximation of the
  local Hessian's inverse built from the round's curvature pairs (s, y) by the L-BFGS two-loop
  recursion (no d×d matrix), H0 = (sᵀy / yᵀy)·I from the newest pair (1·I without one).
  `bfgs_form: direct_literal` instead reads eq. (19) as written (the Hessian's BFGS update, so
  d̃ = gᵀBg grows with curvature): an ablation, through the compact form of B with B0 = I/H0.
- Server (eqs. 7, 8, 12, 17): the scaled Gram-Schmidt set g̃_k, λ*_k ∝ 1/‖g̃_k‖², the direction
  𝖉 = Σ λ*_k g̃_k and the step η = Σ 1/‖g̃_k‖², so u = η𝖉 = Σ g̃_k/‖g̃_k‖². Its closed form
  (§B.3.6) is u = Gᵀ(GGᵀ)⁻¹d̃, the minimum-norm u with G u = d̃ (every client's first-order
  decrease equals its decrement): `min_norm_step` solves that in float64 (B-D25), with a ridge
  fallback when the Gram matrix is singular; `gram_schmidt_step` is the literal route (tests).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

BFGS_FORMS = ("inverse", "direct_literal")
COLUMN_BLOCK = 1 << 16  # columns of G per float64 block in the server's products
CURVATURE_GUARD = 1e-10  # a pair is kept when sᵀy > guard·‖s‖·‖y‖ (B.3.7)


def initial_scale(pairs: list[tuple[torch.Tensor, torch.Tensor]]) -> float:
    """H0 = sᵀy / yᵀy of the newest pair (Nocedal & Wright's scaling), 1.0 without one."""
    if not pairs:
        return 1.0
    s, y = pairs[-1]
    return float(s @ y) / float(y @ y)


def curvature_ok(s: torch.Tensor, y: torch.Tensor) -> bool:
    """Whether (s, y) satisfies the curvature condition sᵀy > 0 by a relative margin."""
    return float(s @ y) > CURVATURE_GUARD * float(s.norm()) * float(y.norm())


def two_loop(
    g: torch.Tensor, pairs: list[tuple[torch.Tensor, torch.Tensor]], h0: float
) -> torch.Tensor:
    """H g for the inverse-BFGS matrix H built from H0·I by `pairs` (oldest first), by the
    L-BFGS two-loop recursion (Nocedal & Wright, Alg. 7.4)."""
    q = g.clone()
    rhos = [1.0 / float(y @ s) for s, y in pairs]
    alphas = []
    for (s, y), rho in zip(reversed(pairs), reversed(rhos)):
        a = rho * float(s @ q)
        alphas.append(a)
        q = q - a * y
    r = h0 * q
    for (s, y), rho, a in zip(pairs, rhos, reversed(alphas)):
        b = rho * float(y @ r)
        r = r + (a - b) * s
    return r


def direct_bfgs_product(
    g: torch.Tensor, pairs: list[tuple[torch.Tensor, torch.Tensor]], b0: float
) -> torch.Tensor:
    """B g for the Hessian's BFGS approximation (eq. 19 as printed) built from b0·I by
    `pairs`: B ← B − B s sᵀB / sᵀBs + y yᵀ / sᵀy, applied matrix-free (B v kept as a function of
    the earlier pairs' vectors)."""
    bs: list[torch.Tensor] = []  # B_j s_j for each pair j, with B_j the matrix before pair j

    def apply(v: torch.Tensor, upto: int) -> torch.Tensor:
        out = b0 * v
        for j in range(upto):
            s, y = pairs[j]
            out = (
                out
                - bs[j] * (float(bs[j] @ v) / float(s @ bs[j]))
                + y * (float(y @ v) / float(s @ y))
            )
        return out

    for j, (s, _) in enumerate(pairs):
        bs.append(apply(s, j))
    return apply(g, len(pairs))


def decrement(
    g: torch.Tensor,
    pairs: list[tuple[torch.Tensor, torch.Tensor]],
    form: str = "inverse",
) -> float:
    """d̃ = gᵀHg (eq. 18 with B-D1's inverse-BFGS H), or gᵀBg for `direct_literal`; a value
    that is not finite and positive falls back to H0·‖g‖² (B.3.7)."""
    if form not in BFGS_FORMS:
        raise ValueError(f"dqnfed: bfgs_form must be one of {BFGS_FORMS} (got {form!r})")
    g64 = g.double()
    p64 = [(s.double(), y.double()) for s, y in pairs]
    h0 = initial_scale(p64)
    if form == "inverse":
        d = float(g64 @ two_loop(g64, p64, h0))
    else:
        d = float(g64 @ direct_bfgs_product(g64, p64, 1.0 / h0))
    if not (d > 0 and d < float("inf")):
        d = h0 * float(g64 @ g64)
    return d


@dataclass(frozen=True)
class ServerStep:
    """The server's step u = η·𝖉 (θ ← θ − u) and what a round logs about it."""

    u: torch.Tensor  # float64, the flat update
    eta: float  # η = Σ 1/‖g̃_k‖² (= ‖u‖²)
    lambdas: torch.Tensor  # λ*_k (float64), > 0, summing to 1
    gram_condition: float  # condition number of G Gᵀ
    ridge: float  # the ridge added to G Gᵀ (0 unless it was singular)


def gram_schmidt_step(grads: torch.Tensor, d: torch.Tensor) -> ServerStep:
    """The literal route (eqs. 7, 8, 12, 17) in float64: g̃_1 = g_1/d_1, g̃_k = (g_k − Σ_{i<k}
    c_ki g̃_i) / (d_k − Σ_{i<k} c_ki) with c_ki = g_k·g̃_i / g̃_i·g̃_i; λ*_k = ‖g̃_k‖⁻² /
    Σ_j ‖g̃_j‖⁻²; 𝖉 = Σ λ*_k g̃_k; η = Σ_j ‖g̃_j‖⁻²."""
    G, dd = grads.double(), d.double()
    tilde: list[torch.Tensor] = []
    for k in range(len(G)):
        c = [float(G[k] @ t) / float(t @ t) for t in tilde]
        num = G[k] - sum((ci * t for ci, t in zip(c, tilde)), torch.zeros_like(G[k]))
        tilde.append(num / (float(dd[k]) - sum(c)))
    inv = torch.stack([1.0 / (t @ t) for t in tilde])
    lam = inv / inv.sum()
    direction = (lam[:, None] * torch.stack(tilde)).sum(0)
    eta = float(inv.sum())
    gram = G @ G.T
    return ServerStep(eta * direction, eta, lam, _condition(gram), 0.0)


EPS64 = float(torch.finfo(torch.float64).eps)


def min_norm_step(grads: torch.Tensor, d: torch.Tensor, ridge_eps: float = 0.0) -> ServerStep:
    """u = Gᵀα with (GGᵀ + εI)α = d̃ in float64 (§B.3.6): the Gram-Schmidt route's u without
    its divisions. ε = `ridge_eps`; when the Cholesky factorisation fails (dependent or
    identical gradients) 1e-8·trace/m is added instead (B-D25) and `ridge` says so. λ* come from
    the Cholesky factor (`_lambdas`), η = ‖u‖² = d̃ᵀα."""
    dd = d.double()
    m = len(grads)
    gram = gram_matrix(grads)
    if not (bool(torch.isfinite(gram).all()) and bool(torch.isfinite(dd).all())):
        # A client's gradient or decrement overflowed: a NaN step, so the engine stops the run as
        # diverged (with its round) instead of the factorisation raising.
        u = torch.full((grads.shape[1],), math.nan, dtype=torch.float64, device=grads.device)
        return ServerStep(
            u, math.nan, torch.full((m,), math.nan, dtype=torch.float64), math.nan, 0.0
        )
    if float(torch.trace(gram)) == 0.0:  # every gradient is 0 (a stationary point): no step
        u = torch.zeros(grads.shape[1], dtype=torch.float64, device=grads.device)
        return ServerStep(u, 0.0, torch.full((m,), 1.0 / m, dtype=torch.float64), math.inf, 0.0)
    ridge = float(ridge_eps)
    eye = torch.eye(m, dtype=gram.dtype, device=gram.device)
    factor, info = torch.linalg.cholesky_ex(gram + ridge * eye)
    # A factorisation that "succeeds" on rounding (a pivot² at the level of float64's epsilon
    # times the trace: dependent gradients, which some BLAS builds factor with a 1e-15 pivot)
    # fails as surely as one that stops: its α would be rounding noise times 1e15.
    trace = float(torch.trace(gram))
    if int(info) != 0 or float(torch.diagonal(factor).pow(2).min()) <= m * EPS64 * trace:
        ridge = max(ridge, 1e-8 * trace / m)
        factor = torch.linalg.cholesky(gram + ridge * eye)
    alpha = torch.cholesky_solve(dd[:, None], factor).squeeze(1)
    u = torch.cat([block.double().T @ alpha for block in grads.split(COLUMN_BLOCK, dim=1)])
    eta = float(u @ u)
    return ServerStep(u, eta, _lambdas(factor, dd), _condition(gram), ridge)


def gram_matrix(grads: torch.Tensor) -> torch.Tensor:
    """G Gᵀ in float64, accumulated over column blocks: no float64 copy of G (K = 1,000 clients
    of a 1M-parameter model hold 4 GB in float32, and would need 8 GB more)."""
    m = len(grads)
    gram = torch.zeros((m, m), dtype=torch.float64, device=grads.device)
    for block in grads.split(COLUMN_BLOCK, dim=1):
        b = block.double()
        gram += b @ b.T
    return gram


def _lambdas(factor: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    """λ*_k from the Gram matrix's Cholesky factor R (GGᵀ = R Rᵀ, lower): the Gram-Schmidt
    residual of g_k has squared norm R_kk², and g̃_k = residual_k / (d_k − Σ c_ki) where the
    denominator is the k-th entry of R⁻¹d̃ times R_kk; so ‖g̃_k‖ = 1/|(R⁻¹d̃)_k| and
    λ*_k ∝ (R⁻¹d̃)_k²."""
    z = torch.linalg.solve_triangular(factor, d[:, None], upper=False).squeeze(1)
    w = z * z
    return w / w.sum()


def _condition(gram: torch.Tensor) -> float:
    """The 2-norm condition number of the (symmetric PSD) Gram matrix."""
    ev = torch.linalg.eigvalsh(gram)
    lo = float(ev[0])
    return float(ev[-1]) / lo if lo > 0 else float("inf")
