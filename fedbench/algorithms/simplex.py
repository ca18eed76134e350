"""Exact small solvers over the probability simplex (AAggFF-S's ONS step, AFL, FedMGDA+).

`simplex_qp` is a primal active-set method (Nocedal & Wright, Numerical Optimization, Alg. 16.3)
for min ½ xᵀQx + cᵀx s.t. Σx = 1, lo ≤ x ≤ hi. Each iteration solves the equality-constrained
problem on the free coordinates exactly, so the answer is the exact KKT point (to float64 rounding),
not a solver tolerance; the tests check it against enumerating every active set.
"""

from __future__ import annotations

import numpy as np


def project_simplex(v: np.ndarray) -> np.ndarray:
    """Euclidean projection onto {x ≥ 0, Σx = 1} (sort-based; Duchi et al. 2008, Fig. 1)."""
    v = np.asarray(v, dtype=np.float64)
    u = np.sort(v)[::-1]
    css = np.cumsum(u) - 1.0
    k = np.arange(1, len(v) + 1)
    rho = np.nonzero(u - css / k > 0)[0][-1]
    return np.maximum(v - css[rho] / (rho + 1), 0.0)


def _eqp(Q: np.ndarray, g: np.ndarray, free: np.ndarray) -> np.ndarray:
    """Step d on the free coordinates minimising ½dᵀQd + gᵀd with Σd = 0 (d = 0 elsewhere).

    Q_FF d = -g_F + ν1 with 1ᵀd = 0 gives d = Q_FF⁻¹(ν1 - g_F), ν = 1ᵀQ_FF⁻¹g_F / 1ᵀQ_FF⁻¹1
    (Cholesky); the full KKT system by least squares when Q_FF is not positive definite.
    """
    from scipy.linalg import cho_factor, cho_solve  # local: scipy is start-up cost for every run

    f = np.nonzero(free)[0]
    n = len(f)
    Qf, gf = Q[np.ix_(f, f)], g[f]
    d = np.zeros_like(g)
    try:
        chol = cho_factor(Qf)
        qg, q1 = cho_solve(chol, gf), cho_solve(chol, np.ones(n))
        d[f] = (qg.sum() / q1.sum()) * q1 - qg
        return d
    except np.linalg.LinAlgError:
        pass
    kkt = np.zeros((n + 1, n + 1))
    kkt[:n, :n] = Qf
    kkt[:n, n] = 1.0
    kkt[n, :n] = 1.0
    sol = np.linalg.lstsq(kkt, np.concatenate([-gf, [0.0]]), rcond=None)[0]
    d[f] = sol[:n]
    return d


def simplex_qp(
    Q: np.ndarray,
    c: np.ndarray,
    lo: float | np.ndarray = 0.0,
    hi: float | np.ndarray | None = None,
    x0: np.ndarray | None = None,
    tol: float = 1e-11,
) -> np.ndarray:
    """argmin ½xᵀQx + cᵀx over Σx = 1, lo ≤ x ≤ hi, for a positive (semi)definite Q.

    `x0` must be feasible (default: uniform, feasible whenever lo ≤ 1/K ≤ hi).
    """
    Q = np.asarray(Q, dtype=np.float64)
    c = np.asarray(c, dtype=np.float64)
    K = len(c)
    lo_v = np.broadcast_to(np.asarray(lo, dtype=np.float64), (K,)).copy()
    hi_v = np.broadcast_to(np.asarray(np.inf if hi is None else hi, np.float64), (K,)).copy()
    x = np.full(K, 1.0 / K) if x0 is None else np.asarray(x0, dtype=np.float64).copy()
    if abs(x.sum() - 1) > 1e-9 or np.any(x < lo_v - 1e-12) or np.any(x > hi_v + 1e-12):
        raise ValueError("simplex_qp: the start point is not feasible (sum 1 within the bounds)")
    scale = max(1.0, float(np.abs(Q).max()), float(np.abs(c).max()))
    # Working set: -1 = held at lo, +1 = held at hi, 0 = free.
    at = np.zeros(K, dtype=np.int64)
    at[x <= lo_v] = -1
    at[x >= hi_v] = 1
    for _ in range(50 * K + 100):
        g = Q @ x + c
        free = at == 0
        # On the free coordinates the point is stationary when their gradients are all equal.
        spread = float(np.ptp(g[free])) if free.any() else 0.0
        d = _eqp(Q, g, free) if spread > tol * scale else np.zeros(K)
        if not g @ d < 0:
            # Stationary on the working set: release the bound whose multiplier has the wrong sign.
            if free.any():
                lam = g[free].mean()
            else:
                lows, highs = g[at == -1], g[at == 1]
                top = highs.max() if len(highs) else -np.inf
                bottom = lows.min() if len(lows) else np.inf
                lam = 0.5 * (top + bottom) if np.isfinite(top + bottom) else min(top, bottom)
                if not np.isfinite(lam):
                    lam = top if np.isfinite(top) else bottom
            mu = np.where(at == -1, g - lam, np.where(at == 1, lam - g, 0.0))
            worst = int(np.argmin(mu))
            if mu[worst] >= -tol * scale:
                return np.clip(x, lo_v, hi_v)
            at[worst] = 0
            continue
        # Longest step along d that keeps every free coordinate within its bounds.
        step, block, side = 1.0, -1, 0
        for i in np.nonzero(free & (d < 0))[0]:
            s = (lo_v[i] - x[i]) / d[i]
            if s < step:
                step, block, side = s, i, -1
        for i in np.nonzero(free & (d > 0))[0]:
            s = (hi_v[i] - x[i]) / d[i]
            if s < step:
                step, block, side = s, i, 1
        x = x + max(step, 0.0) * d
        if block >= 0:
            at[block] = side
            x[block] = lo_v[block] if side == -1 else hi_v[block]
    raise RuntimeError(f"simplex_qp: no convergence in {50 * K + 100} active-set iterations")


def qp_objective(Q: np.ndarray, c: np.ndarray, x: np.ndarray) -> float:
    """½xᵀQx + cᵀx."""
    return float(0.5 * x @ Q @ x + c @ x)
