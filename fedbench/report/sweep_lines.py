"""Figures of a client statistic against one swept hyperparameter (the q-FFL preprint's QF-6:
the spread of client accuracy and loss against q), one line per method, one panel per
(quantity, column); each point is the mean over seeds of the run's value at the final round,
error bars the seeds' sample std. A diverged run is left out and marked. Reads run files only."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fedbench.report.collect import load_run, run_series
from fedbench.report.layout import axis_label, row_styles, shared_legend, value_scale, warning_lines


@dataclass(frozen=True)
class SweepQuantity:
    """One panel row: a client metric's stat across clients."""

    metric: str
    stat: str
    label: str


@dataclass(frozen=True)
class SweepFigureSpec:
    """rows: (id, label) per line; columns: (id, label) per panel column; cells: (row id,
    column id, index into `values`) -> the run directories (one per seed)."""

    paper: str
    name: str
    caption: str
    scale: str
    axis: str
    values: tuple[float, ...]
    protocol: str
    percent: bool
    rows: tuple[tuple[str, str], ...]
    columns: tuple[tuple[str, str], ...]
    quantities: tuple[SweepQuantity, ...]
    cells: dict[tuple[str, str, int], tuple[Path, ...]]


def point_values(runs: list, protocol: str, q: SweepQuantity) -> tuple[list[float], list[int]]:
    """(final-round values of the finished runs, the rounds at which the others diverged)."""
    values, diverged = [], []
    for run in runs:
        if run.status != "ok":
            diverged.append(int(run.diverged_round or 0))
            continue
        series = run_series(run, protocol, q.metric, q.stat)
        values.append(float(series.iloc[-1]))
    return values, diverged


def sweep_points(
    spec: SweepFigureSpec,
) -> dict[tuple[str, str, str, int], tuple[float, float, int]]:
    """(quantity metric/stat, row id, column id, value index) -> (mean, seed std, diverged
    runs); mean is NaN when every run of the point diverged."""
    cache: dict[Path, object] = {}
    out = {}
    for (row, col, i), dirs in spec.cells.items():
        for d in dirs:
            if Path(d) not in cache:
                cache[Path(d)] = load_run(d)
        runs = [cache[Path(d)] for d in dirs]
        for q in spec.quantities:
            values, diverged = point_values(runs, spec.protocol, q)
            scale = value_scale(q.metric, spec.percent)
            v = np.asarray(values) * scale
            mean = float(v.mean()) if len(v) else math.nan
            std = float(v.std(ddof=1)) if len(v) > 1 else 0.0
            out[(f"{q.metric}/{q.stat}", row, col, i)] = (mean, std, len(diverged))
    return out


def write_sweep_figure(spec: SweepFigureSpec, out_prefix: str | Path) -> list[Path]:
    """One panel per (quantity, column), a line per row over the swept values; a diverged point
    is drawn as an 'x' on the panel's floor with the number of diverged seeds. .png and .pdf."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from fedbench.report.figures import save_figure

    points = sweep_points(spec)
    standin = any(load_run(d).standin for dirs in spec.cells.values() for d in dirs[:1])
    nr, nc = len(spec.quantities), len(spec.columns)
    fig, axes = plt.subplots(
        nr, nc, figsize=(3.9 * nc + 0.4, 2.9 * nr + 1.3), squeeze=False, layout="constrained"
    )
    styles = row_styles([{"id": r} for r, _ in spec.rows])
    x = np.asarray(spec.values, dtype=float)
    for i, q in enumerate(spec.quantities):
        for j, (col, col_label) in enumerate(spec.columns):
            ax = axes[i][j]
            key = f"{q.metric}/{q.stat}"
            for row, row_label in spec.rows:
                got = [points[(key, row, col, k)] for k in range(len(x))]
                mean = np.asarray([g[0] for g in got])
                std = np.asarray([g[1] for g in got])
                st = styles[row]
                ax.errorbar(
                    x, mean, yerr=std, color=st["color"], ls=st["ls"], marker=st["marker"],
                    ms=4, capsize=2, lw=1.2, label=row_label,
                )  # fmt: skip
                bad = [k for k, g in enumerate(got) if g[2] > 0]
                if bad:
                    ax.plot(
                        x[bad], [0.0] * len(bad), "x", color=st["color"], ms=8, mew=2,
                        transform=ax.get_xaxis_transform(), clip_on=False,
                        label=f"{row_label}: diverged (x on the floor)",
                    )  # fmt: skip
            ax.set_title(f"{col_label}: {q.label}", fontsize=9)
            ax.set_xlabel(spec.axis, fontsize=8)
            ax.set_ylabel(axis_label(q.metric, q.stat, spec.percent), fontsize=8)
            ax.tick_params(labelsize=7)
    shared_legend(fig, axes.ravel())
    title = spec.caption or spec.name
    if spec.scale != "paper":
        title += f" [{spec.scale} scale]"
    notes = [
        "each point: mean over seeds of the final round's value (error bars: sample std over "
        "seeds), global model on each client's test split",
        *warning_lines(spec.scale, standin),
    ]
    fig.suptitle(title + "\n" + "; ".join(notes), fontsize=8, wrap=True)
    paths = save_figure(fig, out_prefix)
    plt.close(fig)
    return paths
