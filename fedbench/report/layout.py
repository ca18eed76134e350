"""What tables and figures share: the rows × columns × run-dirs layout, its checks, the warnings
(and the curve figures' one legend)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from fedbench.metrics import PACK_STATS
from fedbench.metrics.distribution import UNSCALED_STATS, VECTOR_STATS, client_stat
from fedbench.report.collect import (
    GLOBAL_TEST,
    RUN,
    RUN_METRICS,
    SERVER,
    TRAIN,
    VALUE,
    RunData,
    load_run,
)

SCALES = ("paper", "quick", "smoke")
STANDIN_NOTE = (
    "computed from GENERATED STAND-IN data, not the real dataset: "
    "numbers are not comparable to the paper"
)
SCALE_NOTES = {
    "quick": "small-scale run: reduced clients/rounds, not the paper's setting",
    "smoke": "smoke-scale run: a few rounds for CI, a pipeline check, not the paper's setting",
}
CONFIG_KEYS = ("scale", "dataset", "partition", "model", "algorithm")
# What a row or column entry may override of the spec-wide quantity (row first, then column).
QUANTITY_KEYS = ("metric", "protocol", "stat")
# Derived protocols whose meaning every output must spell out.
PROTOCOL_NOTES = {
    "best_lambda": "best λ per client, chosen on the client's test split (optimistic)",
    "val_lambda": (
        "λ per client chosen by top-1 on a validation part of the client's training data "
        "(ties: smallest λ), its test-split metrics"
    ),
    SERVER: "a scalar the algorithm's server logs at each evaluation round, not a client metric",
    RUN: (
        "a number each run writes to its run.yaml once (train_seconds: wall-clock seconds of all "
        "rounds, training and evaluation, not data loading; median_round_seconds: the median "
        "round), so it depends on the machine and its load"
    ),
}


class LayoutError(ValueError):
    """A table or figure spec whose rows, columns, cells or quantity do not fit together."""


@dataclass(frozen=True)
class Quantity:
    """What one cell reads from each run: summary[protocol][metric][stat]."""

    metric: str
    protocol: str
    stat: str

    def __str__(self) -> str:
        return f"{self.protocol}/{self.metric}/{self.stat}"


class CellLayout(Protocol):
    """The fields TableSpec and FigureSpec share."""

    paper: str
    name: str
    metric: str
    protocol: str
    stat: str
    rows: list[dict]
    columns: list[dict]
    cells: dict[tuple[str, str], list[Path]]
    scale: str


def _ids(where: str, entries: list[dict]) -> list[str]:
    """The ids of rows or columns, checked to be present, labelled and unique."""
    ids = []
    for i, e in enumerate(entries):
        if not isinstance(e, dict) or "id" not in e or "label" not in e:
            raise LayoutError(f"{where}[{i}] must be a mapping with 'id' and 'label', got {e!r}")
        ids.append(str(e["id"]))
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise LayoutError(f"{where}: repeated id(s) {dup}")
    return ids


def is_accuracy(metric: str) -> bool:
    """Accuracy-like metrics in [0, 1] (top1, top5, ..., auroc) are the only ones `percent`
    scales (papers print AUROC x 100 beside accuracies)."""
    return metric.startswith("top") or metric == "auroc"


def value_scale(metric: str, percent: bool, stat: str | None = None) -> float:
    """100 for an accuracy metric in a percent table or figure, else 1 (also for a scale-free
    stat: Angle, KL)."""
    return 100.0 if percent and is_accuracy(metric) and stat not in UNSCALED_STATS else 1.0


def _override(entry: dict, key: str) -> Any:
    """A row's or column's override of one quantity field (None when unset)."""
    value = entry.get(key)
    return None if value is None else str(value)


def cell_quantity(spec: CellLayout, row: dict, col: dict) -> Quantity:
    """Each field: the row's value if set, else the column's, else the spec's."""
    fields = {}
    for key in QUANTITY_KEYS:
        values = (_override(row, key), _override(col, key), str(getattr(spec, key)))
        fields[key] = next(v for v in values if v is not None)
    return Quantity(**fields)


