"""The q-FFL preprint's incentive game and convergence bound as outputs (specs/qffl-dqnfed.md
A.7, A.9): QF-1 (followers' equilibrium vs the payment τ), QF-3 (the leader's utility U(τ) and
τ*), QF-4 (the fairness coefficient β against data shares and rewards), QF-5 (Theorem 1's bound vs
T) as figures of kind `incentive`, and the equilibrium at τ* as a table of kind
`incentive_table`. The paper gives no numbers: every output says so.

Nothing here trains. A grid entry's `show` says which artifact and its `game` (or `bound`) block
holds the parameters, validated at DAG build (`game_settings`). The `incentive` rule
(workflow/scripts/incentive.py -> `fedbench.jobs.incentive`) calls `write_game`, which computes
the numbers with `fedbench.incentive_game` into results/{scale}/incentive/{paper}/{name}.json;
the figure and table (drawn below) read that file.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fedbench import incentive_game as game_lib
from fedbench.cells import Grid, RunKey, spec_header
from fedbench.config import ConfigError
from fedbench.io import write_text
from fedbench.outputs.base import OutputKind
from fedbench.report.html_table import html_table
from fedbench.report.sidecar import sidecar_json
from fedbench.report.tables import tex_escape

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


# ---------------------------------------------------------------------------------------------
# Drawing (was fedbench/report/incentive.py).
# Draw the q-FFL preprint's incentive game and Theorem 1's bound from the numbers the `incentive`
# rule wrote (results/{scale}/incentive/{paper}/{name}.json; `fedbench.outputs.incentive`): QF-1,
# QF-3, QF-4 and QF-5 as figures, the equilibrium at τ* as a table. Reads files only.


ILLUSTRATIVE = "illustrative: the paper gives no numbers"
SIGN_WORDS = {-1: "γ_n = -β|F_n - F_global| (A-Q5's default)", 1: "γ_n = +β|F_n - F_global|"}


@dataclass(frozen=True)
class IncentiveSpec:
    """One game output: what it shows and the file of its numbers."""

    paper: str
    name: str
    caption: str
    scale: str
    show: str
    data: Path


def load_game(path: str | Path) -> dict[str, Any]:
    """The numbers one output draws; ValueError naming the file if it is not one."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(
            f"{path}: cannot read the game's numbers ({err}); delete it and rerun the rule "
            "`incentive`"
        ) from None
    if not isinstance(data, dict) or "settings" not in data:
        raise ValueError(f"{path}: not a game file (no 'settings'); rerun the rule `incentive`")
    return data


def _title(spec: IncentiveSpec) -> str:
    text = spec.caption or spec.name
    if ILLUSTRATIVE not in text:
        text += f" ({ILLUSTRATIVE})"
    return text


def game_note(s: dict[str, Any]) -> str:
    """The game's parameters in one line."""
    caps = "none" if s.get("caps") is None else ", ".join(f"{c:g}" for c in s["caps"])
    return (
        f"M = {len(s['costs'])} players; costs C_n = {', '.join(f'{c:g}' for c in s['costs'])}; "
        f"|F_n - F_global| = {', '.join(f'{abs(g):g}' for g in s['gaps'])}; caps: {caps}; "
        f"{SIGN_WORDS[s['fairness_sign']]}; leader U(τ) = λ g(X*) - τ with g = {s['g']}, "
        f"λ = {s['lam']:g}"
    )


def bound_note(s: dict[str, Any]) -> str:
    return (
        f"N = {s['clients']}, L = {s['L']:g}, G = {s['G']:g}, σ = {s['sigma']:g}, loss bound "
        f"M = {s['loss_bound']:g}, g(x̄⁰) - f* = {s['gap']:g}; s = √N/(L√T), "
        "K = max(1, ⌊T^(1/4)/N^(3/4)⌋) (Corollary 1)"
    )


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _finish(fig, spec: IncentiveSpec, note: str, out_prefix: str | Path) -> list[Path]:
    from fedbench.report.figures import save_figure

    title = _title(spec) + ("" if spec.scale == "paper" else f" [{spec.scale} scale]")
    fig.suptitle(title + "\n" + note, fontsize=8, wrap=True)
    paths = save_figure(fig, out_prefix)
    _plt().close(fig)
    return paths


def _follower_ne(plt, data: dict[str, Any]):
    s, tau, panels = data["settings"], data["tau"], data["panels"]
    fig, axes = plt.subplots(
        1, len(panels), figsize=(4.2 * len(panels), 3.9), squeeze=False, layout="constrained"
    )
    for ax, p in zip(axes[0], panels, strict=True):
        for n in range(len(s["costs"])):
            ax.plot(tau, [x[n] for x in p["x"]], lw=1.2, label=f"client {n}")
        ax.plot(tau, p["total"], "k--", lw=1.4, label="X* = Σ x_n*")
        ax.axvline(p["tau_star"], color="grey", ls=":", lw=1, label="leader's τ*")
        out = [str(n) for n, a in enumerate(p["active"]) if not a]
        title = f"β = {p['beta']:g}; X* = {p['slope']:.3g} τ"
        ax.set_title(title + (f"; out: {', '.join(out)}" if out else ""), fontsize=9)
        ax.set_xlabel("total payment τ")
        ax.set_ylabel("data amount at equilibrium")
    axes[0][0].legend(fontsize=6, ncols=2)
    return fig, game_note(s)


