"""A small per-run summary of one table's runs (one CSV row per run), for reproduction records.

    python -m fedbench.record <paper> <table> [--scale S] --out runs.csv [--table-out PREFIX]

`--table-out PREFIX` also writes PREFIX.md / .tex / .csv: the table from the runs that have finished
(each cell averages the seeds it has, its n printed), marked as partial in a note while runs are
missing, for recording a grid that spans several sittings before `snakemake` can build it.

`--record CSV` (an earlier `--out` of the same table and scale, often the same file) carries runs
across machines: a run whose directory is not here but which the record lists as finished keeps
its record row in `--out` (source "record") and enters the table with its recorded final and
best-round values, and the final round's every stat and per-client value (`final_detail`):
enough for any `round: final` table (spreads, tails, per-client columns) and for a `round: best`
table of its own quantity (one that reads another stat at the best round refuses the record).
The table's notes say how many runs came from the record; `--cells-out` reads them too, so a
table's runs can be made over several sittings, each committing its record. `--choice-out`
(a selection table, with every run here or recorded) writes the choice file the workflow's
`choice` checkpoint writes, so the chosen rows' runs can be made without re-making the
selection.

A record must say which code made it: a run whose commit is marked `-dirty` (it ran on a working
tree with uncommitted changes) is refused, naming the runs and the fix; `--allow-dirty` writes it
anyway, and the table's notes then say how many runs are dirty and which commits they name;
`--skip-dirty` leaves them out of the table and the cells file (as if not run, so a cell averages
its clean seeds), while `--out` keeps their rows for the record.

`--shared` reads a `--record` made for another table (another grid's, or the same grid's), taking
the runs the two have in common: pFedBreD's Table 1 cells from the Fashion-MNIST record, whose
runs are Table 1's Fashion-MNIST cells.

`--cells-out CSV` writes what the claims read (fedbench.claims): each cell's value per seed, as
the table reads it (a curve figure's name instead of a table's: each curve's mean over its rounds,
`fedbench.claims.evaluate.read_figure`), from the runs finished here (grid, table, scale, row,
column, seed, value).
Committed beside the record as `docs/reproductions/<name>_cells.csv`, it gives a fresh clone's
claims pages their paper-scale verdicts where the runs themselves are not on the machine.

Per run: its names and seed, status, rounds, wall-clock training seconds and commit (run.yaml),
and for each protocol the run evaluated, the table's metric/stat (e.g. top1 / wmean) at the final
round and at the run's best round (with that round). Runs that have not finished are listed with
status "missing", so the file says what the table is still waiting for.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import io
import sys
from pathlib import Path

from fedbench.config import load_catalog
from fedbench.grid import cells, load_grid, output_spec, resolve_scale
from fedbench.io import write_text
from fedbench.report.collect import RunData
from fedbench.report.runs import (
    RECORD_STATUSES,
    merge_record,
    read_record,
    recorded_run,
    summarise_runs,
)


def _load(paper: str, config: str):
    """The catalog and the paper's grid (config/papers/<paper>.yaml beside `config`)."""
    catalog = load_catalog(config)
    return catalog, load_grid(Path(config).parent / "papers" / f"{paper}.yaml", catalog)


def table_run_dirs(paper: str, table: str, scale: str | None, config: str) -> tuple[list, dict]:
    """The run directories of one grid table (cells in row-major order), and its spec entry."""
    dirs, entry, _ = _table_runs(paper, table, scale, config)
    return dirs, entry


def _table_runs(paper: str, table: str, scale: str | None, config: str):
    """`table_run_dirs` and the resolved scale, from one load of the catalog and grid."""
    catalog, grid = _load(paper, config)
    section = "tables" if table in grid.outputs("tables") else "figures"
    if table not in grid.outputs(section):
        raise SystemExit(f"{paper}: no table {table!r}; tables: {sorted(grid.outputs('tables'))}")
    scale = resolve_scale(grid, scale)
    keys = cells(grid, section, table, catalog, scale)
    dirs = [Path(k.folder(scale)) for ks in keys.values() for k in ks]
    return dirs, grid.outputs(section)[table], scale


