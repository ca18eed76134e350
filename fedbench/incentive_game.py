"""The fair incentive mechanism of 003 (specs/qffl-dqnfed.md §A.7): a Stackelberg game, no training.

The leader (server) announces a total payment τ >= 0; each of the M followers (clients) picks a data
amount x_n in [0, d_n] to maximise (A.7.2, 003:L117)

    u_n(x) = exp(γ_n) · x_n / Σ_i x_i · τ - C_n x_n,   C_n = C_n^com + C_n^cmp,

with the fairness coefficient γ_n = sign · β · |F_n - F_global| (003:L118). Everything depends on
the costs only through the effective costs c_n = C_n exp(-γ_n). The leader's utility is
U(τ) = λ g(X*(τ)) - τ with X* the followers' equilibrium total (003:L138).

Choices for what 003 leaves open (A.11):
- A-Q5: `fairness_sign` = -1 by default (γ_n = -β|gap|: a larger fairness gap lowers a client's
  reward multiplier, as FairFed's weights do); +1 is the other reading of the sign-stripped text.
- A-Q6: g in `G_CHOICES`, log(1+X) by default; λ = 50 by default (the spec's illustrations).
- A-Q7: the closed form runs on the participation set (the lowest effective costs that stay active);
  when a cap d_n binds there, the equilibrium comes from the aggregate equation
  Σ_n clip(X - c_n X²/τ, 0, d_n) = X (one unknown, solved by bracketing). The spec's
  Gauss-Seidel constrained best responses are a check, not the solver: from x = 1 they stop at
  the spurious fixed point x = 0 (no client enters when everyone else is out, although each
  would gain τ e^(γ_n) by entering), and with very unequal costs the equilibrium repels them
  into cycles (see `best_response_iteration`). Every Equilibrium carries a `status` from the
  best-response conditions (`equilibrium_residual`).
- A-Q8: M is the number of players everywhere (003 writes N in L145, L147).

All arrays are float64 numpy; every function is pure. The paper gives no numbers (A.9: QF-1..QF-4
are illustrative), so nothing here is checked against a reference value.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq, minimize_scalar

__all__ = [
    "FAIRNESS_SIGNS",
    "G_CHOICES",
    "STARTS",
    "STATUSES",
    "Equilibrium",
    "EquilibriumError",
    "IncentiveGame",
    "LeaderOptimum",
    "aggregate_equilibrium",
    "best_response",
    "best_response_iteration",
    "closed_form_equilibrium",
    "equilibrium",
    "equilibrium_residual",
    "fairfed_weights",
    "follower_utilities",
    "leader_utility",
    "optimal_payment",
    "participation_set",
]

FAIRNESS_SIGNS = (-1, 1)

# The leader's concave, increasing value of data, g(X) with g(0) = 0 (A-Q6).
_G = {
    "log1p": np.log1p,
    "sqrt": np.sqrt,
    "one_minus_exp": lambda x: -np.expm1(-x),
}
G_CHOICES = tuple(_G)


def _vector(name: str, values, *, low: float | None, strict: bool, allow_inf: bool = False):
    """`values` as a tuple of floats, each > low (strict) or >= low; ValueError naming `name`."""
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 1 or v.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D sequence of numbers, got shape {v.shape}")
    if np.isnan(v).any() or (not allow_inf and not np.isfinite(v).all()):
        raise ValueError(f"{name} must be finite numbers, got {v.tolist()}")
    if low is not None and ((v <= low).any() if strict else (v < low).any()):
        bound = f"> {low}" if strict else f">= {low}"
        raise ValueError(f"{name} must all be {bound}, got {v.tolist()}")
    return tuple(float(a) for a in v)


def _scalar(name: str, value, *, low: float, strict: bool) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None
    if not math.isfinite(v) or (v <= low if strict else v < low):
        raise ValueError(f"{name} must be a finite number {'>' if strict else '>='} {low}, got {v}")
    return v


def _sign(value) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or value not in (-1, 1):
        raise ValueError(f"fairness_sign must be one of {FAIRNESS_SIGNS} (A-Q5), got {value!r}")
    return int(value)


@dataclass(frozen=True)
class IncentiveGame:
    """003's Stackelberg incentive game (A.7.1-A.7.2): M >= 2 followers and the leader's g, λ.

    costs: C_n = C_n^com + C_n^cmp > 0 per unit of data. gaps: F_n - F_global (abs is taken).
    beta: β >= 0. fairness_sign: γ_n = fairness_sign · β · |gap_n| (A-Q5). caps: d_n > 0 (inf
    allowed), None for no caps. g: the leader's value of data (A-Q6). lam: λ > 0.
    """

    costs: tuple[float, ...]
    gaps: tuple[float, ...]
    beta: float = 1.0
    fairness_sign: int = -1
    caps: tuple[float, ...] | None = None
    g: str = "log1p"
    lam: float = 50.0

    def __post_init__(self) -> None:
        costs = _vector("costs", self.costs, low=0.0, strict=True)
        if len(costs) < 2:
            raise ValueError(f"costs: the game needs M >= 2 players, got {len(costs)}")
        gaps = _vector("gaps", self.gaps, low=None, strict=False)
        if len(gaps) != len(costs):
            raise ValueError(f"gaps must have one entry per player ({len(costs)}), got {len(gaps)}")
        caps = None
        if self.caps is not None:
            caps = _vector("caps", self.caps, low=0.0, strict=True, allow_inf=True)
            if len(caps) != len(costs):
                raise ValueError(
                    f"caps must have one entry per player ({len(costs)}), got {len(caps)}"
                )
        if self.g not in _G:
            raise ValueError(f"g must be one of {G_CHOICES} (A-Q6), got {self.g!r}")
        set_ = object.__setattr__
        set_(self, "costs", costs)
        set_(self, "gaps", gaps)
        set_(self, "caps", caps)
        set_(self, "beta", _scalar("beta", self.beta, low=0.0, strict=False))
        set_(self, "fairness_sign", _sign(self.fairness_sign))
        set_(self, "lam", _scalar("lam", self.lam, low=0.0, strict=True))

    @property
    def n_players(self) -> int:
        """M, the number of followers (A-Q8)."""
        return len(self.costs)

    @property
    def gamma(self) -> np.ndarray:
        """γ_n = fairness_sign · β · |F_n - F_global| (003:L118, A-Q5)."""
        return self.fairness_sign * self.beta * np.abs(np.asarray(self.gaps))

    @property
    def effective_costs(self) -> np.ndarray:
        """c_n = C_n exp(-γ_n): the game depends on costs and fairness only through these."""
        return np.asarray(self.costs) * np.exp(-self.gamma)

    @property
    def upper(self) -> np.ndarray:
        """d_n, with +inf where there is no cap."""
        return np.full(self.n_players, np.inf) if self.caps is None else np.asarray(self.caps)


# What a computed profile turned out to be (`Equilibrium.status`): a Nash equilibrium, or how the
# best-response dynamics failed to reach one.
STATUSES = ("equilibrium", "spurious_zero", "not_equilibrium", "cycle", "oscillating", "max_sweeps")
# Where `best_response_iteration` starts when no x0 is given; the first is the default.
STARTS = ("aggregate", "closed_form", "ones")
_RTOL = 1e-8  # the largest best-response residual (relative to X) still called an equilibrium


@dataclass(frozen=True, eq=False)
class Equilibrium:
    """A followers' profile at payment `tau`: data amounts x, their total X, the clients with
    x_n > 0 (`active`) and those held at their cap, how it was found (`method` "closed_form",
    "aggregate" or "best_response", with the Gauss-Seidel `sweeps` and their `start`), and what
    it is: `status` "equilibrium" when the best-response `residual` (`equilibrium_residual`) is
    within the check's tolerance, else one of the failures in STATUSES ("cycle" with its
    `period` in sweeps). `ok` is True only for an equilibrium."""

    tau: float
    x: np.ndarray
    active: np.ndarray
    capped: np.ndarray
    method: str
    sweeps: int = 0
    status: str = "equilibrium"
    residual: float = 0.0
    start: str = ""
    period: int = 0

    @property
    def total(self) -> float:
        """X* = Σ_n x_n*."""
        return float(self.x.sum())

    @property
    def inactive(self) -> np.ndarray:
        """Indices of the clients that do not participate (x_n = 0)."""
        return np.flatnonzero(~self.active)

    @property
    def ok(self) -> bool:
        """Whether x satisfies the equilibrium conditions (status "equilibrium")."""
        return self.status == "equilibrium"

    def describe(self) -> str:
        """The status in words, for error messages and tables."""
        r = f"best-response residual {self.residual:.2g}"
        after = f"after {self.sweeps} sweeps" if self.sweeps else ""
        return {
            "equilibrium": f"an equilibrium ({r})",
            "spurious_zero": (
                f"the spurious fixed point x = 0 {after}, not an equilibrium: with everyone "
                "else out, each client would gain up to τ e^(γ_n) by entering"
            ),
            "not_equilibrium": f"not an equilibrium ({r}) {after}",
            "cycle": f"a cycle of period {self.period} sweeps, not converging ({r}) {after}",
            "oscillating": f"oscillating without converging ({r}) {after}",
            "max_sweeps": f"not converged ({r}) {after}",
        }[self.status].strip()


class EquilibriumError(RuntimeError):
    """Best responses did not reach an equilibrium; `result` holds the Equilibrium with the
    failure's status and the last profile."""

    def __init__(self, message: str, result: Equilibrium):
        super().__init__(message)
        self.result = result


