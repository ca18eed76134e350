"""Paper figures: one panel per column, one line per row.

kind "rounds": learning curves, mean over seeds with a ±std band; kind "lambda": the final round's
quantity over the mixing weight λ with across-client error bars (see lambda_curves).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from fedbench.io import atomic_path
from fedbench.report.collect import RunData, run_series
from fedbench.report.curve_spec import FigureSpec
from fedbench.report.lambda_curves import make_lambda_figure
from fedbench.report.layout import (
    Quantity,
    any_standin,
    axis_label,
    axis_note,
    cell_quantities,
    load_cells,
    marker_every,
    precision_note,
    protocol_notes,
    row_styles,
    shared_legend,
    value_scale,
    variation,
    warning_lines,
)

PANEL_SIZE = (4.2, 3.2)
CHARS_PER_INCH = 10  # suptitle wrap width at fontsize 'medium'


def _quantity(spec: FigureSpec, quantity: Quantity | None) -> Quantity:
    """The given quantity, or the figure-wide one."""
    return quantity or Quantity(spec.metric, spec.protocol, spec.stat)


def seed_curves(
    runs: list[RunData], spec: FigureSpec, quantity: Quantity | None = None
) -> pd.DataFrame:
    """Rounds × seeds frame of the quantity, finished runs only, rounds every seed evaluated."""
    q = _quantity(spec, quantity)
    scale = value_scale(q.metric, spec.percent)
    series = {
        r.key["seed"]: run_series(r, q.protocol, q.metric, q.stat) * scale
        for r in runs
        if r.status == "ok"
    }
    if not series:
        return pd.DataFrame()
    curves = pd.concat(series, axis=1).sort_index().dropna()
    if spec.smooth is not None:
        curves = curves.apply(spec.smooth.series)
    return curves


def _draw_cell(
    ax, runs: list[RunData], spec: FigureSpec, q: Quantity, label: str, style: dict, place
) -> pd.Series | None:
    """Mean line and ±std band of one row in one panel; diverged runs dotted up to divergence.

    `style`: the row's color, line style and marker; `place`: (row index, rows), which points
    carry its markers (a one-point curve, a smoke run evaluated once, is its marker). Returns
    the mean line drawn (None: no finished run)."""
    color = style["color"]
    mean = None
    diverged = [r for r in runs if r.status != "ok"]
    if diverged:
        label += f" [{len(diverged)}/{len(runs)} diverged]"
    curves = seed_curves(runs, spec, q)
    if not curves.empty:
        mean = curves.mean(axis=1)
        ax.plot(
            mean.index,
            mean.values,
            label=label,
            lw=1.6,
            markevery=marker_every(len(mean), *place),
            **style,
        )
        if curves.shape[1] >= 2:
            std = curves.std(axis=1, ddof=1)
            ax.fill_between(mean.index, mean - std, mean + std, color=color, alpha=0.2, lw=0)
        label = None
    factor = value_scale(q.metric, spec.percent)
    for run in diverged:
        s = run_series(run, q.protocol, q.metric, q.stat) * factor
        if spec.smooth is not None:
            s = spec.smooth.series(s.dropna())
        ax.axvline(run.diverged_round, color=color, ls=":", lw=0.8, label=label)
        label = None
        if len(s):
            ax.plot(s.index, s.values, color=color, ls=":", lw=1.0)
            ax.plot([s.index[-1]], [s.iloc[-1]], "x", color=color)
    return mean


def make_figure(spec: FigureSpec) -> Figure:
    """The matplotlib figure (not saved) for a spec of either kind."""
    if spec.kind == "lambda":
        return make_lambda_figure(spec)
    cells = load_cells(spec)
    n = len(spec.columns)
    width = max(6.0, PANEL_SIZE[0] * n)
    fig = Figure(figsize=(width, PANEL_SIZE[1] + 1.2), layout="constrained")
    axes = fig.subplots(1, n, sharey=True, squeeze=False)[0]
    styles = row_styles(spec.rows, ms=4.0)
    quantities = cell_quantities(spec)
    by, _ = variation(spec, "protocol")
    means: dict[tuple[str, str], pd.Series | None] = {}
    for ax, col in zip(axes, spec.columns, strict=True):
        for i, row in enumerate(spec.rows):
            q = quantities[(str(row["id"]), str(col["id"]))]
            runs = cells.get((str(row["id"]), str(col["id"])), [])
            label = str(row["label"]) + (f" [{q.protocol}]" if by in ("row", "cell") else "")
            if runs:
                place = (i, len(spec.rows))
                style = styles[str(row["id"])]
                means[(str(row["id"]), str(col["id"]))] = _draw_cell(
                    ax, runs, spec, q, label, style, place
                )
        title = str(col["label"])
        if by == "column":
            title += f" [{quantities[(str(spec.rows[0]['id']), str(col['id']))].protocol}]"
        ax.set_title(title)
        ax.set_xlabel("Round")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))  # rounds, not 1.25
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(axis_label(spec.metric, spec.stat, spec.percent))
    shared_legend(fig, axes)
    seeds = len({r.key["seed"] for runs in cells.values() for r in runs})
    title = [
        f"{spec.paper} {spec.name}: {spec.caption}",
        axis_note(spec, spec.percent),
        f"line: the mean over {seeds} seed{'s' if seeds != 1 else ''}"
        + ("; band: ± one standard deviation across seeds" if seeds > 1 else "")
        + (f"; each run's curve {_smoothing(spec, cells)}" if spec.smooth else ""),
        *protocol_notes({q.protocol for q in quantities.values()}),
        *coinciding_note(spec, means),
        *(f"Precision: {note}" for note in [precision_note(cells)] if note),
        *(f"WARNING: {w}" for w in warning_lines(spec.scale, any_standin(cells))),
    ]
    chars = int(width * CHARS_PER_INCH)
    lines = (textwrap.fill(t, chars, break_on_hyphens=False) for t in title)
    fig.suptitle("\n".join(lines), fontsize="medium")
    return fig


COINCIDE = 0.1  # in the axis' units (points of a percent): closer at every round reads as one line


def coinciding_note(spec: FigureSpec, means: dict) -> list[str]:
    """'FedProx ≈ FedAvg ...' for each row whose mean line lies within COINCIDE of an earlier
    row's at every round of every panel (drawn over it: its hollow marker shows both)."""
    labels = {str(r["id"]): str(r["label"]) for r in spec.rows}
    ids, cols = list(labels), [str(c["id"]) for c in spec.columns]
    pairs = []
    for j, b in enumerate(ids):
        for a in ids[:j]:
            shared = [c for c in cols if means.get((a, c)) is not None]
            if not shared or any(means.get((b, c)) is None for c in shared):
                continue
            if all(_within(means[(a, c)], means[(b, c)]) for c in shared):
                pairs.append(f"{labels[b]} ≈ {labels[a]}")
                break
    if not pairs:
        return []
    return [
        f"{'; '.join(pairs)}: within {COINCIDE:g} at every round of every panel (drawn over "
        "each other: look for the hollow markers)"
    ]