def _leader_utility(plt, data: dict[str, Any]):
    s, tau = data["settings"], data["tau"]
    fig, ax = plt.subplots(figsize=(6.0, 4.2), layout="constrained")
    for i, p in enumerate(data["panels"]):
        color = f"C{i}"
        ax.plot(tau, p["utility"], color=color, label=f"β = {p['beta']:g}")
        ax.plot([p["tau_star"]], [p["utility_star"]], "o", color=color, ms=6)
        ax.annotate(
            f"τ* = {p['tau_star']:.3g}",
            (p["tau_star"], p["utility_star"]),
            textcoords="offset points",
            xytext=(4, 4),
            fontsize=7,
            color=color,
        )
    ax.axhline(0.0, color="grey", lw=0.8)
    ax.set_xlabel("total payment τ")
    ax.set_ylabel("leader's utility U(τ) = λ g(X*(τ)) - τ")
    ax.legend(fontsize=7, title="dots: τ*, U(τ*)", title_fontsize=7)
    return fig, game_note(s)


def _fairness(plt, data: dict[str, Any]):
    s, rows = data["settings"], data["rows"]
    beta = [r["beta"] for r in rows]
    fig, axes = plt.subplots(1, 3, figsize=(13.0, 4.0), layout="constrained")
    for n in range(len(s["costs"])):
        label = f"client {n} (|gap| {abs(s['gaps'][n]):g})"
        axes[0].plot(beta, [r["share"][n] for r in rows], lw=1.2, label=label)
        axes[1].plot(beta, [r["reward"][n] for r in rows], lw=1.2, label=label)
    axes[0].set_ylabel("data share x_n*/X* at τ*")
    axes[1].set_ylabel("reward exp(γ_n) x_n*/X* · τ*")
    axes[2].plot(beta, [r["jain_share"] for r in rows], label="Jain index of data shares")
    axes[2].plot(beta, [r["jain_reward"] for r in rows], "--", label="Jain index of rewards")
    axes[2].plot(
        beta, [r["active"] / len(s["costs"]) for r in rows], ":", label="share of clients active"
    )
    axes[2].set_ylim(0, 1.05)
    axes[2].set_ylabel("index (1 = all equal)")
    for ax in axes:
        ax.set_xlabel("fairness coefficient β")
    axes[0].legend(fontsize=6)
    axes[2].legend(fontsize=7)
    return fig, game_note(s)


def _bound(plt, data: dict[str, Any]):
    s, T = data["settings"], data["T"]
    fig, ax = plt.subplots(figsize=(6.2, 4.4), layout="constrained")
    for i, c in enumerate(data["curves"]):
        ax.loglog(T, c["theorem"], color=f"C{i}", label=f"q = {c['q']:g}: Theorem 1 (M^(4q))")
        if c["q"] > 0:
            ax.loglog(
                T, c["corollary"], "--", color=f"C{i}", label="  as Corollary 1 prints (M^(2q))"
            )
    ax.set_xlabel("iterations T")
    ax.set_ylabel("bound on (1/T) Σ E‖∇g(x̄^(t-1))‖²")
    ax.legend(fontsize=6)
    return fig, bound_note(s)


DRAW = {
    "follower_ne": _follower_ne,
    "leader_utility": _leader_utility,
    "fairness": _fairness,
    "bound": _bound,
}


def write_incentive_figure(spec: IncentiveSpec, out_prefix: str | Path) -> list[Path]:
    """The figure of one game output as .png and .pdf (each written atomically)."""
    data = load_game(spec.data)
    if spec.show not in DRAW:
        raise ValueError(f"{spec.paper}/{spec.name}: show {spec.show!r} is not a figure")
    fig, note = DRAW[spec.show](_plt(), data)
    return _finish(fig, spec, note, out_prefix)


TABLE_HEAD = (
    "β", "client", "C_n", "gap (abs)", "γ_n", "c_n = C_n e^(-γ_n)", "x_n*", "x_n* (best responses)",
    "share", "reward", "u_n", "status",
)  # fmt: skip


def table_rows(data: dict[str, Any]) -> list[list[str]]:
    """The equilibrium table's display rows: per β, each client, then a total row."""
    rows = []
    for p in data["panels"]:
        for c in p["clients"]:
            status = "capped" if c["capped"] else ("active" if c["active"] else "out")
            values = (c["cost"], c["gap"], c["gamma"] + 0.0, c["effective_cost"], c["x"], c["x_br"])
            rows.append(
                [f"{p['beta']:g}", str(c["client"]), *(f"{v:.4g}" for v in values)]
                + [f"{c['share']:.4f}", f"{c['reward']:.4g}", f"{c['utility']:.4g}", status]
            )
        rows.append(
            [
                f"{p['beta']:g}", "all", "", "", "", "", f"{p['total']:.4g}", "",
                "1", f"{sum(c['reward'] for c in p['clients']):.4g}", "",
                f"τ* = {p['tau_star']:.4g}, U(τ*) = {p['utility_star']:.4g}",
            ]
        )  # fmt: skip
    return rows