def cell_quantities(spec: CellLayout) -> dict[tuple[str, str], Quantity]:
    """(row id, column id) -> the cell's quantity, for every row × column."""
    return {
        (str(row["id"]), str(col["id"])): cell_quantity(spec, row, col)
        for row in spec.rows
        for col in spec.columns
    }


def _check_quantity(where: str, q: Quantity | CellLayout) -> None:
    """A stat the protocol has: 'value' for global_test/train, a pack stat otherwise."""
    if not q.metric:
        raise LayoutError(f"{where}: empty metric")
    if q.protocol in (GLOBAL_TEST, TRAIN, SERVER, RUN):
        if q.stat != VALUE:
            raise LayoutError(f"{where}: protocol {q.protocol!r} needs stat 'value'")
        if q.protocol == RUN and q.metric not in RUN_METRICS:
            raise LayoutError(
                f"{where}: protocol {RUN!r} reads run.yaml's {list(RUN_METRICS)}, not {q.metric!r}"
            )
    elif q.stat not in (*PACK_STATS, *VECTOR_STATS) and client_stat(q.stat) is None:
        raise LayoutError(
            f"{where}: unknown stat {q.stat!r}; valid: {list(PACK_STATS) + list(VECTOR_STATS)} "
            "or client<k> (client id k's own value)"
        )


def check_layout(spec: CellLayout) -> None:
    """Check the quantity names (spec-wide and per cell), the scale and the cells' rows/columns."""
    where = f"{spec.paper}/{spec.name}"
    if base_scale(spec.scale) not in SCALES:
        raise LayoutError(
            f"{where}: unknown scale {spec.scale!r}; valid: {list(SCALES)}, or one of them "
            "with a suffix (quick-bf16)"
        )
    _check_quantity(where, spec)
    row_ids = _ids(f"{where} rows", spec.rows)
    col_ids = _ids(f"{where} columns", spec.columns)
    for (row, col), q in cell_quantities(spec).items():
        _check_quantity(f"{where} cell ({row}, {col}) {q}", q)
    for row, col in spec.cells:
        if row not in row_ids or col not in col_ids:
            raise LayoutError(
                f"{where}: cell ({row}, {col}) names an unknown row or column; "
                f"rows: {row_ids}; columns: {col_ids}"
            )


def load_cells(
    spec: CellLayout, preloaded: dict[Path, RunData] | None = None
) -> dict[tuple[str, str], list[RunData]]:
    """Read every cell's runs; a cell's runs must differ only by seed and match the spec's scale.

    `preloaded` maps run directories to runs already in hand (e.g. rebuilt from a run record by
    `fedbench.report.runs`); those directories are not read."""
    cache: dict[Path, RunData] = {Path(d): run for d, run in (preloaded or {}).items()}
    out: dict[tuple[str, str], list[RunData]] = {}
    for cell, run_dirs in spec.cells.items():
        runs = []
        for d in run_dirs:
            d = Path(d)
            if d not in cache:
                cache[d] = load_run(d)
            runs.append(cache[d])
        where = f"{spec.paper}/{spec.name} cell {cell}"
        for run in runs:
            if run.key["scale"] != spec.scale:
                raise LayoutError(
                    f"{where}: run {run.run_dir} is at scale {run.key['scale']!r}, "
                    f"the table is at scale {spec.scale!r}"
                )
        configs = {tuple(r.key[k] for k in CONFIG_KEYS) for r in runs}
        if len(configs) > 1:
            raise LayoutError(f"{where}: runs differ by more than the seed: {sorted(configs)}")
        seeds = [r.key["seed"] for r in runs]
        if len(set(seeds)) != len(seeds):
            raise LayoutError(f"{where}: a seed appears twice: {seeds}")
        out[cell] = runs
    return out