def _within(a: pd.Series, b: pd.Series) -> bool:
    return a.index.equals(b.index) and bool(((a - b).abs() <= COINCIDE + 1e-9).all())


def _smoothing(spec: FigureSpec, cells: dict) -> str:
    """The smoother's description, with the clipping the shortest curve needed."""
    lengths = [len(r.ok_records) for runs in cells.values() for r in runs]
    return spec.smooth.describe(min(lengths) if lengths else None)


def learning_curves(spec: FigureSpec, out_prefix: str | Path) -> list[Path]:
    """Write out_prefix.png and .pdf atomically (any kind: rounds or λ); return their paths."""
    return save_figure(make_figure(spec), out_prefix)


def save_figure(fig: Figure, out_prefix: str | Path) -> list[Path]:
    """Write a figure as out_prefix.png and .pdf atomically, without timestamps; return paths."""
    out_prefix = Path(out_prefix)
    paths = []
    for fmt, meta in (("png", {"Software": None}), ("pdf", {"CreationDate": None})):
        path = out_prefix.with_name(f"{out_prefix.name}.{fmt}")
        with atomic_path(path, suffix=f".{fmt}") as tmp:
            fig.savefig(tmp, format=fmt, dpi=150, metadata=meta)
        paths.append(path)
    return paths


render_figure = learning_curves  # a kind-neutral name for the same writer
