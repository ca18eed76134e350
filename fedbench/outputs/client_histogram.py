"""Histograms of the clients' final values (kind `client_histogram`, DQN-Fed's Figure 2): rows x
columns of cells like a curve figure (one histogram per row, one panel per column), a per-client
metric and protocol (a row may set its own protocol: Ditto's personal models), `bins` equal bins,
`binning` numpy (the default) or right_closed (the q-FFL release's, DQN-Fed's Figure 2).
Drawn below (Drawing)."""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from fedbench.cells import Grid, axis_entry, column_labels, run_folders, spec_header
from fedbench.config import ConfigError
from fedbench.outputs.matrix import MatrixKind
from fedbench.report.collect import GLOBAL_TEST, RUN, SERVER, TRAIN, RunData, client_values
from fedbench.report.figures import save_figure
from fedbench.report.layout import (
    SCALES,
    LayoutError,
    any_standin,
    base_scale,
    is_accuracy,
    load_cells,
    metric_name,
    precision_note,
    protocol_words,
    row_styles,
    shared_legend,
    value_scale,
    warning_lines,
)

DEFAULT_BINS = 20


class ClientHistogramKind(MatrixKind):
    name = "client_histogram"
    section = "figures"
    keys = (
        "caption",
        "kind",
        "metric",
        "protocol",
        "percent",
        "rows",
        "columns",
        "seeds",
        "bins",
        "binning",
    )
    about = "a figure of kind 'client_histogram' (the clients' final values, binned)"

    def required(self, out: dict[str, Any]) -> tuple[str, ...]:
        return ("metric", "protocol", "rows", "columns")

    def check_own(self, where: str, out: dict[str, Any], catalog: dict) -> None:
        bins = out.get("bins", DEFAULT_BINS)
        if isinstance(bins, bool) or not (isinstance(bins, int) and 1 <= bins <= MAX_BINS):
            raise ConfigError(f"{where}.bins: expected an integer in 1..{MAX_BINS}, got {bins!r}")
        binning = out.get("binning", "numpy")
        if binning not in BINNINGS:
            raise ConfigError(f"{where}.binning: expected one of {list(BINNINGS)}, got {binning!r}")
        for entry in (out, *out.get("rows", []), *out.get("columns", [])):
            place = where if entry is out else f"{where} entry {entry.get('id')!r}"
            if entry is not out and "metric" in entry:
                raise ConfigError(
                    f"{place}.metric: the panels share one x axis; set metric on the figure only"
                )
            if "stat" in entry:
                raise ConfigError(
                    f"{place}.stat: a histogram bins every client's value; it takes no stat"
                )
            if entry.get("protocol") in NOT_PER_CLIENT:
                raise ConfigError(
                    f"{place}.protocol: {entry['protocol']!r} has no per-client values; "
                    "use a per-client protocol (global, personal, ...)"
                )

    def spec(self, grid: Grid, name: str, catalog: dict, scale: str) -> HistogramSpec:
        out = grid.output(self.section, name)
        return HistogramSpec(
            **spec_header(grid, self.section, name, scale),
            metric=str(out["metric"]),
            protocol=str(out["protocol"]),
            percent=bool(out.get("percent", False)),
            rows=[axis_entry(r) for r in out["rows"]],
            columns=column_labels(grid, self.section, name, catalog, scale),
            cells=run_folders(self.runs(grid, name, catalog, scale), scale),
            bins=int(out.get("bins", DEFAULT_BINS)),
            binning=str(out.get("binning", "numpy")),
        )

    def render(self, spec: HistogramSpec, out_prefix: Path) -> list[Path]:
        return write_client_histogram(spec, out_prefix)


# ---------------------------------------------------------------------------------------------
# Drawing (was fedbench/report/client_histogram.py).
# Histograms of the clients' final values (kind `client_histogram`; DQN-Fed's Figure 2, B.8): one
# panel per column, one translucent histogram per row. Each finished run contributes every client
# of its final evaluated round; the seeds' clients are pooled and the counts divided by the
# number of seeds (seed-averaged clients per bin). A diverged run is left out and counted in the
# legend.
#
# `binning` says which edge a bin holds: `numpy` (np.histogram's [a, b), the last bin [a, b]) or
# `right_closed` (the q-FFL release's plot_fairness.py, get_bar_y: a value v counts in the bin with
# a < v <= b, so a value on the lowest edge, an accuracy of 0, is never counted).


