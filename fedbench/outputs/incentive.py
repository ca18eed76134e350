"""The q-FFL preprint's incentive game and convergence bound as outputs (specs/qffl-dqnfed.md
A.7, A.9): QF-1 (followers' equilibrium vs the payment τ), QF-3 (the leader's utility U(τ) and
τ*), QF-4 (the fairness coefficient β against data shares and rewards), QF-5 (Theorem 1's bound vs
T) as figures of kind `incentive`, and the equilibrium at τ* as a table of kind
`incentive_table`. The paper gives no numbers: every output says so.

Nothing here trains. A grid entry's `show` says which artifact and its `game` (or `bound`) block
holds the parameters, validated at DAG build (`game_settings`). The `incentive` rule
(workflow/scripts/incentive.py -> `fedbench.jobs.incentive`) calls `write_game`, which computes
the numbers with `fedbench.metrics.incentive` into results/{scale}/incentive/{paper}/{name}.json;
the figure and table read that file (`fedbench.report.incentive`).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from fedbench.cells import Grid, RunKey, spec_header
from fedbench.config import ConfigError
from fedbench.io import write_text
from fedbench.metrics import incentive as game_lib
from fedbench.outputs.base import OutputKind
from fedbench.report.incentive import (
    ILLUSTRATIVE,
    IncentiveSpec,
    write_incentive_figure,
    write_incentive_table,
)

SHOWS = {
    "figures": ("follower_ne", "leader_utility", "fairness", "bound"),
    "tables": ("equilibrium",),
}
GAME_KEYS = (
    "costs", "gaps", "caps", "fairness_sign", "g", "lam", "betas", "beta_range", "tau_max",
    "points",
)  # fmt: skip
BOUND_KEYS = ("clients", "L", "G", "sigma", "loss_bound", "gap", "qs", "T_range", "points")
BOUND_DEFAULTS = {
    "clients": 10, "L": 1.0, "G": 1.0, "sigma": 1.0, "loss_bound": 2.0, "gap": 1.0,
    "qs": [0, 0.5, 1, 2], "T_range": [10, 1e6], "points": 61,
}  # fmt: skip


def game_file(scale: str, paper: str, name: str, root: str = "results") -> str:
    """results/{scale}/incentive/{paper}/{name}.json: the numbers one output draws."""
    return f"{root}/{scale}/incentive/{paper}/{name}.json"


def _number(where: str, v: Any, low: float | None = None, strict: bool = False) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ConfigError(f"{where}: expected a finite number, got {v!r}")
    if low is not None and (v <= low if strict else v < low):
        raise ConfigError(f"{where}: must be {'>' if strict else '>='} {low}, got {v!r}")
    return float(v)


def _numbers(where: str, v: Any, low: float | None = None, strict: bool = False) -> list[float]:
    if not isinstance(v, list) or not v:
        raise ConfigError(f"{where}: expected a non-empty list of numbers, got {v!r}")
    return [_number(f"{where}[{i}]", x, low, strict) for i, x in enumerate(v)]


def _points(where: str, v: Any, default: int) -> int:
    v = default if v is None else v
    if isinstance(v, bool) or not isinstance(v, int) or not 3 <= v <= 2001:
        raise ConfigError(f"{where}: expected an integer in 3..2001, got {v!r}")
    return v


def _span(where: str, v: Any, low: float, strict: bool) -> list[float]:
    span = _numbers(where, v, low, strict)
    if len(span) != 2 or not span[0] < span[1]:
        raise ConfigError(f"{where}: expected [low, high] with low < high, got {v!r}")
    return span


def game_settings(where: str, show: str, out: dict[str, Any]) -> dict[str, Any]:
    """The validated, JSON-ready settings of one output (what the `incentive` rule computes
    from); ConfigError names the key and what it takes."""
    if show == "bound":
        raw = out.get("bound") or {}
        if not isinstance(raw, dict):
            raise ConfigError(f"{where}.bound: expected a mapping, got {raw!r}")
        if "game" in out:
            raise ConfigError(f"{where}.game: show 'bound' takes a `bound` block, not `game`")
        bad = sorted(set(raw) - set(BOUND_KEYS))
        if bad:
            raise ConfigError(f"{where}.bound: unknown key(s) {bad}; valid: {list(BOUND_KEYS)}")
        b = {**BOUND_DEFAULTS, **raw}
        clients = b["clients"]
        if isinstance(clients, bool) or not isinstance(clients, int) or clients < 1:
            raise ConfigError(f"{where}.bound.clients: expected an integer >= 1, got {clients!r}")
        s = {"show": show, "clients": clients}
        for key in ("L", "G", "sigma", "loss_bound", "gap"):
            s[key] = _number(f"{where}.bound.{key}", b[key], 0.0, strict=key != "gap")
        s["qs"] = _numbers(f"{where}.bound.qs", b["qs"], 0.0)
        s["T_range"] = _span(f"{where}.bound.T_range", b["T_range"], 0.0, True)
        if s["T_range"][0] < clients:
            raise ConfigError(
                f"{where}.bound.T_range: Corollary 1 needs T >= N = {clients} (s <= 1/L), got "
                f"{b['T_range']!r}"
            )
        s["points"] = _points(f"{where}.bound.points", b["points"], 61)
        return s
    if "bound" in out:
        raise ConfigError(f"{where}.bound: only show 'bound' takes it; show {show!r} uses `game`")
    raw = out.get("game")
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}.game: missing or not a mapping (keys: {list(GAME_KEYS)})")
    bad = sorted(set(raw) - set(GAME_KEYS))
    if bad:
        raise ConfigError(f"{where}.game: unknown key(s) {bad}; valid: {list(GAME_KEYS)}")
    for key in ("costs", "gaps"):
        if key not in raw:
            raise ConfigError(f"{where}.game: missing key {key!r} (one number per player)")
    s = {
        "show": show,
        "costs": _numbers(f"{where}.game.costs", raw["costs"], 0.0, strict=True),
        "gaps": _numbers(f"{where}.game.gaps", raw["gaps"]),
        "caps": None,
        "fairness_sign": raw.get("fairness_sign", -1),
        "g": raw.get("g", "log1p"),
        "lam": _number(f"{where}.game.lam", raw.get("lam", 50.0), 0.0, strict=True),
    }
    if raw.get("caps") is not None:
        s["caps"] = _numbers(f"{where}.game.caps", raw["caps"], 0.0, strict=True)
    if show == "fairness":
        if "betas" in raw:
            raise ConfigError(f"{where}.game.betas: show 'fairness' sweeps `beta_range` instead")
        s["beta_range"] = _span(
            f"{where}.game.beta_range", raw.get("beta_range", [0, 10]), 0, False
        )
    else:
        if "beta_range" in raw:
            raise ConfigError(f"{where}.game.beta_range: only show 'fairness' takes it")
        s["betas"] = _numbers(f"{where}.game.betas", raw.get("betas", [0, 1, 5]), 0.0)
    tau_max = raw.get("tau_max", 1.5 * s["lam"])
    s["tau_max"] = _number(f"{where}.game.tau_max", tau_max, 0.0, strict=True)
    s["points"] = _points(
        f"{where}.game.points", raw.get("points"), 101 if show != "equilibrium" else 3
    )
    try:  # the game's own checks (player counts, signs, g), once per β
        for beta in s.get("betas", s.get("beta_range", [0.0])):
            _game(s, beta)
    except ValueError as err:
        raise ConfigError(f"{where}.game: {err}") from None
    return s


def _game(s: dict[str, Any], beta: float) -> game_lib.IncentiveGame:
    return game_lib.IncentiveGame(
        costs=s["costs"], gaps=s["gaps"], beta=beta, fairness_sign=s["fairness_sign"],
        caps=s["caps"], g=s["g"], lam=s["lam"],
    )  # fmt: skip


def jain(values: np.ndarray) -> float:
    """Jain's index (Σ v)² / (n Σ v²): 1 when all equal, 1/n when one holds everything."""
    v = np.asarray(values, dtype=np.float64)
    return float(v.sum() ** 2 / (len(v) * (v**2).sum())) if (v**2).sum() > 0 else math.nan