def any_standin(cells: dict[Any, list[RunData]]) -> bool:
    """True when any run in the layout trained on generated stand-in data."""
    return any(run.standin for runs in cells.values() for run in runs)


def precision_note(cells: dict[Any, list[RunData]]) -> str:
    """'' when every run trained in float32; else the precision(s) and, when they differ, which
    cells ran in which (their differences then include rounding, not only the method)."""
    where: dict[str, list[str]] = {}
    for cell, runs in cells.items():
        for p in sorted({r.precision for r in runs}):
            where.setdefault(p, []).append(
                "/".join(map(str, cell)) if isinstance(cell, tuple) else str(cell)
            )
    if set(where) <= {"fp32"}:
        return ""
    if len(where) == 1:
        return (
            f"every run trained in {next(iter(where))} (training.precision; evaluation "
            "float32 unless eval_precision says otherwise)"
        )
    parts = "; ".join(f"{p}: {', '.join(c)}" for p, c in sorted(where.items()))
    return (
        "runs of different precisions (training.precision), so the cells' differences include "
        f"rounding, not only the methods: {parts}"
    )


def base_scale(scale: str) -> str:
    """The scale a variant is of: quick-bf16 -> quick (the part before the first '-')."""
    return scale.split("-", 1)[0]


def warning_lines(scale: str, standin: bool) -> list[str]:
    """The loud lines a table or figure must carry: stand-in data, reduced scale."""
    out = [STANDIN_NOTE] if standin else []
    if base_scale(scale) in SCALE_NOTES:
        out.append(SCALE_NOTES[base_scale(scale)])
    return out


def quantity_label(q: Quantity | CellLayout, percent: bool) -> str:
    """E.g. 'top1 (protocol global, stat wmean), in % (×100)'; only accuracies get the %."""
    text = f"{q.metric} (protocol {q.protocol}, stat {q.stat})"
    return text + (", in % (×100)" if value_scale(q.metric, percent, q.stat) != 1.0 else "")


# Plain words for figures (axis labels and the title line that explains them); tables and CSVs keep
# the code names (quantity_label).
METRIC_NAMES = {
    "loss": "Loss",
    "ece": "Expected calibration error (ECE)",
    "mce": "Maximum calibration error (MCE)",
    "auroc": "AUROC",
    "improved_clients": "Clients not made worse (share, ρ_t)",
    "train_seconds": "Wall-clock seconds of all rounds",
    "median_round_seconds": "Median seconds a round",
}
STAT_WORDS = {
    "mean": "mean over clients",
    "wmean": "sample-weighted mean over clients",
    "std": "standard deviation across clients (population)",
    "min": "the lowest client's value",
    "max": "the highest client's value",
    "worst10": "mean of the lowest 10% of clients",
    "best10": "mean of the highest 10% of clients",
    "gini": "Gini coefficient across clients (0 = all equal)",
    "worst10_release": "sample-weighted mean of the lowest floor(K/10) clients (AAggFF release)",
    "best10_release": "sample-weighted mean of the highest floor(K/10) clients (AAggFF release)",
    "worst5_qffl": "mean of the lowest max(1, int(0.05 K)) clients (q-FFL code)",
    "best5_qffl": "mean of the highest max(1, int(0.05 K)) clients (q-FFL code)",
    "worst10_qffl": "mean of the lowest max(1, int(0.1 K)) clients (q-FFL code)",
    "best10_qffl": "mean of the highest max(1, int(0.1 K)) clients (q-FFL code)",
    "angle": "angle (degrees) between the clients' values and the all-ones vector",
    "kl": "KL divergence of the normalised client values from uniform",
}
# Stats that turn a level into a spread: the axis names them.
AXIS_STATS = {"std": "std across clients", "gini": "Gini coefficient across clients"}
PROTOCOL_WORDS = {
    "global": "the global model on each client's test split",
    "personal": "each client's personalised model on its test split",
    GLOBAL_TEST: "the global model on the pooled test set",
    TRAIN: (
        "the round's training clients (loss: their mean training loss; improved_clients: the "
        "share whose full training loss the round did not increase, ρ_t)"
    ),
    SERVER: "a scalar the algorithm's server logs",
    RUN: "the run's run.yaml",
    "best_lambda": "each client's best λ on its test split",
    "val_lambda": "each client's λ chosen on a validation split",
}
# Per row of a curve figure, so lines that coincide stay apart: ":" is kept for diverged runs.
LINE_STYLES = ("-", "--", "-.", (0, (6, 1.5, 1, 1.5, 1, 1.5)))
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
MARKS_PER_LINE = 8


