"""A small per-run summary of one table's runs (one CSV row per run), for reproduction records.

    python -m fedbench.report.runs <paper> <table> [--scale S] --out runs.csv [--table-out PREFIX]

`--table-out PREFIX` also writes PREFIX.md / .tex / .csv: the table from the runs that have finished
(each cell averages the seeds it has, its n printed), marked as partial in a note while runs are
missing, for recording a grid that spans several sittings before `snakemake` can build it.

`--record CSV` (an earlier `--out` of the same table and scale, often the same file) carries runs
across machines: a run whose directory is not here but which the record lists as finished keeps
its record row in `--out` (source "record") and enters the table with its recorded final and
best-round values (enough for tables with `round: final` or `round: best`; a table that needs
more of a run, e.g. a per-client spread, refuses it). The table's notes say how many runs came
from the record.

Per run: its names and seed, status, rounds, wall-clock training seconds and commit (run.yaml),
and for each protocol the run evaluated, the table's metric/stat (e.g. top1 / wmean) at the final
round and at the run's best round (with that round). Runs that have not finished are listed with
status "missing", so the file says what the table is still waiting for.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import pandas as pd

from fedbench.config import load_catalog
from fedbench.grid import cells, load_grid, resolve_scale, table_spec
from fedbench.io import write_text
from fedbench.report.collect import RunData, RunDataError, load_run, run_series
from fedbench.report.tables import maximises

KEY_COLUMNS = ("dataset", "partition", "model", "algorithm", "seed")


def _key(run_dir: str | Path) -> dict:
    """dataset, partition, model, algorithm, seed of a run directory's path."""
    parts = Path(run_dir).parts  # .../runs/{dataset}/{partition}/{model}/{algorithm}/seed{s}
    return dict(zip(KEY_COLUMNS, (*parts[-5:-1], int(parts[-1].removeprefix("seed")))))


def summarise_runs(
    run_dirs: list[Path], metric: str, stat: str, scale: str | None = None
) -> pd.DataFrame:
    """One row per run directory (in the given order, each once); with `scale`, a scale column
    after the seed and a source column ("run") after the status."""
    rows = []
    for run_dir in dict.fromkeys(run_dirs):
        key = _key(run_dir)
        if scale is not None:
            key["scale"] = scale
        if not (Path(run_dir) / "run.yaml").exists():
            rows.append({**key, "status": "missing"})
            continue
        try:
            run = load_run(run_dir)
        except RunDataError as err:
            rows.append({**key, "status": f"unreadable: {err}"})
            continue
        row = {
            **key,
            "status": run.status,
            **({"source": "run"} if scale is not None else {}),
            "rounds": run.info.get("rounds_completed"),
            "diverged_round": run.diverged_round,
            "last_round": run.ok_records[-1]["round"] if run.ok_records else None,
            "train_seconds": run.info.get("train_seconds", math.nan),
            "executor": run.info.get("executor", ""),
            "standin": run.standin,
            "git_commit": run.info.get("git_commit") or "",
        }
        for protocol in run.info.get("eval_protocols", ["global"]):
            series = run_series(run, protocol, metric, stat)
            if series.empty:
                continue
            row[f"{protocol}_{metric}_{stat}_final"] = float(series.iloc[-1])
            best = series.idxmax() if maximises(metric, stat) else series.idxmin()
            row[f"{protocol}_{metric}_{stat}_best"] = float(series[best])
            row[f"{protocol}_best_round"] = int(best)
        rows.append(row)
    return pd.DataFrame(rows)


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
    if table not in grid.outputs("tables"):
        raise SystemExit(f"{paper}: no table {table!r}; tables: {sorted(grid.outputs('tables'))}")
    scale = resolve_scale(grid, scale)
    keys = cells(grid, "tables", table, catalog, scale)
    dirs = [Path(k.folder(scale)) for ks in keys.values() for k in ks]
    return dirs, grid.outputs("tables")[table], scale


RECORD_STATUSES = ("ok", "diverged")


