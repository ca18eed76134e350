"""Parallel-coordinates figures of a hyperparameter sweep (pFedBreD's Figures 5-8).

A figure of kind `parallel` names a catalog sweep by its name template (`pfedbred-mh-l{lam}-e{eta}`)
and the values to draw; each column is a (dataset, partition, model) and each row a protocol. A
scale's `caps.sweep_points` draws fewer points (see `select_points`), so CI stays cheap; a point
that another catalog entry trains identically reads that entry's run (`_named_twins`). Drawn below
(Drawing).
"""

from __future__ import annotations

import itertools
import math
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from fedbench.cells import (
    Grid,
    RunKey,
    check_names,
    choose_dataset,
    column_labels,
    output_seeds,
    spec_header,
)
from fedbench.config import ConfigError, nearest, resolve_run, sweep_fields, sweep_name, sweep_tag
from fedbench.metrics import PACK_STATS
from fedbench.metrics.names import CLIENT_METRICS
from fedbench.outputs.base import OutputKind
from fedbench.report.layout import Quantity, is_accuracy, warning_lines

SWEEP_KEYS = ("algorithm", "values", "range", "labels")
ROW_KEYS = ("id", "label", "protocol")
COLUMN_KEYS = ("id", "label", "dataset", "partition", "model", "sweep")


class ParallelKind(OutputKind):
    name = "parallel"
    section = "figures"
    keys = ("caption", "kind", "metric", "stat", "round", "seeds", "sweep", "rows", "columns")
    about = "a parallel-coordinates figure"

    def check(self, where: str, out: dict[str, Any], catalog: dict) -> None:
        """An accuracy metric, rows = protocols, columns = (dataset, partition, model), and a
        sweep whose every point names a catalog algorithm."""
        for key in ("metric", "stat", "sweep", "rows", "columns"):
            if key not in out:
                raise _fail(where, f": missing key {key!r}")
        if out["metric"] not in CLIENT_METRICS or not is_accuracy(out["metric"]):
            raise _fail(where, f".metric: an accuracy (top1, top5, ...), got {out['metric']!r}")
        if out["stat"] not in PACK_STATS:
            raise _fail(where, f".stat: {out['stat']!r} is not one of {list(PACK_STATS)}")
        if out.get("round", "best") not in ("best", "final"):
            raise _fail(where, ".round: must be 'best' or 'final'")
        _check_sweep_block(where, out["sweep"])
        for axis, keys in (("rows", ROW_KEYS), ("columns", COLUMN_KEYS)):
            entries = out[axis]
            if not isinstance(entries, list) or not entries:
                raise _fail(where, f".{axis}: expected a non-empty list of mappings")
            ids = [e.get("id") if isinstance(e, dict) else None for e in entries]
            if None in ids or len(set(ids)) != len(ids):
                raise _fail(where, f".{axis}: every entry needs a unique 'id'")
            for e in entries:
                bad = sorted(set(e) - set(keys))
                if bad:
                    raise _fail(
                        where, f" {axis[:-1]} {e['id']!r}: unknown key(s) {bad}; valid: {keys}"
                    )
        for row in out["rows"]:
            if not isinstance(row.get("protocol"), str):
                raise _fail(
                    where, f" row {row['id']!r}: needs a 'protocol' (e.g. global, personal)"
                )
        for col in out["columns"]:
            place = f"{where} column {col['id']!r}"
            check_names(place, {f: col.get(f) for f in ("dataset", "partition", "model")}, catalog)
            if "sweep" in col:
                _check_sweep_block(place, col["sweep"])
            _check_column_sweep(place, column_sweep(out, col), catalog)

    def runs(
        self, grid: Grid, name: str, catalog: dict, scale: str, choices: str = "read"
    ) -> dict[tuple[str, str], list[RunKey]]:
        return {
            cell: [k for _, keys in points for k in keys]
            for cell, points in parallel_points(grid, name, catalog, scale).items()
        }

    def spec(self, grid: Grid, name: str, catalog: dict, scale: str) -> ParallelFigureSpec:
        out = grid.output(self.section, name)
        points = parallel_points(grid, name, catalog, scale)
        labels = {
            c["id"]: c["label"] for c in column_labels(grid, self.section, name, catalog, scale)
        }
        panels = []
        for col in out["columns"]:
            sweep = column_sweep(out, col)
            axes = tuple(sweep_fields(sweep["algorithm"]))
            for row in out["rows"]:
                panels.append(
                    ParallelPanel(
                        label=f"{labels[col['id']]} {row.get('label', row['id'])}",
                        quantity=Quantity(out["metric"], row["protocol"], out["stat"]),
                        axes=axes,
                        labels={a: str(sweep["labels"].get(a, a)) for a in axes},
                        ranges={a: axis_range(sweep, a) for a in axes},
                        points=tuple(
                            ParallelPoint(
                                {a: float(v) for a, v in point.items()},
                                tuple(Path(k.folder(scale)) for k in keys),
                            )
                            for point, keys in points[(row["id"], col["id"])]
                        ),
                    )
                )
        return ParallelFigureSpec(
            **spec_header(grid, self.section, name, scale),
            round=out.get("round", "best"),
            panels=tuple(panels),
            columns=len(out["rows"]),
        )

    def render(self, spec: ParallelFigureSpec, out_prefix: Path) -> list[Path]:
        return write_parallel_figure(spec, out_prefix)


