"""A small per-run summary of one table's runs (one CSV row per run), for reproduction records.

    python -m fedbench.report.runs <paper> <table> [--scale S] --out runs.csv [--table-out PREFIX]

`--table-out PREFIX` also writes PREFIX.md / .tex / .csv: the table from the runs that have finished
(each cell averages the seeds it has, its n printed), marked as partial in a note while runs are
missing, for recording a grid that spans several sittings before `snakemake` can build it.

Per run: its names and seed, status, rounds, wall-clock training seconds (run.yaml), and for each
protocol the run evaluated, the table's metric/stat (e.g. top1 / wmean) at the final round and at
the run's best round (with that round). Runs that have not finished are listed with status
"missing", so the file says what the table is still waiting for.
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
from fedbench.report.collect import RunDataError, load_run, run_series
from fedbench.report.tables import maximises

KEY_COLUMNS = ("dataset", "partition", "model", "algorithm", "seed")


def summarise_runs(run_dirs: list[Path], metric: str, stat: str) -> pd.DataFrame:
    """One row per run directory (in the given order, each once)."""
    rows = []
    for run_dir in dict.fromkeys(run_dirs):
        parts = Path(run_dir).parts  # .../runs/{dataset}/{partition}/{model}/{algorithm}/seed{s}
        key = dict(zip(KEY_COLUMNS, (*parts[-5:-1], int(parts[-1].removeprefix("seed")))))
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
            "rounds": run.info.get("rounds_completed"),
            "train_seconds": run.info.get("train_seconds", math.nan),
            "executor": run.info.get("executor", ""),
            "standin": run.standin,
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
    catalog, grid = _load(paper, config)
    if table not in grid.outputs("tables"):
        raise SystemExit(f"{paper}: no table {table!r}; tables: {sorted(grid.outputs('tables'))}")
    scale = resolve_scale(grid, scale)
    keys = cells(grid, "tables", table, catalog, scale)
    return [Path(k.folder(scale)) for ks in keys.values() for k in ks], grid.outputs("tables")[
        table
    ]


def write_partial_table(paper: str, table: str, scale: str | None, config: str, prefix: str):
    """The grid table from its finished runs only (see the module docstring); returns
    (finished, total) run counts."""
    import dataclasses

    from fedbench.papers import load_paper_values
    from fedbench.report import build_table, write_table

    catalog, grid = _load(paper, config)
    scale = resolve_scale(grid, scale)
    spec = table_spec(grid, table, catalog, scale)
    done = {k: [p for p in v if (Path(p) / "run.yaml").exists()] for k, v in spec.cells.items()}
    # Distinct runs: two rows may read one run (e.g. a release reading that equals another's +FT).
    total = len({str(p) for v in spec.cells.values() for p in v})
    finished = len({str(p) for v in done.values() for p in v})
    notes = list(spec.notes)
    if finished < total:
        notes.append(
            f"PARTIAL: built from the {finished} of {total} runs that have finished; "
            "a cell's n says how many seeds it averages"
        )
    spec = dataclasses.replace(spec, cells=done, notes=notes)
    write_table(build_table(spec, load_paper_values(paper)), spec, Path(prefix))
    return finished, total


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fedbench.report.runs", description=__doc__)
    ap.add_argument("paper")
    ap.add_argument("table")
    ap.add_argument("--scale", default=None)
    ap.add_argument("--config", default="config/config.yaml")
    ap.add_argument("--out", required=True, help="CSV to write (atomically)")
    ap.add_argument("--table-out", default=None, help="also write the table from finished runs")
    args = ap.parse_args(argv)
    dirs, out = table_run_dirs(args.paper, args.table, args.scale, args.config)
    frame = summarise_runs(dirs, out["metric"], out["stat"])
    write_text(args.out, frame.round(6).to_csv(index=False, lineterminator="\n"))
    done = int((frame["status"] == "ok").sum()) if "status" in frame else 0
    print(f"{args.out}: {len(frame)} runs, {done} finished", file=sys.stderr)
    if args.table_out:
        finished, total = write_partial_table(
            args.paper, args.table, args.scale, args.config, args.table_out
        )
        print(f"{args.table_out}.md: from {finished} of {total} runs", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
