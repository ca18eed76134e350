"""The three readings of a claim: the paper's own printed values, our runs at paper scale, our
runs at small scale (the quick grid's analogue).

Our values are read as the tables read them: the grid's table spec (`fedbench.grid.output_spec`,
the same rows, columns, quantities, round and runs) and `fedbench.report.tables.seed_values`
(each cell's value per seed, summary columns per seed), restricted to the runs that have
finished; a computed table (`ComputedTableSpec`) gives exact values. Where none of a table's runs
is here, its committed record is read instead (`RECORDS`: a `fedbench record --cells-out` file,
each cell's value per seed as the table read it when the record was made), and the reading says
so.
"""

from __future__ import annotations

import csv
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fedbench.cells import Grid
from fedbench.claims.forms import Cell, Comparison, Test
from fedbench.claims.load import printed_cell
from fedbench.claims.stats import (
    NO_VALUES,
    NOT_RUN,
    Interval,
    combine,
    interval_verdict,
    printed_verdict,
    t_interval,
    welch_interval,
)
from fedbench.papers import PaperValues

EXACT = None  # the "seed" of a computed (closed-form) value
# Committed records of paper-scale runs (docs/reproductions/*_cells.csv in a checkout): what a
# claim reads where a table's runs are not on this machine.
RECORDS = Path(__file__).resolve().parents[2] / "docs" / "reproductions"
CELLS_SUFFIX = "_cells.csv"
CELLS_COLUMNS = ("grid", "table", "scale", "row", "column", "seed", "value")


@dataclass(frozen=True)
class TableRead:
    """One table's values per cell and seed ({EXACT: v} for a computed table), the run folders
    it still waits for, why it could not be read at all (`error`), and the committed record
    its values come from when its runs are not here (`record`)."""

    name: str
    values: dict[tuple[str, str], dict[int | None, float]] = field(default_factory=dict)
    missing: tuple[str, ...] = ()
    error: str = ""
    record: str = ""


@dataclass(frozen=True)
class Result:
    """One comparison's verdict and its numbers: the printed Δ, or our interval of Δ."""

    label: str
    verdict: str
    delta: float | None = None
    interval: Interval | None = None
    why: str = ""


@dataclass(frozen=True)
class Reading:
    """A claim's verdict in one reading, with each comparison's."""

    verdict: str
    results: tuple[Result, ...] = ()
    why: str = ""

    @property
    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.results:
            out[r.verdict] = out.get(r.verdict, 0) + 1
        return out


def _combine_tests(tests: tuple[Test, ...], verdict_of) -> tuple[str, list[Result]]:
    """Every test must hold; within a test, its groups by its quantifier, each group's
    comparisons by the group's. Each result's label starts with its table."""
    results, test_verdicts = [], []
    for test in tests:
        group_verdicts = []
        for group in test.groups:
            rs = [
                dataclasses.replace(r, label=f"{c.cells[0].table}: {r.label}")
                for c in group.comparisons
                for r in [verdict_of(c)]
            ]
            results += rs
            group_verdicts.append(combine([r.verdict for r in rs], group.quantifier))
        test_verdicts.append(combine(group_verdicts, test.quantifier))
    return combine(test_verdicts, "every"), results


def read_printed(tests: tuple[Test, ...], grid: Grid, printed: PaperValues) -> Reading:
    """The claim on the paper's own printed numbers: each comparison holds or fails."""
    if not tests:
        return Reading(NO_VALUES, why="no table tests the claim")
    if not len(printed):
        return Reading(NO_VALUES, why="the work prints no table values")

    def verdict_of(c: Comparison) -> Result:
        values = [printed_cell(grid, printed, cell) for cell in c.cells]
        if any(v is None for v in values):
            return Result(c.label, NO_VALUES, why="the paper prints no value here")
        delta = c.delta([v.value for v in values])
        return Result(c.label, printed_verdict(delta, c.strict), delta=delta)

    verdict, results = _combine_tests(tests, verdict_of)
    return Reading(verdict, tuple(results))


def comparison_result(c: Comparison, values: dict[Cell, dict[int | None, float]]) -> Result:
    """One comparison over our runs: paired by seed where the cells share 2+ seeds, else Welch
    for a linear Δ, exact for computed cells; not run (saying why) otherwise."""
    per_cell = [values.get(cell, {}) for cell in c.cells]
    empty = [str(cell) for cell, v in zip(c.cells, per_cell) if not v]
    if empty:
        return Result(c.label, NOT_RUN, why=f"no finished run in {', '.join(empty)}")
    if all(EXACT in v for v in per_cell):
        delta = c.delta([v[EXACT] for v in per_cell])
        iv = Interval(1, delta, delta, delta, "exact (computed)")
        return Result(c.label, interval_verdict(iv, c.strict), delta=delta, interval=iv)
    common = sorted(set.intersection(*(set(v) for v in per_cell)) - {EXACT})
    if len(common) >= 2:
        iv = t_interval([c.delta([v[s] for v in per_cell]) for s in common])
        return Result(c.label, interval_verdict(iv, c.strict), interval=iv)
    if c.linear is not None and all(len(v) >= 2 for v in per_cell):
        coefs, const = c.linear
        iv = welch_interval([(k, list(v.values())) for k, v in zip(coefs, per_cell)], const)
        return Result(c.label, interval_verdict(iv, c.strict), interval=iv)
    n = max(len(v) for v in per_cell)
    return Result(
        c.label,
        NOT_RUN,
        why=(
            f"{n} seed(s) in common: no verdict from a single seed (needs 2 or more)"
            if len(common) < 2
            else "cells without shared seeds"
        ),
    )