def rewards(game: game_lib.IncentiveGame, x: np.ndarray, tau: float) -> np.ndarray:
    """What the leader pays each follower, exp(γ_n) x_n / Σ_i x_i · τ (003:L117's first term)."""
    total = x.sum()
    share = x / total if total > 0 else np.zeros_like(x)
    return np.exp(game.gamma) * share * tau


def thm1_bound(T, s, K, G, L, M, q, sigma, N, gap, drift_power: int = 4):
    """Theorem 1's right-hand side (003:L79-81, A.6): 2 gap/(s T) + 4 s² K² G² L² M^(4q)
    + L s σ² M^(2q) / N. `drift_power` 2 gives the drift term as Corollary 1 prints it (M^(2q),
    A-Q4)."""
    return (
        2 * gap / (s * T)
        + 4 * s**2 * K**2 * G**2 * L**2 * M ** (drift_power * q)
        + L * s * sigma**2 * M ** (2 * q) / N
    )


def _bound(s: dict[str, Any]) -> dict[str, Any]:
    """QF-5: with s = √N/(L√T) and K = max(1, ⌊T^(1/4)/N^(3/4)⌋) (Corollary 1), per q."""
    n, L = s["clients"], s["L"]
    T = np.logspace(math.log10(s["T_range"][0]), math.log10(s["T_range"][1]), s["points"])
    step = np.sqrt(n) / (L * np.sqrt(T))
    K = np.maximum(1.0, np.floor(T**0.25 / n**0.75))
    curves = []
    for q in s["qs"]:
        args = dict(s=step, K=K, G=s["G"], L=L, M=s["loss_bound"], q=q, sigma=s["sigma"], N=n)
        curves.append(
            {
                "q": q,
                "theorem": thm1_bound(T, gap=s["gap"], **args).tolist(),
                "corollary": thm1_bound(T, gap=s["gap"], drift_power=2, **args).tolist(),
            }
        )
    return {"T": T.tolist(), "step": step.tolist(), "K": K.tolist(), "curves": curves}