def write_partial_table(
    paper: str,
    table: str,
    scale: str | None,
    config: str,
    prefix: str,
    recorded: dict[Path, RunData] | None = None,
    dirty: list[str] | None = None,
    skipped: list[str] | None = None,
):
    """The grid table from its finished runs only (see the module docstring), those of `recorded`
    (runs rebuilt from a record, by directory) included where their directory is absent, a note
    for the `dirty` runs' commits (allowed with --allow-dirty); returns (finished, total) run
    counts."""
    from fedbench.papers import load_paper_values
    from fedbench.report import build_table, write_table

    catalog, grid = _load(paper, config)
    scale = resolve_scale(grid, scale)
    spec = output_spec(grid, "tables", table, catalog, scale)
    here = {str(p) for v in spec.cells.values() for p in v if (Path(p) / "run.yaml").exists()}
    from_record = {str(p): run for p, run in (recorded or {}).items() if str(p) not in here}
    done = {
        k: [p for p in v if str(p) in here or str(p) in from_record] for k, v in spec.cells.items()
    }
    # Distinct runs: two rows may read one run (e.g. a release reading that equals another's +FT).
    total = len({str(p) for v in spec.cells.values() for p in v})
    finished = len({str(p) for v in done.values() for p in v})
    notes = list(spec.notes)
    if finished < total:
        notes.append(
            f"PARTIAL: built from the {finished} of {total} runs that have finished; "
            "a cell's n says how many seeds it averages"
        )
    records = {run.info["recorded_in"] for run in from_record.values()}
    if from_record and spec.round == "best":
        _best_round_from_record(spec, paper, table)
    if from_record:
        notes.append(
            f"{len(from_record)} of the {finished} runs read from the run record "
            f"{', '.join(sorted(records))} (finished on another machine or sitting; their "
            "directories are not here): their recorded final and best-round values"
            + (
                ", and their final round's every stat and client value"
                if spec.round == "final"
                else ""
            )
        )
    if dirty:
        notes.append(dirty_note(dirty))
    if skipped:
        notes.append(
            f"{len(skipped)} run(s) made from uncommitted code (commit(s) "
            f"{', '.join(sorted(set(skipped)))}) left out (--skip-dirty): not counted as finished"
        )
    spec = dataclasses.replace(spec, cells=done, notes=notes)
    preloaded = {Path(p): run for p, run in from_record.items()}
    write_table(build_table(spec, load_paper_values(paper), preloaded), spec, Path(prefix))
    return finished, total


def _best_round_from_record(spec, paper: str, table: str) -> None:
    """A record holds each run's best round of the table's own quantity only: a `round: best`
    table whose cells read another quantity, or a spread at that round, cannot take its runs."""
    from fedbench.report.layout import cell_quantities

    own = (spec.metric, spec.stat)
    other = sorted(
        {f"{q.metric}/{q.stat}" for q in cell_quantities(spec).values()} - {"/".join(own)}
    )
    if other or spec.spread:
        needs = ", ".join(other + ([f"spread {spec.spread}"] if spec.spread else []))
        raise SystemExit(
            f"{paper} {table}: a round: best table that reads {needs} at each run's best round "
            "cannot be built from a run record (it keeps the best round of "
            f"{own[0]}/{own[1]} only); build it where the runs are, or without --record"
        )


DIRTY = "-dirty"


def dirty_runs(frame) -> list[tuple[str, str]]:
    """(run, commit) of each finished run whose commit is marked -dirty, in the frame's order."""
    if "git_commit" not in frame or frame.empty:
        return []
    out = []
    for _, row in frame.iterrows():
        commit = row.get("git_commit")
        if row.get("status") in RECORD_STATUSES and str(commit).endswith(DIRTY):
            name = "/".join(str(row[c]) for c in ("dataset", "partition", "model", "algorithm"))
            out.append((f"{name}/seed{row['seed']}", str(commit)))
    return out


