"""Parallel-coordinates figures of a hyperparameter sweep (pFedBreD's Figures 5-8).

Each panel is one (column, row) = (dataset-model, protocol) and draws one polyline per point of
the sweep through the swept values and the point's accuracy (best round per run, mean over
seeds), coloured by that accuracy on a fixed [0, 1] blue-to-red scale. Which points and runs a
grid's figure of kind `parallel` draws is `fedbench.outputs.parallel`'s.
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass
from pathlib import Path

from fedbench.report.layout import Quantity, warning_lines

CMAP = "jet"  # blue (0) to red (1), as the paper describes its colours
ACCURACY_RANGE = (0.0, 1.0)
PANEL_SIZE = (3.6, 3.0)


@dataclass(frozen=True)
class ParallelPoint:
    """One polyline: the swept values and the runs (one per seed) trained at them."""

    coords: dict[str, float]
    runs: tuple[Path, ...]


@dataclass(frozen=True)
class ParallelPanel:
    """One panel: a (dataset-model, protocol) pair, its axes and its points."""

    label: str
    quantity: Quantity
    axes: tuple[str, ...]
    labels: dict[str, str]
    ranges: dict[str, tuple[float, float]]
    points: tuple[ParallelPoint, ...]


@dataclass(frozen=True)
class ParallelFigureSpec:
    paper: str
    name: str
    caption: str
    scale: str
    round: str
    panels: tuple[ParallelPanel, ...]
    columns: int  # panels per figure row (the figure's protocols)


def run_value(run_dir: Path, q: Quantity, round_: str) -> tuple[float | None, bool]:
    """(value, standin) of one run: best (max) or final evaluated round; None when it diverged."""
    from fedbench.report.collect import load_run, run_series

    run = load_run(run_dir)
    if run.status != "ok":
        return None, run.standin
    series = run_series(run, q.protocol, q.metric, q.stat).dropna()
    if series.empty:
        return None, run.standin
    return float(series.max() if round_ == "best" else series.iloc[-1]), run.standin


def panel_values(panel: ParallelPanel, round_: str) -> tuple[list[dict], bool]:
    """Per point: its coordinates, 'value' (mean over finished seeds, NaN if none) and 'runs'
    (finished/total); and whether any run used stand-in data."""
    rows, standin = [], False
    for point in panel.points:
        values = []
        for run_dir in point.runs:
            v, s = run_value(run_dir, panel.quantity, round_)
            standin |= s
            if v is not None:
                values.append(v)
        mean = sum(values) / len(values) if values else math.nan
        rows.append(
            {**point.coords, "value": mean, "finished": len(values), "runs": len(point.runs)}
        )
    return rows, standin


def _unit(v: float, span: tuple[float, float]) -> float:
    return (v - span[0]) / (span[1] - span[0])


def draw_panel(ax, panel: ParallelPanel, rows: list[dict], cmap, norm) -> None:
    """Vertical axes at x = 0, 1, ... (the swept values, then accuracy), each scaled to its
    range; one polyline per point, coloured by accuracy; a point with no finished run is a grey
    dotted line through the swept axes only."""
    from matplotlib.collections import LineCollection

    spans = [panel.ranges[a] for a in panel.axes] + [ACCURACY_RANGE]
    names = [panel.labels.get(a, a) for a in panel.axes] + [f"accuracy ({panel.quantity.metric})"]
    segs, colours, missing = [], [], []
    for r in sorted(rows, key=lambda r: (math.isnan(r["value"]), r["value"])):
        if math.isnan(r["value"]):
            missing.append([(i, _unit(r[a], s)) for i, (a, s) in enumerate(zip(panel.axes, spans))])
            continue
        coords = [r[a] for a in panel.axes] + [r["value"]]
        segs.append([(i, _unit(v, s)) for i, (v, s) in enumerate(zip(coords, spans, strict=True))])
        colours.append(r["value"])
    if segs:
        lines = LineCollection(segs, cmap=cmap, norm=norm, linewidths=1.6, alpha=0.85)
        lines.set_array(colours)
        ax.add_collection(lines)
    if missing:
        ax.add_collection(LineCollection(missing, colors="0.5", linestyles=":", linewidths=1.0))
    for i, span in enumerate(spans):
        ax.axvline(i, color="k", lw=0.8)
        for f in (0.0, 0.25, 0.5, 0.75, 1.0):
            ax.text(i + 0.04, f, f"{span[0] + f * (span[1] - span[0]):g}", fontsize=6, va="center")
    ax.set_xlim(-0.15, len(spans) - 0.6)
    ax.set_ylim(-0.04, 1.04)
    ax.set_xticks(range(len(spans)), names)
    ax.set_yticks([])
    for side in ("top", "right", "left", "bottom"):
        ax.spines[side].set_visible(False)
    title = panel.label
    unfinished = sum(r["runs"] - r["finished"] for r in rows)
    if unfinished:
        title += f" [{unfinished} run(s) diverged]"
    ax.set_title(title, fontsize=9)


def make_parallel_figure(spec: ParallelFigureSpec):
    """The matplotlib figure (not saved): panels in rows of `spec.columns`, one colour bar."""
    from matplotlib import colormaps
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize
    from matplotlib.figure import Figure

    ncols = max(1, spec.columns)
    nrows = math.ceil(len(spec.panels) / ncols)
    width = PANEL_SIZE[0] * ncols + 1.2
    fig = Figure(figsize=(width, PANEL_SIZE[1] * nrows + 1.4), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)
    cmap, norm = colormaps[CMAP], Normalize(*ACCURACY_RANGE)
    standin = False
    for k, panel in enumerate(spec.panels):
        rows, s = panel_values(panel, spec.round)
        standin |= s
        draw_panel(axes[k // ncols][k % ncols], panel, rows, cmap, norm)
    for k in range(len(spec.panels), nrows * ncols):
        axes[k // ncols][k % ncols].set_visible(False)
    fig.colorbar(ScalarMappable(norm=norm, cmap=cmap), ax=axes, label="accuracy", shrink=0.8)
    how = (
        "best round on the test set per run (max; optimistic)"
        if spec.round == "best"
        else ("final round per run")
    )
    title = [
        f"{spec.paper} {spec.name}: {spec.caption}",
        f"scale {spec.scale}; {how}, mean over seeds; one line per grid point",
        *(f"WARNING: {w}" for w in warning_lines(spec.scale, standin)),
    ]
    chars = int(width * 10)
    fig.suptitle("\n".join(textwrap.fill(t, chars) for t in title), fontsize="medium")
    return fig


def write_parallel_figure(spec: ParallelFigureSpec, out_prefix: str | Path) -> list[Path]:
    """Write out_prefix.png and .pdf atomically; return their paths."""
    from fedbench.report.figures import save_figure

    return save_figure(make_parallel_figure(spec), out_prefix)