@dataclass(frozen=True, eq=False)
class LeaderOptimum:
    """The leader's optimal payment τ*, its utility U(τ*), the followers' equilibrium there, and
    how τ* was found ("closed_form" or "search")."""

    tau: float
    utility: float
    equilibrium: Equilibrium
    method: str


def _tau(tau) -> float:
    return _scalar("tau", tau, low=0.0, strict=False)


def _profile(game: IncentiveGame, x, name: str = "x") -> np.ndarray:
    v = np.asarray(_vector(name, x, low=0.0, strict=False))
    if v.size != game.n_players:
        raise ValueError(f"{name} must have one entry per player ({game.n_players}), got {v.size}")
    return v


def _br(c: float, d: float, others: float, tau: float) -> float:
    """clip(sqrt(τ X_{-n} / c_n) - X_{-n}, 0, d_n) (003:L123-125). X_{-n} comes from a running
    total that can round a hair below 0 when everyone else is out; it is taken as 0 then."""
    others = max(others, 0.0)
    return min(max(math.sqrt(tau * others / c) - others, 0.0), d)


def best_response(game: IncentiveGame, x, tau: float) -> np.ndarray:
    """Each follower's best response to the others' amounts in `x` (A.7.2, 003:L123-125):
    BR_n = clip(sqrt(τ exp(γ_n) X_{-n} / C_n) - X_{-n}, 0, d_n). It is 0 when
    τ exp(γ_n) <= X_{-n} C_n, the participation threshold. (At X_{-n} = 0 no best response exists:
    the supremum τ exp(γ_n) is approached as x_n -> 0+; the formula returns 0 there.)"""
    x, tau = _profile(game, x), _tau(tau)
    others = x.sum() - x
    inner = np.sqrt(tau * others / game.effective_costs) - others
    return np.clip(inner, 0.0, game.upper)


