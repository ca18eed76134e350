"""What tables and figures share: the rows × columns × run-dirs layout, its checks, the warnings."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from fedbench.metrics import PACK_STATS
from fedbench.report.collect import GLOBAL_TEST, TRAIN, VALUE, RunData, load_run

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


class LayoutError(ValueError):
    """A table or figure spec whose rows, columns, cells or quantity do not fit together."""


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


def check_layout(spec: CellLayout) -> None:
    """Check the quantity names, the scale and that every cell names a known row and column."""
    where = f"{spec.paper}/{spec.name}"
    if spec.scale not in SCALES:
        raise LayoutError(f"{where}: unknown scale {spec.scale!r}; valid: {list(SCALES)}")
    if spec.protocol in (GLOBAL_TEST, TRAIN):
        if spec.stat != VALUE:
            raise LayoutError(f"{where}: protocol {spec.protocol!r} needs stat 'value'")
    elif spec.stat not in PACK_STATS:
        raise LayoutError(f"{where}: unknown stat {spec.stat!r}; valid: {list(PACK_STATS)}")
    row_ids = _ids(f"{where} rows", spec.rows)
    col_ids = _ids(f"{where} columns", spec.columns)
    for row, col in spec.cells:
        if row not in row_ids or col not in col_ids:
            raise LayoutError(
                f"{where}: cell ({row}, {col}) names an unknown row or column; "
                f"rows: {row_ids}; columns: {col_ids}"
            )


def load_cells(spec: CellLayout) -> dict[tuple[str, str], list[RunData]]:
    """Read every cell's runs; a cell's runs must differ only by seed and match the spec's scale."""
    cache: dict[Path, RunData] = {}
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


def warning_lines(scale: str, standin: bool) -> list[str]:
    """The loud lines a table or figure must carry: stand-in data, reduced scale."""
    out = [STANDIN_NOTE] if standin else []
    if scale in SCALE_NOTES:
        out.append(SCALE_NOTES[scale])
    return out


def quantity_label(spec: CellLayout, percent: bool) -> str:
    """E.g. 'top1 (protocol global, stat wmean), in %'."""
    text = f"{spec.metric} (protocol {spec.protocol}, stat {spec.stat})"
    return text + (", in % (×100)" if percent else "")