def _taus(s: dict[str, Any]) -> np.ndarray:
    return np.linspace(0.0, s["tau_max"], s["points"])


def _follower_ne(s: dict[str, Any]) -> dict[str, Any]:
    """QF-1: x_m*(τ) and X*(τ) per β, with κ = (|P| - 1)/S_P (X* = κ τ when no cap binds)."""
    taus, panels = _taus(s), []
    for beta in s["betas"]:
        game = _game(s, beta)
        eqs = [game_lib.equilibrium(game, t) for t in taus]
        p = game_lib.participation_set(game)
        panels.append(
            {
                "beta": beta,
                "x": [e.x.tolist() for e in eqs],
                "total": [e.total for e in eqs],
                "slope": float((p.sum() - 1) / game.effective_costs[p].sum()),
                "active": p.tolist(),
                "tau_star": game_lib.optimal_payment(game).tau,
            }
        )
    return {"tau": taus.tolist(), "panels": panels}


def _leader_utility(s: dict[str, Any]) -> dict[str, Any]:
    """QF-3: U(τ) = λ g(X*(τ)) - τ per β, and the leader's τ*, U(τ*)."""
    taus, panels = _taus(s), []
    for beta in s["betas"]:
        game = _game(s, beta)
        opt = game_lib.optimal_payment(game)
        u = np.asarray(game_lib.leader_utility(game, taus))
        panels.append(
            {
                "beta": beta,
                "utility": u.tolist(),
                "tau_star": opt.tau,
                "utility_star": opt.utility,
                "total_star": opt.equilibrium.total,
                "method": opt.method,
                "max_second_difference": float(np.diff(u, 2).max()),
            }
        )
    return {"tau": taus.tolist(), "panels": panels}


def _fairness(s: dict[str, Any]) -> dict[str, Any]:
    """QF-4: over β, the data shares x_n*/X*, rewards and their Jain indices at the leader's τ*."""
    betas = np.linspace(*s["beta_range"], s["points"])
    rows = []
    for beta in betas:
        game = _game(s, float(beta))
        opt = game_lib.optimal_payment(game)
        x = opt.equilibrium.x
        r = rewards(game, x, opt.tau)
        share = x / x.sum() if x.sum() > 0 else np.zeros_like(x)
        rows.append(
            {
                "beta": float(beta),
                "tau_star": opt.tau,
                "share": share.tolist(),
                "reward": r.tolist(),
                "jain_share": jain(share),
                "jain_reward": jain(r),
                "active": int((x > 0).sum()),
            }
        )
    return {"rows": rows}