def _br_check(p: dict[str, Any]) -> str:
    """QF-2's check for one β: where best responses from x = 1 went (files written before the
    status was recorded have no `br_status`: they could only have converged or raised)."""
    diff = f"max |difference| {p['max_abs_diff']:.2g}"
    if p.get("br_status", "equilibrium") == "equilibrium":
        return f"best responses from x = 1 converged in {p['br_sweeps']} sweeps, {diff}"
    return f"best responses from x = 1 did NOT reach it: {p['br_result']}; {diff}"


def table_notes(spec: IncentiveSpec, data: dict[str, Any]) -> list[tuple[str, str]]:
    checks = "; ".join(f"β = {p['beta']:g}: {p['method']}, {_br_check(p)}" for p in data["panels"])
    return [
        ("Table", f"{spec.name}: {_title(spec)}"),
        ("Game", game_note(data["settings"])),
        (
            "Columns",
            "x_n* = the followers' equilibrium at the leader's optimal payment τ*; "
            "x_n* (best responses) = where Gauss-Seidel best responses from x = 1 stop (QF-2; "
            "Checks says whether that is the equilibrium); share = "
            "x_n*/X*; reward = exp(γ_n) x_n*/X* τ* (the rewards sum to τ* only at β = 0); "
            "u_n = reward - C_n x_n*; status: out = not in the participation set",
        ),
        ("Checks", checks),
        ("Paper values", f"none: {ILLUSTRATIVE} (specs/qffl-dqnfed.md A.8, A.9)"),
        ("Scale", f"{spec.scale} (the game is computed, not trained: the same at every scale)"),
    ]


def to_markdown(spec: IncentiveSpec, data: dict[str, Any]) -> str:
    notes = [(k, t) for k, t in table_notes(spec, data) if k != "Table"]
    lines = [f"# {spec.paper} {spec.name}: {_title(spec)}", ""]
    lines += [f"- {k}: {t}" for k, t in notes] + [""]
    lines.append("| " + " | ".join(TABLE_HEAD) + " |")
    lines.append("|" + "---|" * len(TABLE_HEAD))
    lines += ["| " + " | ".join(r) + " |" for r in table_rows(data)]
    return "\n".join(lines) + "\n"


def to_latex(spec: IncentiveSpec, data: dict[str, Any]) -> str:
    lines = [f"% {k}: {t}" for k, t in table_notes(spec, data)]
    lines += [
        r"\begin{table}",
        rf"\caption{{{tex_escape(_title(spec))}}}",
        r"\begin{tabular}{ll" + "r" * (len(TABLE_HEAD) - 3) + "l}",
        r"\toprule",
        " & ".join(tex_escape(h) for h in TABLE_HEAD) + r" \\",
        r"\midrule",
    ]
    lines += [" & ".join(tex_escape(c) for c in r) + r" \\" for r in table_rows(data)]
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines) + "\n"


def to_csv(spec: IncentiveSpec, data: dict[str, Any]) -> str:
    """One tidy row per (β, client) with full precision (the notes go to the .json sidecar)."""
    import csv
    import io

    buf = io.StringIO()
    fields = ["beta", "tau_star", "utility_star", "total"]
    client_fields = list(data["panels"][0]["clients"][0]) if data["panels"] else []
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([*fields, *client_fields])
    for p in data["panels"]:
        for c in p["clients"]:
            writer.writerow([*(p[f] for f in fields), *(c[f] for f in client_fields)])
    return buf.getvalue()


def to_json(spec: IncentiveSpec, data: dict[str, Any]) -> str:
    return sidecar_json(spec.name, table_notes(spec, data))


def to_html(spec: IncentiveSpec, data: dict[str, Any]) -> str:
    notes = [(k, t) for k, t in table_notes(spec, data) if k != "Table"]
    return html_table(
        f"{spec.paper} {spec.name}: {_title(spec)}", notes, None, list(TABLE_HEAD), table_rows(data)
    )


def write_incentive_table(spec: IncentiveSpec, out_prefix: str | Path) -> list[Path]:
    """out_prefix.md, .tex, .csv, .json and .html of the equilibrium table, each written
    atomically."""
    data = load_game(spec.data)
    if spec.show != "equilibrium":
        raise ValueError(f"{spec.paper}/{spec.name}: show {spec.show!r} is not a table")
    out_prefix = Path(out_prefix)
    paths = []
    renders = (
        ("md", to_markdown),
        ("tex", to_latex),
        ("csv", to_csv),
        ("html", to_html),
        ("json", to_json),
    )
    for ext, render in renders:
        path = out_prefix.with_name(f"{out_prefix.name}.{ext}")
        write_text(path, render(spec, data))
        paths.append(path)
    return paths