def _fail(where: str, text: str) -> ConfigError:
    return ConfigError(f"{where}{text}")


def column_sweep(out: dict, col: dict) -> dict[str, Any]:
    """A column's sweep: the figure's, with the column's `sweep` merged over it per key and axis."""
    fig, own = out.get("sweep") or {}, col.get("sweep") or {}
    merged = {"algorithm": own.get("algorithm", fig.get("algorithm"))}
    for key in ("values", "range", "labels"):
        merged[key] = {**(fig.get(key) or {}), **(own.get(key) or {})}
    return merged


def _check_sweep_block(where: str, block: Any) -> None:
    if not isinstance(block, dict):
        raise _fail(where, f".sweep: expected a mapping, got {block!r}")
    unknown = sorted(set(block) - set(SWEEP_KEYS))
    if unknown:
        raise _fail(where, f".sweep: unknown key(s) {unknown}; valid: {list(SWEEP_KEYS)}")
    for key in ("values", "range", "labels"):
        if key in block and not isinstance(block[key], dict):
            raise _fail(
                where, f".sweep.{key}: expected a mapping of axis -> ..., got {block[key]!r}"
            )


def _check_column_sweep(place: str, sweep: dict, catalog: dict) -> None:
    template = sweep["algorithm"]
    if not isinstance(template, str):
        raise _fail(place, f".sweep.algorithm: a catalog sweep's name template, got {template!r}")
    try:
        axes = sweep_fields(template)
    except ValueError as err:
        raise _fail(place, f".sweep.algorithm: {err}") from None
    if not axes:
        raise _fail(place, f".sweep.algorithm: {template!r} has no {{placeholder}} to sweep")
    if sorted(sweep["values"]) != sorted(axes):
        raise _fail(
            place,
            f".sweep.values: needs exactly the axes {axes} of {template!r}, "
            f"got {sorted(sweep['values'])}",
        )
    for axis in axes:
        values = sweep["values"][axis]
        if not isinstance(values, list) or not values:
            raise _fail(place, f".sweep.values.{axis}: expected a non-empty list, got {values!r}")
        try:
            tags = [sweep_tag(v) for v in values]
        except ValueError as err:
            raise _fail(place, f".sweep.values.{axis}: {err}") from None
        if len(set(tags)) != len(tags):
            raise _fail(place, f".sweep.values.{axis}: repeated value(s) in {values!r}")
    for key in ("range", "labels"):
        bad = sorted(set(sweep[key]) - set(axes))
        if bad:
            raise _fail(place, f".sweep.{key}: unknown axis/axes {bad}; valid: {axes}")
    for axis, span in sweep["range"].items():
        ok = isinstance(span, list) and len(span) == 2
        ok = ok and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in span)
        if not ok or not span[0] < span[1]:
            raise _fail(place, f".sweep.range.{axis}: expected [low, high] with low < high")
        outside = [v for v in sweep["values"][axis] if not span[0] <= v <= span[1]]
        if outside:
            raise _fail(place, f".sweep.range.{axis}: value(s) {outside} outside {span}")
    for point in grid_points(sweep["values"], axes):
        name = sweep_name(template, point)
        if name not in catalog["algorithms"]:
            raise _fail(
                place,
                f".sweep: algorithm {name!r} is not in the catalog (a catalog entry named "
                f"{template!r} with a `sweep` of these values defines it; nearest: "
                f"{', '.join(nearest(name, catalog['algorithms'])) or 'none'})",
            )


def grid_points(values: dict[str, list], axes: list[str]) -> list[dict[str, float]]:
    """Every point of the axes' cross product, first axis slowest."""
    return [
        dict(zip(axes, combo, strict=True))
        for combo in itertools.product(*(values[a] for a in axes))
    ]


