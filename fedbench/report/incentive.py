"""Draw the q-FFL preprint's incentive game and Theorem 1's bound from the numbers the `incentive`
rule wrote (results/{scale}/incentive/{paper}/{name}.json; `fedbench.outputs.incentive`): QF-1,
QF-3, QF-4 and QF-5 as figures, the equilibrium at τ* as a table. Reads files only."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fedbench.io import write_text
from fedbench.report.html_table import html_table
from fedbench.report.sidecar import sidecar_json
from fedbench.report.tables import tex_escape

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