def read_record(path: str | Path, scale: str, run_dirs: list[Path]) -> dict[Path, pd.Series]:
    """The rows of finished runs (status ok or diverged) in an earlier `--out` of this table, by
    run directory; a row of another scale, or of a run the table does not have, is an error."""
    path = Path(path)
    if not path.is_file():
        raise SystemExit(f"--record {path}: no such file")
    try:
        frame = pd.read_csv(path)
    except (OSError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as err:
        raise SystemExit(f"--record {path}: cannot read it as CSV: {err}") from err
    missing = [c for c in (*KEY_COLUMNS, "scale", "status") if c not in frame.columns]
    if missing:
        raise SystemExit(f"--record {path}: lacks column(s) {missing} (an --out of this tool)")
    runs = {tuple(_key(d).values()): Path(d) for d in run_dirs}
    out = {}
    for i, row in frame.iterrows():
        if row["status"] not in RECORD_STATUSES:
            continue
        where = f"--record {path} line {i + 2}"
        if row["scale"] != scale:
            raise SystemExit(f"{where}: scale {row['scale']!r}, the table is at scale {scale!r}")
        key = tuple(int(row[c]) if c == "seed" else str(row[c]) for c in KEY_COLUMNS)
        if key not in runs:
            raise SystemExit(f"{where}: {'/'.join(map(str, key))} is not a run of this table")
        if row["status"] == "diverged" and pd.isna(row.get("diverged_round")):
            raise SystemExit(f"{where}: a diverged run without its diverged_round")
        out[runs[key]] = row
    return out


def recorded_run(
    row: pd.Series, run_dir: Path, scale: str, metric: str, stat: str, record: Path
) -> RunData:
    """A run rebuilt from its record row: for each protocol, the recorded value at the best round
    and at the last evaluated round, so `round: best` and `round: final` read what the run read."""
    suffix = f"_{metric}_{stat}_best"
    protocols = [c.removesuffix(suffix) for c in row.index if c.endswith(suffix)]
    # The last evaluated round ("rounds", the rounds completed, in records written before it).
    last = row.get("last_round")
    last = int(row["rounds"] if last is None or pd.isna(last) else last)
    points: dict[int, dict] = {}
    for protocol in protocols:
        best = row[f"{protocol}{suffix}"]
        final = row[f"{protocol}_{metric}_{stat}_final"]
        if pd.isna(best) or pd.isna(final):
            continue  # a protocol this run did not evaluate (another row's column)
        for round_, value in ((int(row[f"{protocol}_best_round"]), best), (last, final)):
            have = points.setdefault(round_, {}).get(protocol)
            if have is not None and have[metric][stat] != float(value):
                raise SystemExit(
                    f"--record {record}: {run_dir}: {protocol} best round {round_} is the last "
                    f"round but its best {best} differs from its final {final}"
                )
            points[round_][protocol] = {metric: {stat: float(value)}}
    diverged = row.get("diverged_round")
    info = {
        "run": {"scale": scale, **_key(run_dir)},
        "status": row["status"],
        "standin": bool(row["standin"]),
        "rounds": last,
        "rounds_completed": None if pd.isna(row.get("rounds")) else int(row["rounds"]),
        "diverged_round": None if pd.isna(diverged) else int(diverged),
        "train_seconds": row.get("train_seconds", math.nan),
        "executor": row.get("executor", ""),
        "eval_protocols": [p for p in protocols if any(p in v for v in points.values())],
        "recorded_in": str(record),
    }
    records = [{"round": r, "status": "ok", "summary": points[r]} for r in sorted(points)]
    return RunData(run_dir=Path(run_dir), info=info, records=records)


def merge_record(frame: pd.DataFrame, recorded: dict[Path, pd.Series], dirs: list[Path]):
    """The summary with each missing run that the record holds replaced by its record row
    (source "record"); returns (frame, the run directories taken from the record)."""
    rows, taken = [], []
    for run_dir, (_, row) in zip(dict.fromkeys(dirs), frame.iterrows(), strict=True):
        run_dir = Path(run_dir)
        if row["status"] == "missing" and run_dir in recorded:
            rows.append({**recorded[run_dir].dropna().to_dict(), "source": "record"})
            taken.append(run_dir)
        else:
            rows.append(row.dropna().to_dict())
    columns = list(frame.columns)
    columns += [c for r in rows for c in r if c not in columns]
    return pd.DataFrame(rows, columns=list(dict.fromkeys(columns))), taken


def write_partial_table(
    paper: str,
    table: str,
    scale: str | None,
    config: str,
    prefix: str,
    recorded: dict[Path, RunData] | None = None,
):
    """The grid table from its finished runs only (see the module docstring), those of `recorded`
    (runs rebuilt from a record, by directory) included where their directory is absent; returns
    (finished, total) run counts."""
    import dataclasses

    from fedbench.papers import load_paper_values
    from fedbench.report import build_table, write_table

    catalog, grid = _load(paper, config)
    scale = resolve_scale(grid, scale)
    spec = table_spec(grid, table, catalog, scale)
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
    if from_record:
        notes.append(
            f"{len(from_record)} of the {finished} runs read from the run record "
            f"{', '.join(sorted(records))} (finished on another machine or sitting; their "
            "directories are not here): their recorded final and best-round values"
        )
    spec = dataclasses.replace(spec, cells=done, notes=notes)
    preloaded = {Path(p): run for p, run in from_record.items()}
    write_table(build_table(spec, load_paper_values(paper), preloaded), spec, Path(prefix))
    return finished, total


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fedbench.report.runs", description=__doc__)
    ap.add_argument("paper")
    ap.add_argument("table")
    ap.add_argument("--scale", default=None)
    ap.add_argument("--config", default="config/config.yaml")
    ap.add_argument("--out", required=True, help="CSV to write (atomically)")
    ap.add_argument("--table-out", default=None, help="also write the table from finished runs")
    ap.add_argument(
        "--record", default=None, help="an earlier --out: keep its finished runs not found here"
    )
    args = ap.parse_args(argv)
    dirs, out, scale = _table_runs(args.paper, args.table, args.scale, args.config)
    metric, stat = out["metric"], out["stat"]
    frame = summarise_runs(dirs, metric, stat, scale)
    recorded = {}
    if args.record:
        rows = read_record(args.record, scale, dirs)
        frame, taken = merge_record(frame, rows, dirs)
        recorded = {
            d: recorded_run(rows[d], d, scale, metric, stat, Path(args.record)) for d in taken
        }
    write_text(args.out, frame.round(6).to_csv(index=False, lineterminator="\n"))
    done = int(frame["status"].isin(RECORD_STATUSES).sum()) if "status" in frame else 0
    print(
        f"{args.out}: {len(frame)} runs, {done} finished ({len(recorded)} from the record)",
        file=sys.stderr,
    )
    if args.table_out:
        finished, total = write_partial_table(
            args.paper, args.table, args.scale, args.config, args.table_out, recorded
        )
        print(f"{args.table_out}.md: from {finished} of {total} runs", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