PANEL_SIZE = (4.2, 3.2)
CHARS_PER_INCH = 10
MAX_BINS = 200
BINNINGS = ("numpy", "right_closed")
BINNING_WORDS = {
    "numpy": "bins [a, b), the last [a, b]",
    "right_closed": "bins (a, b] as the q-FFL release counts them; a value on the lowest edge is "
    "not counted",
}
# Protocols without one value per client: nothing to histogram.
NOT_PER_CLIENT = (GLOBAL_TEST, TRAIN, SERVER, RUN)


@dataclass(frozen=True)
class HistogramSpec:
    """rows: the histograms of a panel ({id, label, protocol?}); columns: the panels; cells:
    (row id, column id) -> the run directories (one per seed). Accuracy-like metrics bin [0, 1]
    (×100 with `percent`); any other metric bins the range its values span."""

    paper: str
    name: str
    caption: str
    metric: str
    protocol: str
    percent: bool
    rows: list[dict]
    columns: list[dict]
    cells: dict[tuple[str, str], list[Path]]
    scale: str
    bins: int = 20
    binning: str = "numpy"

    def __post_init__(self) -> None:
        """Reject an unknown scale, a bad bin count or binning, a protocol without per-client
        values, a repeated id or a cell outside the rows × columns."""
        where = f"{self.paper}/{self.name}"
        if base_scale(self.scale) not in SCALES:
            raise LayoutError(f"{where}: unknown scale {self.scale!r}; valid: {list(SCALES)}")
        if self.binning not in BINNINGS:
            raise LayoutError(
                f"{where}: binning must be one of {list(BINNINGS)}, got {self.binning!r}"
            )
        if isinstance(self.bins, bool) or not isinstance(self.bins, int):
            raise LayoutError(f"{where}: bins must be an integer in 1..{MAX_BINS}")
        if not 1 <= self.bins <= MAX_BINS:
            raise LayoutError(f"{where}: bins must be in 1..{MAX_BINS}, got {self.bins}")
        ids = {}
        for axis in ("rows", "columns"):
            ids[axis] = [str(e["id"]) for e in getattr(self, axis)]
            if len(set(ids[axis])) != len(ids[axis]):
                raise LayoutError(f"{where}: repeated {axis[:-1]} id(s) in {ids[axis]}")
        for row in self.rows:
            for col in self.columns:
                p = cell_protocol(self, row, col)
                if p in NOT_PER_CLIENT:
                    raise LayoutError(
                        f"{where}: cell ({row['id']}, {col['id']}) reads protocol {p!r}, which "
                        "has no per-client values to histogram"
                    )
        for row, col in self.cells:
            if row not in ids["rows"] or col not in ids["columns"]:
                raise LayoutError(
                    f"{where}: cell ({row}, {col}) names an unknown row or column; "
                    f"rows: {ids['rows']}; columns: {ids['columns']}"
                )


def cell_protocol(spec: HistogramSpec, row: dict, col: dict) -> str:
    """The row's protocol if set (Ditto's personal models), else the column's, else the spec's."""
    return str(row.get("protocol") or col.get("protocol") or spec.protocol)


def final_client_values(run: RunData, protocol: str, metric: str) -> list[float]:
    """Every client's `metric` under `protocol` at the run's final evaluated round."""
    last = run.ok_records[-1]
    values = client_values(last, protocol, metric)
    if values is None:
        raise LayoutError(
            f"{run.run_dir}: no per-client {protocol}/{metric} at the final round "
            f"{last['round']} (protocols there: {sorted(last['clients'])})"
        )
    return [math.nan if v is None else float(v) for v in values]


@dataclass(frozen=True)
class CellCounts:
    """One row's histogram in one panel: the pooled clients' values, the seed-averaged count per
    bin, how many finished seeds were pooled and how many runs diverged."""

    values: np.ndarray
    counts: np.ndarray
    seeds: int
    diverged: int


def histogram_counts(
    spec: HistogramSpec, cells: dict[tuple[str, str], list[RunData]] | None = None
) -> tuple[np.ndarray, dict[tuple[str, str], CellCounts]]:
    """(bin edges shared by every panel, (row id, column id) -> CellCounts)."""
    cells = load_cells(spec) if cells is None else cells
    scale = value_scale(spec.metric, spec.percent)
    pooled: dict[tuple[str, str], tuple[np.ndarray, int, int]] = {}
    for row in spec.rows:
        for col in spec.columns:
            key = (str(row["id"]), str(col["id"]))
            runs = cells.get(key, [])
            ok = [r for r in runs if r.status == "ok"]
            protocol = cell_protocol(spec, row, col)
            vals = [v * scale for r in ok for v in final_client_values(r, protocol, spec.metric)]
            arr = np.asarray(vals, dtype=np.float64)
            pooled[key] = (arr[np.isfinite(arr)], len(ok), len(runs) - len(ok))
    edges = _edges(spec, [v for v, _, _ in pooled.values()], scale)
    out = {}
    for key, (vals, seeds, diverged) in pooled.items():
        counts = bin_counts(vals, edges, spec.binning)
        out[key] = CellCounts(vals, counts / seeds if seeds else counts, seeds, diverged)
    return edges, out


