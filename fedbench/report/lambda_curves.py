"""Curves over the mixing weight λ (SuPerFed Figures 2.3 and 2.5), from each run's final record.

Every evaluation record of a model-mixture run holds protocols `lambda0.0` … `lambda1.0`: the mixed
model (1−λ)θ^g + λθ^l on each client's test split. A panel per column plots, per row, the spec's
metric/stat at each λ (mean over seeds) with error bars = the across-client std (the summary's
population std, mean over seeds), and prints the "best averaged" value: the `best_lambda`
protocol's stat (each client's own best λ) where every run recorded it, else the curve's maximum.
"""

from __future__ import annotations

import math
import re
import textwrap

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from fedbench.report.collect import RunData, RunDataError
from fedbench.report.curve_spec import FigureSpec
from fedbench.report.layout import (
    STAT_WORDS,
    any_standin,
    axis_label,
    is_accuracy,
    load_cells,
    metric_name,
    precision_note,
    protocol_notes,
    row_styles,
    shared_legend,
    value_scale,
    warning_lines,
)

LAMBDA_RE = re.compile(r"^lambda(\d+(?:\.\d+)?)$")
# The thesis' grid (§2.9): every run must hold these, plus any λ another run of the figure holds.
LAMBDA_GRID = tuple(round(0.1 * i, 1) for i in range(11))
BEST_PROTOCOL = "best_lambda"
BEST_SOURCES = {"best_lambda": "best λ per client", "max": "max over λ"}
ERR_STAT = "std"
PANELS_PER_LINE = 4
PANEL_SIZE = (3.6, 3.0)
CELL_PANEL_SIZE = (2.9, 2.5)
CHARS_PER_INCH = 10
TITLE_LINE = 0.22  # inches per line of the suptitle at fontsize 'medium'
PANEL_COLUMNS = ("row", "label", "lambda", "protocol", "value", "err", "seeds", "best", "source")


def lambda_protocol(lam: float) -> str:
    """The engine's protocol name of one λ, e.g. 'lambda0.1'."""
    return f"lambda{lam}"


def lambda_of(protocol: str) -> float | None:
    """λ of a protocol named 'lambda<λ>', else None."""
    m = LAMBDA_RE.match(protocol)
    return float(m.group(1)) if m else None


def _final(run: RunData) -> dict:
    """The run's last evaluation record with metrics."""
    records = run.ok_records
    if not records:
        raise RunDataError(f"{run.run_dir}: no evaluation record with metrics")
    return records[-1]


def lambda_grid(runs: list[RunData]) -> list[float]:
    """The λ values to plot: the thesis' 0, 0.1, …, 1 and any other λ some run recorded."""
    present = {
        lam for run in runs for p in _final(run)["summary"] if (lam := lambda_of(p)) is not None
    }
    return sorted(set(LAMBDA_GRID) | present)


def _stat(run: RunData, record: dict, protocol: str, metric: str, stat: str) -> float:
    """summary[protocol][metric][stat] of a record; an error naming the run if it is missing."""
    summary = record["summary"]
    if protocol not in summary:
        have = sorted(summary, key=lambda p: (lambda_of(p) is None, lambda_of(p) or 0.0, p))
        raise RunDataError(
            f"{run.run_dir}: final record (round {record['round']}) lacks protocol {protocol!r} "
            f"needed by the λ curve (protocols: {have})"
        )
    try:
        value = summary[protocol][metric][stat]
    except (KeyError, TypeError) as err:
        raise RunDataError(
            f"{run.run_dir}: final record (round {record['round']}) lacks "
            f"{protocol}/{metric}/{stat}"
        ) from err
    return float("nan") if value is None else float(value)


def lambda_curve(runs: list[RunData], spec: FigureSpec, grid: list[float]) -> pd.DataFrame:
    """λ × (value, err, seeds) of one cell: finished runs' final records, seed means, scaled."""
    ok = [r for r in runs if r.status == "ok"]
    scale = value_scale(spec.metric, spec.percent)
    rows = []
    for lam in grid:
        protocol = lambda_protocol(lam)
        values, errs = [], []
        for run in ok:
            record = _final(run)
            values.append(_stat(run, record, protocol, spec.metric, spec.stat))
            errs.append(_stat(run, record, protocol, spec.metric, ERR_STAT))
        n = len(ok)
        rows.append(
            {
                "lambda": lam,
                "protocol": protocol,
                "value": sum(values) / n * scale if n else math.nan,
                "err": sum(errs) / n * scale if n else math.nan,
                "seeds": n,
            }
        )
    return pd.DataFrame(rows, columns=["lambda", "protocol", "value", "err", "seeds"])