def equilibrium_residual(game: IncentiveGame, x, tau: float) -> float:
    """How far `x` is from the followers' Nash equilibrium: max_n |BR_n(x_{-n}) - x_n| / X, which
    is 0 exactly at an equilibrium (u_n is strictly concave in x_n, so BR_n is the unique best
    reply when X_{-n} > 0). With X_{-n} = 0 no best reply exists and the formula's 0 misses x_n,
    so a lone participant has residual 1. x = 0 has residual inf when τ > 0: each client's
    utility tends to τ e^(γ_n) > 0 as it enters with x_n -> 0+, so x = 0 is a fixed point of the
    clipped formula but no equilibrium (a positive one always exists: M >= 2, caps > 0). At τ = 0,
    x = 0 is the equilibrium (residual 0)."""
    x, tau = _profile(game, x), _tau(tau)
    total = float(x.sum())
    if total <= 0.0:
        return 0.0 if tau == 0.0 else math.inf
    return float(np.abs(best_response(game, x, tau) - x).max() / total)


def _checked(game: IncentiveGame, x: np.ndarray, tau: float, method: str, **fields) -> Equilibrium:
    """An Equilibrium for profile x, its status from the residual check (`_RTOL`)."""
    residual = equilibrium_residual(game, x, tau)
    status = "equilibrium" if residual <= _RTOL else "not_equilibrium"
    if status != "equilibrium" and x.sum() <= 0.0:
        status = "spurious_zero"
    return Equilibrium(
        tau, x, x > 0, x >= game.upper, method, status=status, residual=residual, **fields
    )