def bin_counts(values: np.ndarray, edges: np.ndarray, binning: str) -> np.ndarray:
    """How many values fall in each bin of `edges` under `binning` (see the module docstring)."""
    if binning == "numpy":
        return np.histogram(values, bins=edges)[0].astype(np.float64)
    if binning != "right_closed":
        raise ValueError(f"binning must be one of {list(BINNINGS)}, got {binning!r}")
    j = np.searchsorted(edges, values, side="left") - 1  # edges[j] < v <= edges[j + 1]
    j = j[(j >= 0) & (j < len(edges) - 1)]
    return np.bincount(j, minlength=len(edges) - 1).astype(np.float64)


def _edges(spec: HistogramSpec, values: list[np.ndarray], scale: float) -> np.ndarray:
    """`bins` equal bins over [0, 1] × scale for an accuracy, else over the values' span."""
    if is_accuracy(spec.metric):
        lo, hi = 0.0, scale
    else:
        seen = np.concatenate([v for v in values if len(v)] or [np.zeros(1)])
        lo, hi = float(seen.min()), float(seen.max())
        hi = hi if hi > lo else lo + 1.0
    return np.linspace(lo, hi, spec.bins + 1)


def make_histogram_figure(spec: HistogramSpec) -> Figure:
    """The matplotlib figure (not saved): one panel per column, one histogram per row."""
    cells = load_cells(spec)
    edges, counts = histogram_counts(spec, cells)
    n = len(spec.columns)
    width = max(6.0, PANEL_SIZE[0] * n)
    fig = Figure(figsize=(width, PANEL_SIZE[1] + 1.4), layout="constrained")
    axes = fig.subplots(1, n, sharey=True, squeeze=False)[0]
    styles = row_styles(spec.rows)
    for ax, col in zip(axes, spec.columns, strict=True):
        for row in spec.rows:
            c = counts[(str(row["id"]), str(col["id"]))]
            if not c.seeds and not c.diverged:
                continue
            color = styles[str(row["id"])]["color"]
            label = f"{row['label']} ({c.seeds} seed{'s' if c.seeds != 1 else ''})"
            if c.diverged:
                label += f" [{c.diverged} diverged]"
            ax.stairs(c.counts, edges, fill=True, color=color, alpha=0.3)
            ax.stairs(c.counts, edges, color=color, lw=1.4, label=label)
        ax.set_title(str(col["label"]))
        percent = value_scale(spec.metric, spec.percent) != 1.0
        ax.set_xlabel(metric_name(spec.metric) + (" (%)" if percent else ""))
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("Clients per bin (mean over seeds)")
    shared_legend(fig, axes)
    protocols = sorted({cell_protocol(spec, r, c) for r in spec.rows for c in spec.columns})
    title = [
        f"{spec.paper} {spec.name}: {spec.caption}",
        f"each client's {metric_name(spec.metric)} at the run's final evaluated round; "
        + "; ".join(f"protocol {p}: {protocol_words(p)}" for p in protocols),
        f"scale {spec.scale}; {spec.bins} equal bins over [{edges[0]:g}, {edges[-1]:g}] "
        f"({BINNING_WORDS[spec.binning]}); every "
        "finished seed's clients pooled, counts divided by the number of seeds; diverged runs "
        "left out",
        *(f"Precision: {note}" for note in [precision_note(cells)] if note),
        *(f"WARNING: {w}" for w in warning_lines(spec.scale, any_standin(cells))),
    ]
    chars = int(width * CHARS_PER_INCH)
    fig.suptitle("\n".join(textwrap.fill(t, chars) for t in title), fontsize="medium")
    return fig


def write_client_histogram(spec: HistogramSpec, out_prefix: str | Path) -> list[Path]:
    """Write out_prefix.png and .pdf atomically; return their paths."""
    return save_figure(make_histogram_figure(spec), out_prefix)