def best_averaged(runs: list[RunData], spec: FigureSpec, curve: pd.DataFrame) -> tuple[float, str]:
    """(value, source): the `best_lambda` stat (seed mean) when every finished run recorded it,
    source 'best_lambda'; else the curve's maximum over λ, source 'max'."""
    ok = [r for r in runs if r.status == "ok"]
    if ok and all(BEST_PROTOCOL in _final(r)["summary"] for r in ok):
        values = [_stat(r, _final(r), BEST_PROTOCOL, spec.metric, spec.stat) for r in ok]
        return sum(values) / len(values) * value_scale(spec.metric, spec.percent), "best_lambda"
    if curve.empty or curve["value"].isna().all():
        return math.nan, "max"
    return float(curve["value"].max()), "max"


def lambda_panel(
    spec: FigureSpec, cells: dict[tuple[str, str], list[RunData]], column: str
) -> pd.DataFrame:
    """Tidy frame of one panel (a column): one line per (row, λ) with the plotted value, error
    bar, number of finished seeds and the row's best averaged value and its source."""
    grid = lambda_grid([r for runs in cells.values() for r in runs if r.status == "ok"])
    parts = []
    for row in spec.rows:
        runs = cells.get((str(row["id"]), column), [])
        if not runs:
            continue
        curve = lambda_curve(runs, spec, grid)
        best, source = best_averaged(runs, spec, curve)
        parts.append(
            curve.assign(row=str(row["id"]), label=str(row["label"]), best=best, source=source)
        )
    if not parts:
        return pd.DataFrame(columns=list(PANEL_COLUMNS))
    return pd.concat(parts, ignore_index=True)[list(PANEL_COLUMNS)]


def _fmt(value: float, spec: FigureSpec) -> str:
    """Two decimals in percent, three on the 0–1 scale."""
    if math.isnan(value):
        return "n/a"
    return f"{value:.2f}" if value_scale(spec.metric, spec.percent) != 1.0 else f"{value:.3f}"


def _draw_panel(
    ax, spec: FigureSpec, cells: dict, panel: pd.DataFrame, col: dict, rows: list[dict], styles
) -> set[str]:
    """One panel: each of `rows` over λ with error bars (`styles`: each row's color, line style
    and marker), and a legend of each row's best averaged value (without the row's name when the
    panel has one row). Returns the sources."""
    sources: set[str] = set()
    notes = []
    for row in rows:
        rid = str(row["id"])
        runs = cells.get((rid, str(col["id"])), [])
        if not runs:
            continue
        label = str(row["label"])
        name = f"{row['label']}: " if len(rows) > 1 else ""
        diverged = sum(r.status != "ok" for r in runs)
        if diverged:
            label += f" [{diverged}/{len(runs)} diverged]"
        line = panel[panel["row"] == rid]
        if line["seeds"].iloc[0] == 0:
            ax.plot([], [], label=label, **styles[rid])
            notes.append((f"{name}all diverged", rid))
            continue
        ax.errorbar(
            line["lambda"],
            line["value"],
            yerr=line["err"],
            label=label,
            lw=1.4,
            capsize=3,
            elinewidth=0.8,
            **styles[rid],
        )
        best, source = line["best"].iloc[0], line["source"].iloc[0]
        sources.add(source)
        notes.append((f"{name}{_fmt(best, spec)} ({BEST_SOURCES[source]})", rid))
    if notes:  # a panel legend, placed by matplotlib where it hides the fewest points
        handles = [Line2D([], [], lw=1.4, **styles[rid]) for _, rid in notes]
        ax.legend(
            handles,
            [text for text, _ in notes],
            title="best averaged",
            loc="best",
            fontsize="x-small",
            title_fontsize="x-small",
            framealpha=0.85,
        )
    ax.set_title(str(col["label"]), fontsize="medium")
    ax.set_xlabel("λ (0 = global model, 1 = local model)", fontsize="small")
    ax.set_xlim(-0.05, 1.05)
    ax.grid(alpha=0.3)
    return sources


