"""Paper figures: one panel per column, one line per row.

kind "rounds": learning curves, mean over seeds with a ±std band; kind "lambda": the final round's
quantity over the mixing weight λ with across-client error bars (see lambda_curves).
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from fedbench.io import atomic_path
from fedbench.metrics import PACK_STATS
from fedbench.report.collect import RunData, run_series
from fedbench.report.lambda_curves import make_lambda_figure
from fedbench.report.layout import (
    LayoutError,
    Quantity,
    any_standin,
    cell_quantities,
    check_layout,
    load_cells,
    protocol_notes,
    quantity_label,
    shared_legend,
    value_scale,
    variation,
    warning_lines,
)
from fedbench.report.smooth import Savgol

FIGURE_KINDS = ("rounds", "lambda")
# "columns": one panel per column, one line per row; "cells" (λ figures): one panel per
# (row, column), a block of panels per row (thesis Figs. 2.3 and 2.5 draw each scheme apart).
PANEL_LAYOUTS = ("columns", "cells")

PANEL_SIZE = (4.2, 3.2)
CHARS_PER_INCH = 10  # suptitle wrap width at fontsize 'medium'


@dataclass(frozen=True)
class FigureSpec:
    """One paper figure: the quantity over rounds (kind "rounds") or over λ at the final round
    (kind "lambda"; protocols lambda0.0 … lambda1.0, `protocol` unused), and which runs feed
    which panel and line."""

    paper: str
    name: str
    caption: str
    metric: str
    protocol: str
    stat: str
    percent: bool
    rows: list[dict]
    columns: list[dict]
    cells: dict[tuple[str, str], list[Path]]
    scale: str
    kind: str = "rounds"
    panels: str = "columns"
    smooth: Savgol | None = None  # each run's curve filtered before the mean over seeds

    def __post_init__(self) -> None:
        """Reject an unknown kind, stat, scale, a cell outside the rows × columns, or a row/column
        overriding the metric or stat (the panels share one y axis; only protocol may vary, and
        not even that in a λ figure, whose protocols are the λ grid)."""
        where = f"{self.paper}/{self.name}"
        if self.kind not in FIGURE_KINDS:
            raise LayoutError(f"{where}: unknown kind {self.kind!r}; valid: {list(FIGURE_KINDS)}")
        if self.panels not in PANEL_LAYOUTS:
            raise LayoutError(f"{where}: unknown panels {self.panels!r}; valid: {PANEL_LAYOUTS}")
        if self.panels == "cells" and self.kind != "lambda":
            raise LayoutError(f"{where}: panels 'cells' is for λ figures only")
        if self.smooth is not None and self.kind != "rounds":
            raise LayoutError(f"{where}: smooth is for figures of kind 'rounds' only")
        check_layout(self)
        for cell, q in cell_quantities(self).items():
            if (q.metric, q.stat) != (self.metric, self.stat):
                raise LayoutError(
                    f"{where}: cell {cell} reads {q.metric}/{q.stat}, but a "
                    f"figure's rows and columns may override only the protocol "
                    f"(the figure plots {self.metric}/{self.stat})"
                )
            if self.kind == "lambda" and q.protocol != self.protocol:
                raise LayoutError(
                    f"{where}: cell {cell} overrides the protocol ({q.protocol!r}), but a λ "
                    f"figure reads the protocols lambda0.0 … lambda1.0 of every run"
                )
        if self.kind == "lambda" and self.stat not in PACK_STATS:
            raise LayoutError(f"{where}: a λ figure needs a per-client stat {list(PACK_STATS)}")


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
    ax, runs: list[RunData], spec: FigureSpec, q: Quantity, label: str, color: str
) -> None:
    """Mean line and ±std band of one row in one panel; diverged runs dotted up to divergence."""
    diverged = [r for r in runs if r.status != "ok"]
    if diverged:
        label += f" [{len(diverged)}/{len(runs)} diverged]"
    curves = seed_curves(runs, spec, q)
    if not curves.empty:
        mean = curves.mean(axis=1)
        # A one-point curve (a smoke run evaluated once) would draw nothing without a marker.
        marker = "o" if len(mean) == 1 else None
        ax.plot(mean.index, mean.values, color=color, label=label, lw=1.6, marker=marker)
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


def make_figure(spec: FigureSpec) -> Figure:
    """The matplotlib figure (not saved) for a spec of either kind."""
    if spec.kind == "lambda":
        return make_lambda_figure(spec)
    cells = load_cells(spec)
    n = len(spec.columns)
    width = max(6.0, PANEL_SIZE[0] * n)
    fig = Figure(figsize=(width, PANEL_SIZE[1] + 1.2), layout="constrained")
    axes = fig.subplots(1, n, sharey=True, squeeze=False)[0]
    colors = [f"C{i % 10}" for i in range(len(spec.rows))]
    quantities = cell_quantities(spec)
    by, _ = variation(spec, "protocol")
    ylabel = quantity_label(spec, spec.percent)
    if by != "table":
        ylabel = ylabel.replace(f"protocol {spec.protocol}", f"protocol per {by}")
    for ax, col in zip(axes, spec.columns, strict=True):
        for row, color in zip(spec.rows, colors, strict=True):
            q = quantities[(str(row["id"]), str(col["id"]))]
            runs = cells.get((str(row["id"]), str(col["id"])), [])
            label = str(row["label"]) + (f" [{q.protocol}]" if by in ("row", "cell") else "")
            if runs:
                _draw_cell(ax, runs, spec, q, label, color)
        title = str(col["label"])
        if by == "column":
            title += f" [{quantities[(str(spec.rows[0]['id']), str(col['id']))].protocol}]"
        ax.set_title(title)
        ax.set_xlabel("round")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))  # rounds, not 1.25
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(ylabel)
    shared_legend(fig, axes)
    title = [
        f"{spec.paper} {spec.name}: {spec.caption}",
        f"scale {spec.scale}; mean over seeds, band = ±1 sample std (ddof=1)"
        + (f"; each run's curve {_smoothing(spec, cells)}" if spec.smooth else ""),
        *protocol_notes({q.protocol for q in quantities.values()}),
        *(f"WARNING: {w}" for w in warning_lines(spec.scale, any_standin(cells))),
    ]
    chars = int(width * CHARS_PER_INCH)
    fig.suptitle("\n".join(textwrap.fill(t, chars) for t in title), fontsize="medium")
    return fig


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