def dirty_note(commits: list[str]) -> str:
    """The table's note on runs made from uncommitted code (--allow-dirty)."""
    named = sorted(set(commits))
    return (
        f"DIRTY: {len(commits)} run(s) ran on uncommitted code (commit(s) "
        f"{', '.join(named)}): no commit says which code made them; re-run them from a "
        "clean checkout to make this a record"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="fedbench record", description=__doc__)
    ap.add_argument("paper")
    ap.add_argument("table")
    ap.add_argument("--scale", default=None)
    ap.add_argument("--config", default="config/config.yaml")
    ap.add_argument("--out", required=True, help="CSV to write (atomically)")
    ap.add_argument("--table-out", default=None, help="also write the table from finished runs")
    ap.add_argument(
        "--record", default=None, help="an earlier --out: keep its finished runs not found here"
    )
    ap.add_argument(
        "--shared",
        action="store_true",
        help="--record is another table's (of any grid at this scale): read the runs the two "
        "share, skip its others",
    )
    ap.add_argument(
        "--cells-out", default=None, help="also write each cell's value per seed (for the claims)"
    )
    ap.add_argument(
        "--choice-out",
        default=None,
        help="a selection table: also write its choice file (the workflow's checkpoint output)",
    )
    ap.add_argument(
        "--allow-dirty",
        action="store_true",
        help="write runs made from uncommitted code (-dirty commits), marked in the table's notes",
    )
    ap.add_argument(
        "--skip-dirty",
        action="store_true",
        help="leave runs made from uncommitted code out of the table and cells (as not run)",
    )
    args = ap.parse_args(argv)
    if args.allow_dirty and args.skip_dirty:
        raise SystemExit("--allow-dirty and --skip-dirty exclude each other: choose one")
    dirs, out, scale = _table_runs(args.paper, args.table, args.scale, args.config)
    metric, stat = out["metric"], out["stat"]
    frame = summarise_runs(dirs, metric, stat, scale)
    recorded = {}
    if args.record:
        rows = read_record(args.record, scale, dirs, shared=args.shared)
        frame, taken = merge_record(frame, rows, dirs)
        recorded = {
            d: recorded_run(rows[d], d, scale, metric, stat, Path(args.record)) for d in taken
        }
    dirty = dirty_runs(frame)
    skipped: list[str] = []
    if dirty and args.skip_dirty:
        names = {run for run, _ in dirty}
        here = [d for d in dirs if (d / "run.yaml").exists() and "/".join(d.parts[-5:]) in names]
        if here:
            raise SystemExit(
                f"--skip-dirty: {len(here)} run(s) made from uncommitted code are on this "
                f"machine ({here[0]}, ...): delete their folders (and re-run them from a clean "
                "checkout), then record again"
            )
        recorded = {d: r for d, r in recorded.items() if "/".join(d.parts[-5:]) not in names}
        skipped, dirty = [commit for _, commit in dirty], []
    if dirty and not args.allow_dirty:
        shown = "; ".join(f"{run} ({commit})" for run, commit in dirty[:5])
        more = f"; and {len(dirty) - 5} more" if len(dirty) > 5 else ""
        raise SystemExit(
            f"{args.paper} {args.table}: {len(dirty)} run(s) ran on uncommitted code, so no "
            f"commit says which code made them: {shown}{more}. Commit, re-run them from the "
            "clean checkout (delete their run folders, then snakemake), or pass --allow-dirty "
            "to write them marked as dirty in the table's notes (--skip-dirty: leave them out)"
        )
    write_text(args.out, frame.round(6).to_csv(index=False, lineterminator="\n"))
    done = int(frame["status"].isin(RECORD_STATUSES).sum()) if "status" in frame else 0
    print(
        f"{args.out}: {len(frame)} runs, {done} finished ({len(recorded)} from the record)",
        file=sys.stderr,
    )
    if args.table_out and args.table not in _load(args.paper, args.config)[1].outputs("tables"):
        raise SystemExit(f"--table-out: {args.table} is a figure; record it with --cells-out")
    if args.table_out:
        finished, total = write_partial_table(
            args.paper,
            args.table,
            args.scale,
            args.config,
            args.table_out,
            recorded,
            [commit for _, commit in dirty],
            skipped,
        )
        print(f"{args.table_out}.md: from {finished} of {total} runs", file=sys.stderr)
    if args.choice_out:
        write_recorded_choice(args, scale, frame, recorded)
    if args.cells_out:
        n = write_cells(args.paper, args.table, scale, args.config, args.cells_out, recorded)
        print(f"{args.cells_out}: {n} cell values", file=sys.stderr)
    return 0


def write_recorded_choice(args, scale: str, frame, recorded: dict[Path, RunData]) -> None:
    """A selection table's choice (the file the workflow's `choice` checkpoint writes) from its
    runs here and those of --record: only from every run of the table, so that the rows which run
    the choice (`chosen`) can be made, and recorded, without re-making the selection."""
    from fedbench.grid import output_kind
    from fedbench.outputs.chosen import write_choice

    catalog, grid = _load(args.paper, args.config)
    if not grid.output("tables", args.table).get("select"):
        raise SystemExit(f"--choice-out: {args.paper} {args.table} is not a selection table")
    missing = int((~frame["status"].isin(RECORD_STATUSES)).sum())
    if missing:
        raise SystemExit(
            f"--choice-out: {missing} of the table's {len(frame)} runs are neither here nor in "
            "the record; a choice from part of a selection is not the selection's choice"
        )
    kind = output_kind(grid, "tables", args.table)
    record = write_choice(kind, grid, args.table, catalog, scale, args.choice_out, recorded)
    chosen = {
        by: {g: c["algorithm"] for g, c in groups.items()}
        for by, groups in record["choices"].items()
    }
    print(f"{args.choice_out}: {chosen}", file=sys.stderr)


def write_cells(
    paper: str,
    table: str,
    scale: str,
    config: str,
    path: str,
    recorded: dict[Path, RunData] | None = None,
) -> int:
    """The table's cells file (`fedbench.claims.evaluate.CELLS_COLUMNS`) from the runs finished
    here and those `recorded` (from --record) whose folders are absent; returns its rows."""
    from fedbench.claims.evaluate import CELLS_COLUMNS, cells_rows

    catalog, grid = _load(paper, config)
    try:
        rows = cells_rows(grid, table, catalog, scale, recorded)
    except ValueError as err:
        raise SystemExit(f"--cells-out: {err}") from None
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CELLS_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    write_text(path, out.getvalue())
    return len(rows)


if __name__ == "__main__":
    raise SystemExit(main())