def metric_name(metric: str) -> str:
    """'Top-1 accuracy' for top1, 'Loss', ...; any other name (a server scalar) as it is."""
    top = re.fullmatch(r"top(\d+)", metric)
    return f"Top-{top.group(1)} accuracy" if top else METRIC_NAMES.get(metric, metric)


def protocol_words(protocol: str) -> str:
    """What a protocol evaluates, in words."""
    lam = re.fullmatch(r"lambda(\d+(?:\.\d+)?)", protocol)
    if lam:
        return f"the mixed model (1−λ)θ^g + λθ^l at λ = {lam.group(1)}"
    return PROTOCOL_WORDS.get(protocol, f"protocol {protocol}")


def axis_label(metric: str, stat: str, percent: bool) -> str:
    """A figure's value axis in plain words, e.g. 'Top-1 accuracy (%)'; a spread stat is named
    ('Top-1 accuracy, std across clients (%)'); protocol and stat are the title's to explain."""
    text = metric_name(metric) + (f", {AXIS_STATS[stat]}" if stat in AXIS_STATS else "")
    if value_scale(metric, percent) != 1.0:
        text += " (×100)" if stat == "gini" else " (%)"
    return text


def axis_note(spec: CellLayout, percent: bool) -> str:
    """The title line saying what the value axis shows, in words (a figure's reader needs no
    code names: the grid's protocol and stat keys are in its spec, the words here)."""
    label = axis_label(spec.metric, spec.stat, percent)
    stat = f", {STAT_WORDS[spec.stat]}" if spec.stat in STAT_WORDS else ""
    by, where = variation(spec, "protocol")
    if by == "table":
        (protocol,) = where or [spec.protocol]
        joiner = ", " if protocol in (SERVER, TRAIN) else " of "
        words = protocol_words(protocol)
        return f"y axis: {label}{joiner}{words}{stat}"
    place = "after each panel's title" if by == "column" else "after each line's name"
    legend = "; ".join(f"{p} = {protocol_words(p)}" for p in where)
    return f"y axis: {label}{stat}; protocol per {by}, in brackets {place}: {legend}"


def row_styles(rows: list[dict], ms: float = 4.5) -> dict[str, dict[str, Any]]:
    """Row id -> color, line style and marker (size `ms`), distinct per row (up to 40 rows), so
    a line drawn exactly over another still shows: another dash, another marker, every other
    row's marker hollow and larger (a filled marker shows inside a hollow one drawn over it)."""
    return {
        str(row["id"]): {
            "color": f"C{i % 10}",
            "ls": LINE_STYLES[i % len(LINE_STYLES)],
            "marker": MARKERS[i % len(MARKERS)],
            **({"ms": 1.7 * ms, "mfc": "none", "mew": 1.1} if i % 2 else {"ms": ms}),
        }
        for i, row in enumerate(rows)
    }