def read_runs(tests: tuple[Test, ...], reads: dict[str, TableRead]) -> Reading:
    """The claim on our runs (`reads`: each table's values, as `read_table` gives them)."""
    if not tests:
        return Reading(NOT_RUN, why="no table of this grid tests the claim")
    errors = {t.name: t.error for t in reads.values() if t.error}
    values: dict[Cell, dict[int | None, float]] = {}
    for read in reads.values():
        for (row, col), v in read.values.items():
            values[Cell(read.name, row, col)] = v

    def verdict_of(c: Comparison) -> Result:
        bad = sorted({cell.table for cell in c.cells if cell.table in errors})
        if bad:
            return Result(c.label, NOT_RUN, why=f"table {', '.join(bad)} not readable")
        return comparison_result(c, values)

    verdict, results = _combine_tests(tests, verdict_of)
    tables = sorted({x for t in tests for x in _tables(t)})
    missing = sorted({m for x in tables for m in reads[x].missing})
    why = [f"{x}: {errors[x]}" for x in tables if x in errors]
    why += [f"{x} from the committed record {reads[x].record}" for x in tables if reads[x].record]
    why += [f"{len(missing)} run(s) not finished"] if missing else []
    return Reading(verdict, tuple(results), "; ".join(why))


def _tables(test: Test) -> list[str]:
    return sorted({cell.table for cell in test.cells})


def read_table(
    grid: Grid,
    name: str,
    catalog: dict,
    scale: str,
    records: Path | None = None,
    recorded: dict[Path, Any] | None = None,
) -> TableRead:
    """One grid table's values per cell and seed, from its finished runs, through the table's
    own spec and `seed_values`; the folders of runs not finished are listed in `missing`. With
    none of its runs here, the table's committed record in `records` (if any) is read instead.
    `recorded`: runs rebuilt from a run record (`fedbench.record --record`), by folder, read
    where their folder is not here."""
    from fedbench.grid import output_spec
    from fedbench.report.collect import RunDataError
    from fedbench.report.computed import ComputedTableSpec
    from fedbench.report.layout import LayoutError
    from fedbench.report.tables import TableSpec, seed_values

    def kept() -> TableRead | None:  # the committed record, read only where the runs are absent
        return None if records is None else recorded_cells(records, grid.name, name, scale)

    if name not in grid.outputs("tables") and name in grid.outputs("figures"):
        read = read_figure(grid, name, catalog, scale)
        if not any(read.values.values()) and (record := kept()) is not None:
            return record
        return read

    try:
        spec = output_spec(grid, "tables", name, catalog, scale)
    except ValueError as err:  # a selection's choice not made yet (ChoicePending), ...
        return kept() or TableRead(name, error=str(err).splitlines()[0])
    if isinstance(spec, ComputedTableSpec):
        return TableRead(name, {cell: {EXACT: float(v)} for cell, v in spec.values.items()})
    if not isinstance(spec, TableSpec):
        return TableRead(name, error=f"{type(spec).__name__} is not a table of cells")
    recorded = {Path(d): run for d, run in (recorded or {}).items() if not _finished(d)}
    done = {
        cell: [d for d in dirs if _finished(d) or Path(d) in recorded]
        for cell, dirs in spec.cells.items()
    }
    if not any(done.values()) and (record := kept()) is not None:
        return record
    missing = tuple(
        str(d) for cell, dirs in spec.cells.items() for d in dirs if d not in done[cell]
    )
    try:
        values = seed_values(dataclasses.replace(spec, cells=done), recorded)
    except (RunDataError, LayoutError) as err:
        return TableRead(name, missing=missing, error=str(err).splitlines()[0])
    return TableRead(name, values, missing)