def follower_utilities(game: IncentiveGame, x, tau: float) -> np.ndarray:
    """u_n = exp(γ_n) x_n / Σ_i x_i · τ - C_n x_n (003:L117), with share 0 when Σ_i x_i = 0."""
    x, tau = _profile(game, x), _tau(tau)
    total = x.sum()
    share = x / total if total > 0 else np.zeros_like(x)
    return np.exp(game.gamma) * share * tau - np.asarray(game.costs) * x


def participation_set(game: IncentiveGame) -> np.ndarray:
    """The uncapped equilibrium's active clients, a boolean mask (A.7.2 [DERIVED], A-Q7): sort the
    effective costs c_n ascending and keep the longest prefix P whose last member has
    (|P| - 1) c_m < Σ_{j in P} c_j. The condition fails for every longer prefix once it fails,
    and always holds for the two cheapest, so |P| >= 2. It does not depend on τ."""
    c = game.effective_costs
    order = np.argsort(c, kind="stable")
    sorted_c = c[order]
    k = 2
    while k < len(c) and (k * sorted_c[k] < sorted_c[: k + 1].sum()):
        k += 1
    mask = np.zeros(len(c), dtype=bool)
    mask[order[:k]] = True
    return mask


def _slope(game: IncentiveGame) -> float:
    """κ = (|P| - 1) / S_P with S_P = Σ_{n in P} c_n, so that the uncapped X*(τ) = κ τ."""
    p = participation_set(game)
    return (p.sum() - 1) / game.effective_costs[p].sum()


def closed_form_equilibrium(game: IncentiveGame, tau: float) -> Equilibrium:
    """The uncapped equilibrium (003:L127-137 on the participation set P, A-Q7): with
    a = X* = (|P| - 1) τ / S_P, x_m* = a (1 - (|P| - 1) c_m / S_P) for m in P and 0 outside P.
    003's formula is the case P = all M players. Caps are ignored here (see `equilibrium`), so
    with a binding cap the status says "not_equilibrium"."""
    tau = _tau(tau)
    p, c = participation_set(game), game.effective_costs
    s, k = c[p].sum(), p.sum()
    x = np.where(p, (k - 1) * tau / s * (1.0 - (k - 1) * c / s), 0.0)
    return _checked(game, x, tau, "closed_form")


def _aggregate_total(c: np.ndarray, d: np.ndarray, tau: float) -> float:
    """The X > 0 with Σ_n clip(1 - c_n X/τ, 0, d_n/X) = 1 (see `aggregate_equilibrium`)."""
    if tau == 0.0:
        return 0.0

    def excess(total: float) -> float:
        return float(np.minimum(np.maximum(1.0 - c * total / tau, 0.0), d / total).sum() - 1.0)

    hi = tau / c.min()  # every share is 0 there: excess -1
    lo = hi
    for _ in range(2200):  # the shares tend to 1 as X -> 0+: excess M - 1 >= 1
        lo *= 0.5
        if excess(lo) > 0.0:
            break
    else:
        raise RuntimeError(f"aggregate_equilibrium: no bracket for X at τ = {tau}")
    return float(brentq(excess, lo, hi, xtol=1e-300, rtol=4 * np.finfo(float).eps, maxiter=500))


