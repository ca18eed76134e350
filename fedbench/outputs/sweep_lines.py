"""Figures of client statistics against one swept hyperparameter (kind `sweep_lines`; the q-FFL
preprint's QF-6): each row names a catalog sweep by its name template with one placeholder
(`qffl-localpow-q{q}`), drawn as a line over `values`; each column a (dataset, partition, model);
each entry of `quantities` a row of panels (a metric and its stat across clients). Drawn (below)
from the runs' final round."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fedbench.cells import (
    Grid,
    RunKey,
    check_names,
    check_seeds,
    choose_dataset,
    column_labels,
    output_seeds,
    spec_header,
)
from fedbench.config import ConfigError, nearest, sweep_fields, sweep_name, sweep_tag
from fedbench.metrics import PACK_STATS
from fedbench.metrics.names import CLIENT_METRICS
from fedbench.outputs.base import OutputKind
from fedbench.report.collect import load_run, run_series
from fedbench.report.layout import axis_label, row_styles, shared_legend, value_scale, warning_lines

ROW_KEYS = ("id", "label", "algorithm")
COLUMN_KEYS = ("id", "label", "dataset", "partition", "model")
QUANTITY_KEYS = ("metric", "stat", "label")


class SweepLinesKind(OutputKind):
    name = "sweep_lines"
    section = "figures"
    keys = (
        "caption", "kind", "axis", "values", "protocol", "percent", "seeds", "rows", "columns",
        "quantities",
    )  # fmt: skip
    about = "a figure of kind 'sweep_lines' (client statistics against one swept value)"

    def check(self, where: str, out: dict[str, Any], catalog: dict) -> None:
        """One placeholder per row template, every swept variant in the catalog, known
        metrics and stats, and (dataset, partition, model) columns."""
        for key in ("axis", "values", "rows", "columns", "quantities"):
            if key not in out:
                raise ConfigError(f"{where}: missing key {key!r}")
        values = out["values"]
        if not isinstance(values, list) or not values:
            raise ConfigError(f"{where}.values: expected a non-empty list of numbers")
        try:
            tags = [sweep_tag(v) for v in values]
        except ValueError as err:
            raise ConfigError(f"{where}.values: {err}") from None
        if len(set(tags)) != len(tags):
            raise ConfigError(f"{where}.values: repeated value(s) in {values!r}")
        if "seeds" in out:
            check_seeds(f"{where}.seeds", out["seeds"])
        if "percent" in out and not isinstance(out["percent"], bool):
            raise ConfigError(f"{where}.percent: expected true or false, got {out['percent']!r}")
        if not isinstance(out.get("protocol", "global"), str):
            raise ConfigError(f"{where}.protocol: expected a protocol name (e.g. global)")
        for axis, keys in (("rows", ROW_KEYS), ("columns", COLUMN_KEYS), ("quantities", None)):
            entries = out[axis]
            if not isinstance(entries, list) or not entries:
                raise ConfigError(f"{where}.{axis}: expected a non-empty list of mappings")
            if keys is None:
                continue
            ids = [e.get("id") if isinstance(e, dict) else None for e in entries]
            if None in ids or len(set(ids)) != len(ids):
                raise ConfigError(f"{where}.{axis}: every entry needs a unique 'id'")
            for e in entries:
                bad = sorted(set(e) - set(keys))
                if bad:
                    raise ConfigError(
                        f"{where} {axis[:-1]} {e['id']!r}: unknown key(s) {bad}; valid: {keys}"
                    )
        for q in out["quantities"]:
            if not isinstance(q, dict) or sorted(set(q) - set(QUANTITY_KEYS)):
                raise ConfigError(
                    f"{where}.quantities: each entry a mapping of {QUANTITY_KEYS}, got {q!r}"
                )
            if q.get("metric") not in CLIENT_METRICS:
                raise ConfigError(
                    f"{where}.quantities: metric {q.get('metric')!r} is not one of "
                    f"{list(CLIENT_METRICS)}"
                )
            if q.get("stat") not in PACK_STATS:
                raise ConfigError(
                    f"{where}.quantities: stat {q.get('stat')!r} is not one of {list(PACK_STATS)}"
                )
        for col in out["columns"]:
            place = f"{where} column {col['id']!r}"
            check_names(place, {f: col.get(f) for f in ("dataset", "partition", "model")}, catalog)
        for row in out["rows"]:
            template = row.get("algorithm")
            place = f"{where} row {row['id']!r}.algorithm"
            if not isinstance(template, str):
                raise ConfigError(f"{place}: a catalog sweep's name template, got {template!r}")
            try:
                fields = sweep_fields(template)
            except ValueError as err:
                raise ConfigError(f"{place}: {err}") from None
            if len(fields) != 1:
                raise ConfigError(
                    f"{place}: {template!r} must have exactly one {{placeholder}} (the swept "
                    f"value), got {fields}"
                )
            for v in values:
                variant = sweep_name(template, {fields[0]: v})
                if variant not in catalog["algorithms"]:
                    raise ConfigError(
                        f"{place}: {variant!r} is not in the catalog (nearest: "
                        f"{', '.join(nearest(variant, catalog['algorithms'])) or 'none'})"
                    )

    def runs(
        self, grid: Grid, name: str, catalog: dict, scale: str, choices: str = "read"
    ) -> dict[tuple[str, str], list[RunKey]]:
        """(row id, column id) -> every run of the row's line in that column (all values)."""
        points = sweep_cells(grid, name, catalog, scale)
        out: dict[tuple[str, str], list[RunKey]] = {}
        for (row, col, _i), keys in points.items():
            out.setdefault((row, col), []).extend(keys)
        return out

    def spec(self, grid: Grid, name: str, catalog: dict, scale: str) -> SweepFigureSpec:
        out = grid.output(self.section, name)
        labels = column_labels(grid, self.section, name, catalog, scale)
        return SweepFigureSpec(
            **spec_header(grid, self.section, name, scale),
            axis=str(out["axis"]),
            values=tuple(float(v) for v in out["values"]),
            protocol=str(out.get("protocol", "global")),
            percent=bool(out.get("percent", False)),
            rows=tuple((str(r["id"]), str(r.get("label", r["id"]))) for r in out["rows"]),
            columns=tuple((str(c["id"]), str(c["label"])) for c in labels),
            quantities=tuple(
                SweepQuantity(
                    q["metric"], q["stat"], str(q.get("label", f"{q['metric']} {q['stat']}"))
                )
                for q in out["quantities"]
            ),
            cells={
                cell: tuple(Path(k.folder(scale)) for k in keys)
                for cell, keys in sweep_cells(grid, name, catalog, scale).items()
            },
        )

    def render(self, spec: SweepFigureSpec, out_prefix: Path) -> list[Path]:
        return write_sweep_figure(spec, out_prefix)


def sweep_cells(
    grid: Grid, name: str, catalog: dict, scale: str
) -> dict[tuple[str, str, int], list[RunKey]]:
    """(row id, column id, value index) -> the runs (one per seed) of that point."""
    out = grid.output("figures", name)
    seeds = output_seeds(grid, out, catalog, scale)
    result = {}
    for col in out["columns"]:
        dataset = choose_dataset(col["dataset"], catalog, scale)
        for row in out["rows"]:
            (field,) = sweep_fields(row["algorithm"])
            for i, v in enumerate(out["values"]):
                algo = sweep_name(row["algorithm"], {field: v})
                result[(row["id"], col["id"], i)] = [
                    RunKey(dataset, col["partition"], col["model"], algo, int(s)) for s in seeds
                ]
    return result


# ---------------------------------------------------------------------------------------------
# Drawing (was fedbench/report/sweep_lines.py).
# Figures of a client statistic against one swept hyperparameter (the q-FFL preprint's QF-6:
# the spread of client accuracy and loss against q), one line per method, one panel per
# (quantity, column); each point is the mean over seeds of the run's value at the final round,
# error bars the seeds' sample std. A diverged run is left out and marked. Reads run files only.


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