def read_figure(grid: Grid, name: str, catalog: dict, scale: str) -> TableRead:
    """A curve figure (kind rounds) as a table: each (row, panel) cell's value per seed is the
    run's curve averaged over its evaluated rounds (the area under the curve divided by the
    rounds: of two methods that end alike, the one that gets there sooner reads higher), scaled as
    the figure draws it; diverged runs are left out as in the figure's mean line. A claim that
    reads a figure says so in its note."""
    from fedbench.grid import output_spec
    from fedbench.report.collect import RunDataError, run_series
    from fedbench.report.curve_spec import FigureSpec
    from fedbench.report.layout import LayoutError, cell_quantities, load_cells, value_scale

    try:
        spec = output_spec(grid, "figures", name, catalog, scale)
    except ValueError as err:  # a selection's choice not made yet (ChoicePending), ...
        return TableRead(name, error=str(err).splitlines()[0])
    if not isinstance(spec, FigureSpec) or spec.kind != "rounds":
        return TableRead(name, error=f"{name} is not a figure of curves over rounds")
    done = {cell: [d for d in dirs if _finished(d)] for cell, dirs in spec.cells.items()}
    missing = tuple(
        str(d) for cell, dirs in spec.cells.items() for d in dirs if d not in done[cell]
    )
    values: dict[tuple[str, str], dict] = {}
    try:
        cells = load_cells(dataclasses.replace(spec, cells=done))
        for key, q in cell_quantities(spec).items():
            factor = value_scale(q.metric, spec.percent)
            per_seed = {}
            for run in cells.get(key, []):
                curve = run_series(run, q.protocol, q.metric, q.stat).dropna()
                if run.status == "ok" and not curve.empty:
                    per_seed[int(run.key["seed"])] = float(curve.mean()) * factor
            values[key] = per_seed
    except (RunDataError, LayoutError) as err:
        return TableRead(name, missing=missing, error=str(err).splitlines()[0])
    return TableRead(name, values, missing)


def _finished(run_dir: Path) -> bool:
    """A run writes run.yaml and metrics.jsonl together when it ends (fedbench.io.atomic_paths)."""
    return (Path(run_dir) / "run.yaml").exists() and (Path(run_dir) / "metrics.jsonl").exists()


def read_grid(
    grid: Grid, tests: list[Test], catalog: dict, scale: str, records: Path | None = RECORDS
) -> dict[str, TableRead]:
    """Every table the tests read, each once (from its committed record where none of its runs
    is here)."""
    names = sorted({cell.table for t in tests for cell in t.cells})
    return {n: read_table(grid, n, catalog, scale, records) for n in names}


def record_files(records: Path | None) -> list[Path]:
    """The committed cells files in `records` (none where the folder is absent)."""
    if records is None or not Path(records).is_dir():
        return []
    return sorted(Path(records).glob(f"*{CELLS_SUFFIX}"))


def recorded_cells(records: Path, grid: str, table: str, scale: str) -> TableRead | None:
    """One table's values per cell and seed from the cells file in `records` that holds it, or
    None. A file holds one grid table at one scale (`fedbench record --cells-out`)."""
    for path in record_files(records):
        with open(path, newline="") as fh:
            rows = list(csv.DictReader(fh))
        if not rows or set(CELLS_COLUMNS) - set(rows[0]):
            raise ValueError(
                f"{path}: not a cells record (columns {', '.join(CELLS_COLUMNS)} expected); "
                f"rewrite it with `fedbench record ... --cells-out {path}`"
            )
        if (rows[0]["grid"], rows[0]["table"], rows[0]["scale"]) != (grid, table, scale):
            continue
        values: dict[tuple[str, str], dict[int | None, float]] = {}
        for r in rows:
            values.setdefault((r["row"], r["column"]), {})[int(r["seed"])] = float(r["value"])
        return TableRead(table, values, record=_shown(path))
    return None


def _shown(path: Path) -> str:
    """A record's path as the page prints it (relative to the checkout when inside it)."""
    try:
        return str(Path(path).resolve().relative_to(RECORDS.parents[1]))
    except ValueError:
        return str(path)


def cells_rows(
    grid: Grid, name: str, catalog: dict, scale: str, recorded: dict[Path, Any] | None = None
) -> list[dict[str, object]]:
    """A table's cells file rows (`CELLS_COLUMNS`) from the runs finished here (and those
    `recorded`, rebuilt from a run record, where their folders are absent): each cell's value
    per seed as the table reads it."""
    read = read_table(grid, name, catalog, scale, recorded=recorded)
    if read.error:
        raise ValueError(f"{grid.name} {name}: {read.error}")
    return [
        {"grid": grid.name, "table": name, "scale": scale, "row": row, "column": col}
        | {"seed": seed, "value": repr(float(value))}  # every digit: the record's verdicts are ours
        for (row, col), per_seed in read.values.items()
        for seed, value in sorted((s, v) for s, v in per_seed.items() if s is not EXACT)
    ]


def existing_inputs(grid: Grid, tests: list[Test], catalog: dict, scale: str) -> list[str]:
    """The files the tests' tables read that exist now (run.yaml, metrics.jsonl, choice files):
    a claims page reads the runs finished so far and never asks for a run to be made."""
    from fedbench.grid import output_inputs

    files: list[str] = []
    for name in sorted({cell.table for t in tests for cell in t.cells}):
        section = "tables" if name in grid.outputs("tables") else "figures"
        try:
            wanted = output_inputs(grid, section, name, catalog, scale)
        except ValueError:  # a selection's choice not made yet: its rows' runs are not named
            wanted = []
        files += [f for f in wanted if Path(f).exists()]
    return list(dict.fromkeys(files))