def aggregate_equilibrium(game: IncentiveGame, tau: float) -> Equilibrium:
    """The equilibrium with or without caps, from one equation in the total X (A-Q7). At an
    equilibrium each client's first-order/cap conditions (003:L119, L125) say
    x_n = clip(X - c_n X²/τ, 0, d_n): interior when τ e^(γ_n) X_{-n} / X² = C_n, i.e.
    X_{-n} = c_n X²/τ; at the cap when the marginal is still >= 0 there; 0 when X >= τ / c_n.
    So X solves Σ_n x_n(X) = X, i.e. Σ_n clip(1 - c_n X/τ, 0, d_n/X) = 1 (the contest
    literature's share functions). Every positive share falls strictly in X, from M at X -> 0+
    to 0 at X = τ / min c_n, so the root is unique and bracketing (scipy's brentq) finds it to
    machine precision; no dynamics, nothing to be trapped in or to cycle. Without caps it gives
    the closed form X = (|P| - 1) τ / S_P. method "aggregate"."""
    tau = _tau(tau)
    c, d = game.effective_costs, game.upper
    total = _aggregate_total(c, d, tau)
    x = np.minimum(total * np.maximum(1.0 - c * total / tau, 0.0), d) if total > 0 else 0.0 * c
    return _checked(game, x, tau, "aggregate")


def _start(game: IncentiveGame, tau: float, x0, start: str | None) -> tuple[np.ndarray, str]:
    if x0 is not None:
        if start is not None:
            raise ValueError(f"give x0 or start, not both (start={start!r})")
        return _profile(game, x0, "x0"), "x0"
    start = STARTS[0] if start is None else start
    if start == "aggregate":
        return aggregate_equilibrium(game, tau).x.copy(), start
    if start == "closed_form":
        return closed_form_equilibrium(game, tau).x.copy(), start
    if start == "ones":
        return np.ones(game.n_players), start
    raise ValueError(f"start must be one of {STARTS}, got {start!r}")