def select_points(values: dict[str, list], axes: list[str], cap: int | None) -> list[dict]:
    """The points a scale draws: the full cross product, or with a `sweep_points` cap k smaller
    than it, k points spread evenly along the grid's diagonal (point j takes, on every axis, the
    value at index round(j (n - 1) / (k - 1)): the first and last values when k = 2)."""
    full = grid_points(values, axes)
    if cap is None or cap >= len(full):
        return full
    points: list[dict] = []
    for j in range(cap):
        frac = j / (cap - 1) if cap > 1 else 0.0
        point = {a: values[a][round(frac * (len(values[a]) - 1))] for a in axes}
        if point not in points:
            points.append(point)
    return points


def axis_range(sweep: dict, axis: str) -> tuple[float, float]:
    """The axis's drawn range: the sweep's `range`, else [min(0, smallest), largest value]."""
    if axis in sweep["range"]:
        lo, hi = sweep["range"][axis]
        return float(lo), float(hi)
    values = [float(v) for v in sweep["values"][axis]]
    lo, hi = min(0.0, min(values)), max(values)
    return (lo, hi) if hi > lo else (lo, lo + 1.0)


def _named_twins(
    catalog: dict, scale: str, cell: tuple[str, str, str], template: str, variants: list[str]
) -> dict[str, str]:
    """Sweep variant -> the first catalog entry outside the sweep that trains the same run in
    this cell (same algorithm with equal hyperparameters, equal training block), so a sweep's
    default point (pfedbred-mh-l15-e0.05 = pfedbred-mh-l15) reuses the tables' run instead of
    training it a second time under another name."""
    from fedbench.algorithms import build_algorithm

    pattern = re.escape(template)
    for field in sweep_fields(template):
        pattern = pattern.replace(re.escape("{" + field + "}"), ".+")

    def identity(name: str) -> tuple[str, str] | None:
        try:
            spec = resolve_run(catalog, scale, *cell, name, 0)
        except ConfigError:  # an entry that cannot run in this cell (e.g. too many clients)
            return None
        a = spec["algorithm"]
        algo = build_algorithm(a["algorithm"], **a["params"])
        return repr(algo), yaml.safe_dump(spec["training"], sort_keys=True)

    algos = catalog["algorithms"]
    kinds = {algos[v]["algorithm"] for v in variants}
    named: dict[tuple[str, str], str] = {}
    for name, entry in algos.items():
        if entry.get("algorithm") in kinds and not re.fullmatch(pattern, name):
            key = identity(name)
            if key is not None:
                named.setdefault(key, name)
    twins = {v: named.get(identity(v)) for v in variants}
    return {v: n for v, n in twins.items() if n is not None}


def parallel_points(
    grid: Grid, name: str, catalog: dict, scale: str
) -> dict[tuple[str, str], list[tuple[dict[str, Any], list[RunKey]]]]:
    """(row id, column id) -> (swept values, runs one per seed) per point a figure of kind
    'parallel' draws at this scale (the scale's caps.sweep_points may thin the grid)."""
    out = grid.output("figures", name)
    caps = catalog["scales"][scale].get("caps", {})
    seeds = output_seeds(grid, out, catalog, scale)
    result = {}
    for col in out["columns"]:
        sweep = column_sweep(out, col)
        axes = sweep_fields(sweep["algorithm"])
        points = select_points(sweep["values"], axes, caps.get("sweep_points"))
        dataset = choose_dataset(col["dataset"], catalog, scale)
        cell = (dataset, col["partition"], col["model"])
        variants = [sweep_name(sweep["algorithm"], point) for point in points]
        twins = _named_twins(catalog, scale, cell, sweep["algorithm"], variants)
        runs = [
            (point, [RunKey(*cell, twins.get(v, v), int(s)) for s in seeds])
            for point, v in zip(points, variants, strict=True)
        ]
        for row in out["rows"]:
            result[(row["id"], col["id"])] = runs
    return result


# ---------------------------------------------------------------------------------------------
# Drawing (was fedbench/report/parallel.py).
# Parallel-coordinates figures of a hyperparameter sweep (pFedBreD's Figures 5-8).
#
# Each panel is one (column, row) = (dataset-model, protocol) and draws one polyline per point of
# the sweep through the swept values and the point's accuracy (best round per run, mean over
# seeds), coloured by that accuracy on a fixed [0, 1] blue-to-red scale. Which points and runs a
# grid's figure of kind `parallel` draws is `fedbench.outputs.parallel`'s.


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