def marker_every(points: int, row: int, rows: int) -> tuple[int, int]:
    """(start, step) for matplotlib's `markevery`: about MARKS_PER_LINE markers on a line, each
    row's at other points than its neighbours' (row `row` of `rows` starts `row` points later)."""
    step = max(1, round(points / MARKS_PER_LINE), min(rows, points // 4))
    return min(row % step, max(points - 1, 0)), step


def variation(spec: CellLayout, key: str) -> tuple[str, dict[str, list[str]]]:
    """How one quantity field varies: ('table'|'row'|'column'|'cell', value -> where it holds)."""
    grid = [[getattr(cell_quantity(spec, r, c), key) for c in spec.columns] for r in spec.rows]
    values = {v for line in grid for v in line}
    if len(values) <= 1:
        return "table", {v: [] for v in values}
    out: dict[str, list[str]] = {}
    if all(len(set(line)) == 1 for line in grid):
        for row, line in zip(spec.rows, grid, strict=True):
            out.setdefault(line[0], []).append(str(row["label"]))
        return "row", out
    columns = list(zip(*grid, strict=True))
    if all(len(set(line)) == 1 for line in columns):
        for col, line in zip(spec.columns, columns, strict=True):
            out.setdefault(line[0], []).append(str(col["label"]))
        return "column", out
    for row, line in zip(spec.rows, grid, strict=True):
        for col, v in zip(spec.columns, line, strict=True):
            out.setdefault(v, []).append(f"({row['label']}, {col['label']})")
    return "cell", out


def quantity_lines(spec: CellLayout, percent: bool) -> list[tuple[str, str]]:
    """(key, text) header lines naming the quantity: one line when it is the same everywhere,
    else which fields vary by row/column/cell and a legend line per varying field."""
    quantities = set(cell_quantities(spec).values()) or {
        Quantity(spec.metric, spec.protocol, spec.stat)
    }
    metrics = sorted({q.metric for q in quantities})
    lines = []
    if len(quantities) == 1:
        (q,) = quantities
        lines.append(("Quantity", quantity_label(q, percent)))
    else:
        how = {key: variation(spec, key) for key in QUANTITY_KEYS}
        varying = [f"{k} by {how[k][0]}" for k in QUANTITY_KEYS if how[k][0] != "table"]
        fixed = [f"{k} {next(iter(how[k][1]))}" for k in QUANTITY_KEYS if how[k][0] == "table"]
        text = "varies per cell: " + ", ".join(varying)
        if fixed:
            text += "; " + ", ".join(fixed)
        lines.append(
            ("Quantity", text + " (legend follows; each cell's in the CSV's quantity column)")
        )
        for key in QUANTITY_KEYS:
            kind, where = how[key]
            if kind != "table":
                legend = "; ".join(f"{v}: {', '.join(labels)}" for v, labels in where.items())
                lines.append((f"{key.capitalize()} by {kind}", legend))
    if percent and (len(quantities) > 1 or not is_accuracy(metrics[0])):
        others = [m for m in metrics if not is_accuracy(m)]
        text = "accuracy metrics (names starting with 'top') and auroc in % (×100)"
        if others:
            text += f"; other metrics ({', '.join(others)}) not scaled"
        lines.append(("Percent", text))
    return lines


def protocol_notes(protocols: set[str] | list[str]) -> list[str]:
    """'protocol p: meaning' for every derived protocol used."""
    return [
        f"protocol {p}: {PROTOCOL_NOTES[p]}" for p in sorted(set(protocols)) if p in PROTOCOL_NOTES
    ]


def shared_legend(fig: Any, axes: Iterable[Any]) -> None:
    """One legend below a figure's panels: each label once, with its first handle; none if none."""
    legend: dict[str, object] = {}
    for ax in axes:
        for handle, text in zip(*ax.get_legend_handles_labels(), strict=True):
            legend.setdefault(text, handle)
    if legend:
        fig.legend(
            list(legend.values()),
            list(legend),
            loc="outside lower center",
            ncols=min(len(legend), 5),
            fontsize="small",
        )