def _count(name: str, value, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    return value


def best_response_iteration(
    game: IncentiveGame,
    tau: float,
    x0=None,
    *,
    start: str | None = None,
    tol: float = 1e-13,
    rtol: float = _RTOL,
    max_sweeps: int = 100_000,
    memory: int = 64,
    patience: int = 5000,
    strict: bool = True,
) -> Equilibrium:
    """Gauss-Seidel constrained best-response dynamics (A.7.2, A-Q7): sweep n = 1..M, setting
    x_n <- BR_n(x_{-n}) with the others' newest amounts, until no amount moves by more than
    tol · X. The start, clipped to [0, d_n], is `x0` if given, else `start` (STARTS):

    - "aggregate" (default): the equilibrium itself (`aggregate_equilibrium`), where nothing
      can trap the dynamics or repel them.
    - "closed_form": the participation-set closed form clipped to the caps, the equilibrium
      when no cap binds.
    - "ones": x = 1, QF-2's start (the default before). It fails often: when τ <= (M-1-n) c_n
      for each client n = 0..M-2 in sweep order, each sees the rest at 1 or 0 and drops out, the
      last sees X_{-n} = 0, and all stop at x = 0, a fixed point of the clipped formula but not
      an equilibrium.

    The end point is checked, not assumed: `status` (STATUSES) is "equilibrium" only when its
    best-response residual (`equilibrium_residual`) is <= rtol. Otherwise: "spurious_zero"
    (stopped at x = 0 with τ > 0), "not_equilibrium" (stopped elsewhere), "cycle" (the profile
    of 2..`memory` sweeps earlier came back within tol · X while a sweep still moves more than
    √tol · X; `period` says how many sweeps back), "oscillating" (no sweep moved less, relative
    to X, than the least so far for `patience` sweeps: an orbit that neither settles nor
    repeats), "max_sweeps". With `strict` (default) a failure raises EquilibriumError carrying
    the Equilibrium as `.result`; `strict=False` returns it.

    The dynamics cycle when the equilibrium repels them: with two clients the sweep map's slope
    there is -(c_2 - c_1)²/(4 c_1 c_2), below -1 once the effective costs differ by a factor
    above 3 + 2√2 ≈ 5.83 (about -620 at a factor of 2,500). So a start that already passes the
    check is returned as it is, with sweeps 0: sweeping it would only amplify its rounding until
    the sweeps leave it."""
    tau = _tau(tau)
    tol = _scalar("tol", tol, low=0.0, strict=True)
    rtol = _scalar("rtol", rtol, low=0.0, strict=True)
    max_sweeps = _count("max_sweeps", max_sweeps, 1)
    memory = _count("memory", memory, 2)
    patience = _count("patience", patience, 1)
    if not isinstance(strict, bool):
        raise ValueError(f"strict must be True or False, got {strict!r}")
    x, start = _start(game, tau, x0, start)
    upper, c = game.upper, game.effective_costs
    x = np.minimum(x, upper)
    residual = equilibrium_residual(game, x, tau)
    if residual <= rtol:  # an equilibrium already: sweeping it would only amplify rounding
        return Equilibrium(
            tau, x, x > 0, x >= upper, "best_response", 0, residual=residual, start=start
        )
    history = np.full((memory, game.n_players), np.nan)  # the profile after sweep s at s % memory
    least, since, status, period = math.inf, 0, "max_sweeps", 0
    total = float(x.sum())
    for sweep in range(1, max_sweeps + 1):
        moved = 0.0
        for n in range(game.n_players):
            new = _br(c[n], upper[n], total - x[n], tau)
            moved = max(moved, abs(new - x[n]))
            total += new - x[n]
            x[n] = new
        total = float(x.sum())
        if moved <= tol * total or moved == 0.0:
            status = None
            break
        if total == 0.0:  # all dropped out this sweep: the next one stops at x = 0
            continue
        # a revisit counts only while the sweeps still move far more than tol: dynamics that
        # converge while alternating (slope near -1) bring x_{s-2} within tol of x_s first
        back = np.abs(history - x).max(axis=1) <= tol * total  # unwritten NaN rows: False
        if back.any() and moved > math.sqrt(tol) * total:
            status = "cycle"
            period = min((sweep - int(i)) % memory or memory for i in np.flatnonzero(back))
            break
        history[sweep % memory] = x
        if moved / total < least:
            least, since = moved / total, 0
        else:
            since += 1
            if since >= patience:
                status = "oscillating"
                break
    residual = equilibrium_residual(game, x, tau)
    if status is None:
        status = "equilibrium" if residual <= rtol else "not_equilibrium"
        if status != "equilibrium" and total <= 0.0:
            status = "spurious_zero"
    eq = Equilibrium(
        tau, x, x > 0, x >= upper, "best_response", sweep, status, residual, start, period
    )
    if strict and not eq.ok:
        raise EquilibriumError(f"best responses from {start!r} at τ = {tau:g}: {eq.describe()}", eq)
    return eq


def equilibrium(game: IncentiveGame, tau: float) -> Equilibrium:
    """The followers' equilibrium at τ: the closed form on the participation set when no cap binds
    there, else the aggregate equation's solution (`aggregate_equilibrium`, A-Q7). Gauss-Seidel
    best responses from the clipped closed form, used here before, raised after 100,000 sweeps
    or returned a wrong profile in about 2.5 % of capped games with unequal costs. Both ways are
    exact up to rounding; the status check fails only where rounding alone exceeds its
    tolerance, at effective costs some 1e9 apart (`residual` says by how much). Uncapped,
    X*(τ) = (|P| - 1) τ / S_P is linear in τ (A.7.2 [DERIVED], 003:L143)."""
    eq = closed_form_equilibrium(game, tau)
    if (eq.x > game.upper).any():
        eq = aggregate_equilibrium(game, eq.tau)
    return eq


def _utility(game: IncentiveGame, tau: float) -> float:
    g = _G[game.g]
    return float(game.lam * g(equilibrium(game, tau).total) - tau)


def leader_utility(game: IncentiveGame, tau):
    """U(τ) = λ g(X*(τ)) - τ (003:L138, A.7.2), for a scalar τ (a float) or an array of τ (an
    array). U(0) = 0. Uncapped, U(τ) = λ g(κ τ) - τ is concave (003:L148). With caps it need not
    be: once every active client sits at its cap, X* stays flat until a client excluded so far
    enters, and X*(τ) bends upwards there."""
    try:
        t = np.asarray(tau, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"tau must be a number or an array of numbers, got {tau!r}") from None
    if t.ndim == 0:
        return _utility(game, _tau(t))
    flat = [_tau(v) for v in t.ravel()]
    if np.isinf(game.upper).all():  # no caps: X*(τ) = κ τ exactly, no need to solve per τ
        u = game.lam * _G[game.g](_slope(game) * np.asarray(flat)) - np.asarray(flat)
    else:
        u = np.asarray([_utility(game, v) for v in flat])
    return u.reshape(t.shape)


def _maximise(f, lo: float, hi: float, xatol: float) -> float:
    """argmax of f on [lo, hi] by scipy's bounded Brent search (f concave there)."""
    res = minimize_scalar(
        lambda t: -f(t), bounds=(lo, hi), method="bounded", options={"xatol": xatol}
    )
    return float(res.x)


def optimal_payment(game: IncentiveGame, *, xatol: float = 1e-10, scan: int = 256) -> LeaderOptimum:
    """The leader's τ* = argmax_{τ >= 0} U(τ) (A.7.2-A.7.3), found on the uncapped utility
    Ū(τ) = λ g(κ τ) - τ, κ = (|P| - 1) / S_P, which is concave with Ū(0) = 0:

    - g = log(1+X): Ū'(τ) = λ κ / (1 + κ τ) - 1 = 0 gives τ* = max(0, λ - S_P/(|P| - 1)), i.e.
      λ - S/(M - 1) with all M players active (A.7.2 [DERIVED]); method "closed_form".
    - other g: a bounded 1-D search of Ū (scipy's bounded Brent) on [0, h], h the first of
      max(λ, 1)·2^k with Ū(h) < 0, which bounds τ* by concavity; method "search".

    Caps only lower X* (the fixed point Σ_n clip(X - c_n X²/τ, 0, d_n) = X moves left), so
    U <= Ū, and Ū's maximiser is U's too when no cap binds there. Otherwise U need not be concave
    (see `leader_utility`): it is scanned at `scan` + 1 points on [0, h] and the best point refined
    by the bounded search between its neighbours; method "search". `xatol` is relative to h.
    τ* = 0 when no positive τ beats U(0) = 0."""
    xatol = _scalar("xatol", xatol, low=0.0, strict=True)
    if not (isinstance(scan, int) and scan >= 2):
        raise ValueError(f"scan must be an int >= 2, got {scan!r}")
    g, kappa = _G[game.g], _slope(game)

    def free(t: float) -> float:
        return float(game.lam * g(kappa * t) - t)

    h = max(game.lam, 1.0)
    for _ in range(200):
        if free(h) < 0.0:
            break
        h *= 2.0
    else:
        raise RuntimeError("optimal_payment: Ū(τ) is still >= 0 at τ = 2^200 max(λ, 1)")
    if game.g == "log1p":
        tau, method = max(0.0, game.lam - 1.0 / kappa), "closed_form"
    else:
        tau, method = _maximise(free, 0.0, h, xatol * h), "search"
    tau = tau if free(tau) > 0.0 else 0.0
    eq = equilibrium(game, tau)
    if eq.method != "closed_form":
        grid = np.linspace(0.0, h, scan + 1)
        values = leader_utility(game, grid)
        i = int(np.argmax(values))
        lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, scan)]
        tau, method = _maximise(lambda t: _utility(game, t), lo, hi, xatol * h), "search"
        if _utility(game, tau) < values[i]:
            tau = float(grid[i])
        eq = equilibrium(game, tau)
    return LeaderOptimum(tau, _utility(game, tau), eq, method)


def fairfed_weights(
    n_samples, gaps, beta: float, *, fairness_sign: int = -1, normalise: bool = False
) -> np.ndarray:
    """FairFed-style aggregation weights as 003:L114 writes them (A.7.1, A-Q5):
    w_k = exp(sign · β |F_k - F_global|) n_k / Σ_k n_k, sign = -1 by default (FairFed lowers the
    weight of clients whose local fairness gap is far from the global one). `normalise` divides
    by Σ_k w_k so the weights sum to 1, as an aggregation needs; 003's formula does not."""
    n = np.asarray(_vector("n_samples", n_samples, low=0.0, strict=False))
    if n.sum() <= 0:
        raise ValueError(f"n_samples must not all be 0, got {n.tolist()}")
    g = np.asarray(_vector("gaps", gaps, low=None, strict=False))
    if g.size != n.size:
        raise ValueError(f"gaps must have one entry per client ({n.size}), got {g.size}")
    beta = _scalar("beta", beta, low=0.0, strict=False)
    w = np.exp(_sign(fairness_sign) * beta * np.abs(g)) * n / n.sum()
    if not isinstance(normalise, bool):
        raise ValueError(f"normalise must be True or False, got {normalise!r}")
    return w / w.sum() if normalise else w