def _equilibrium(s: dict[str, Any]) -> dict[str, Any]:
    """The equilibrium at the leader's τ* per β, each client's numbers, and the check that
    Gauss-Seidel best responses from x = 1 reach the same point (QF-2): where they stopped, and
    whether that is an equilibrium, a cycle or the spurious x = 0 (`best_response_iteration`'s
    status, reported here rather than raised)."""
    panels = []
    for beta in s["betas"]:
        game = _game(s, beta)
        opt = game_lib.optimal_payment(game)
        eq = opt.equilibrium
        br = game_lib.best_response_iteration(game, opt.tau, start="ones", strict=False)
        x = eq.x
        panels.append(
            {
                "beta": beta,
                "tau_star": opt.tau,
                "utility_star": opt.utility,
                "total": eq.total,
                "method": f"{eq.method}; τ* by {opt.method}",
                "br_sweeps": br.sweeps,
                "br_status": br.status,
                "br_result": br.describe(),
                "max_abs_diff": float(np.abs(br.x - x).max()),
                "clients": [
                    {
                        "client": n,
                        "cost": game.costs[n],
                        "gap": abs(game.gaps[n]),
                        "gamma": float(game.gamma[n]) + 0.0,  # no -0.0 at β = 0
                        "effective_cost": float(game.effective_costs[n]),
                        "x": float(x[n]),
                        "x_br": float(br.x[n]),
                        "share": float(x[n] / x.sum()) if x.sum() > 0 else 0.0,
                        "reward": float(rewards(game, x, opt.tau)[n]),
                        "utility": float(game_lib.follower_utilities(game, x, opt.tau)[n]),
                        "active": bool(eq.active[n]),
                        "capped": bool(eq.capped[n]),
                    }
                    for n in range(game.n_players)
                ],
            }
        )
    return {"panels": panels}


COMPUTE = {
    "follower_ne": _follower_ne,
    "leader_utility": _leader_utility,
    "fairness": _fairness,
    "bound": _bound,
    "equilibrium": _equilibrium,
}


def compute_game(settings: dict[str, Any]) -> dict[str, Any]:
    """The numbers of one output from its validated settings (`game_settings`)."""
    return {"settings": settings, **COMPUTE[settings["show"]](settings)}


def write_game(settings: dict[str, Any], out: str | Path) -> None:
    """Compute one output's numbers and write them as JSON (temp file, then rename)."""
    write_text(out, json.dumps(compute_game(settings), indent=1) + "\n")


class IncentiveKind(OutputKind):
    """A figure of the game or of Theorem 1's bound (QF-1, QF-3, QF-4, QF-5)."""

    name = "incentive"
    section = "figures"
    keys = ("caption", "kind", "show", "game", "bound")
    about = "an incentive-game figure (kind 'incentive')"

    def check(self, where: str, out: dict[str, Any], catalog: dict) -> None:
        show = out.get("show")
        if show not in SHOWS[self.section]:
            raise ConfigError(f"{where}.show: {show!r} is not one of {list(SHOWS[self.section])}")
        game_settings(where, show, out)

    def runs(
        self, grid: Grid, name: str, catalog: dict, scale: str, choices: str = "read"
    ) -> dict[tuple[str, str], list[RunKey]]:
        return {}  # the game is computed, not trained

    def inputs(self, grid: Grid, name: str, catalog: dict, scale: str) -> list[str]:
        return [game_file(scale, grid.name, name)]

    def spec(self, grid: Grid, name: str, catalog: dict, scale: str) -> IncentiveSpec:
        out = grid.output(self.section, name)
        return IncentiveSpec(
            **spec_header(grid, self.section, name, scale),
            show=out["show"],
            data=Path(game_file(scale, grid.name, name)),
        )

    def render(self, spec: IncentiveSpec, out_prefix: Path) -> list[Path]:
        return write_incentive_figure(spec, out_prefix)


class IncentiveTableKind(IncentiveKind):
    """The followers' equilibrium at the leader's τ*, one row per client and β."""

    name = "incentive_table"
    section = "tables"
    about = "an incentive-game table (kind 'incentive_table')"

    def render(self, spec: IncentiveSpec, out_prefix: Path) -> list[Path]:
        return write_incentive_table(spec, out_prefix)


def settings_of(grid: Grid, name: str) -> dict[str, Any]:
    """The `incentive` rule's settings for one output of a grid (validated again)."""
    for section in SHOWS:
        out = grid.outputs(section).get(name)
        if out is not None and out.get("kind") in ("incentive", "incentive_table"):
            return game_settings(f"{grid.path.name}.{section}.{name}", out["show"], out)
    raise ConfigError(f"{grid.name}: {name!r} is not an output of kind incentive/incentive_table")


__all__ = [
    "ILLUSTRATIVE",
    "IncentiveKind",
    "IncentiveTableKind",
    "compute_game",
    "game_file",
    "game_settings",
    "jain",
    "settings_of",
    "thm1_bound",
    "write_game",
]