def _share_y(axes: list, spec: FigureSpec) -> None:
    """One y range over every panel: an accuracy's whole range, [0, 1] (× 100 in percent), as in
    the thesis' Figure 2.5; any other metric the union of the panels' ranges."""
    if is_accuracy(spec.metric):
        top = value_scale(spec.metric, spec.percent)
        lo, hi = -0.02 * top, 1.02 * top
    else:
        lo = min(ax.get_ylim()[0] for ax in axes)
        hi = max(ax.get_ylim()[1] for ax in axes)
    for ax in axes:
        ax.set_ylim(lo, hi)


def make_lambda_figure(spec: FigureSpec) -> Figure:
    """The matplotlib figure (not saved) of a kind='lambda' spec.

    panels "columns": a panel per column with a line per row; "cells": a block of panels per row
    (titled with the row's label), a panel per column in it; panels wrap after PANELS_PER_LINE.
    """
    cells = load_cells(spec)
    panels = {str(c["id"]): lambda_panel(spec, cells, str(c["id"])) for c in spec.columns}
    styles = row_styles(spec.rows, ms=4.0)
    n = len(spec.columns)
    ncols = min(n, PANELS_PER_LINE)
    nrows = math.ceil(n / ncols)
    blocks = [[r] for r in spec.rows] if spec.panels == "cells" else [spec.rows]
    size = CELL_PANEL_SIZE if spec.panels == "cells" else PANEL_SIZE
    width = max(6.0, size[0] * ncols * len(blocks))
    fig = Figure(figsize=(width, size[1] * nrows + 1.6), layout="constrained")  # height: below
    holders = fig.subfigures(1, len(blocks), squeeze=False).ravel() if len(blocks) > 1 else [fig]
    axes, sources = [], set()
    for holder, rows in zip(holders, blocks, strict=True):
        grid_axes = holder.subplots(nrows, ncols, sharey=True, squeeze=False).ravel()
        for ax in grid_axes[n:]:
            ax.remove()
        for ax, col in zip(grid_axes[:n], spec.columns, strict=True):
            sources |= _draw_panel(ax, spec, cells, panels[str(col["id"])], col, rows, styles)
        axes.extend(grid_axes[:n])
        if len(blocks) > 1:
            color = styles[str(rows[0]["id"])]["color"]
            holder.suptitle(str(rows[0]["label"]), color=color, weight="bold")
    _share_y(axes, spec)
    ylabel = axis_label(spec.metric, spec.stat, spec.percent)
    if len(axes) == 1 or (nrows == 1 and len(blocks) == 1):
        axes[0].set_ylabel(ylabel)
    else:
        fig.supylabel(ylabel, fontsize="medium")
    shared_legend(fig, axes)
    what = "mean" if spec.stat == "mean" else spec.stat
    best_text = {
        "best_lambda": (
            f"best λ per client = protocol best_lambda's {what} (λ chosen per client by top1)"
        ),
        "max": f"max over λ = max over λ of the {what} curve (no best_lambda recorded)",
    }
    title = [
        f"{spec.paper} {spec.name}: {spec.caption}",
        f"scale {spec.scale}; final evaluation round; mixed model (1−λ)θ^g + λθ^l on each "
        f"client's test split; points = {metric_name(spec.metric)}, "
        f"{STAT_WORDS.get(spec.stat, spec.stat)} (stat {spec.stat}), mean over seeds; "
        f"error bars = ±std across clients (population, ddof=0), mean over seeds",
        "numbers in each panel's legend = best averaged "
        + spec.metric
        + ": "
        + "; ".join(best_text[s] for s in sorted(sources)),
        *protocol_notes({BEST_PROTOCOL} & sources),
        *(f"Precision: {note}" for note in [precision_note(cells)] if note),
        *(f"WARNING: {w}" for w in warning_lines(spec.scale, any_standin(cells))),
    ]
    if not is_accuracy(spec.metric) and "best_lambda" in sources:
        title.append(f"note: best_lambda picks λ by top1, so its {spec.metric} need not be optimal")
    chars = int(width * CHARS_PER_INCH)
    text = "\n".join(textwrap.fill(t, chars) for t in title)
    fig.suptitle(text, fontsize="medium")
    fig.set_size_inches(width, size[1] * nrows + 0.9 + TITLE_LINE * (text.count("\n") + 1))
    return fig
