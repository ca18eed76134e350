"""Per-run summaries of a table's runs, and runs rebuilt from such a summary (a run record).

`fedbench.record` (`python -m fedbench.record`) writes them for one grid table; the functions
here read run directories and record files only.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

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
            detail = final_detail(run.ok_records[-1], protocol, metric)
            if detail is not None:
                row[f"{protocol}_{metric}_final_detail"] = detail
        rows.append(row)
    return pd.DataFrame(rows)


RECORD_STATUSES = ("ok", "diverged")


def final_detail(record: dict, protocol: str, metric: str) -> str | None:
    """The final round's whole account of one protocol/metric, as compact JSON: its summary
    pack (every stat: mean, std, ...) and each client's value with its id and size. A record
    row carrying it rebuilds every `round: final` column of the run, not only the table's own
    stat: the spread, the q-FFL tails, Angle/KL and the per-client columns (DQN-Fed's Table 9)."""
    summary = ((record.get("summary") or {}).get(protocol) or {}).get(metric)
    clients = (record.get("clients") or {}).get(protocol) or {}
    if summary is None and metric not in clients:
        return None
    detail: dict = {"summary": summary or {}}
    if metric in clients:
        detail["clients"] = {
            "ids": clients.get("ids", []),
            "n": clients.get("n", []),
            "values": clients[metric],
        }
    return json.dumps(detail, separators=(",", ":"), sort_keys=True)


def read_record(
    path: str | Path, scale: str, run_dirs: list[Path], shared: bool = False
) -> dict[Path, pd.Series]:
    """The rows of finished runs (status ok or diverged) in an earlier `--out` of this table, by
    run directory; a row of another scale, or of a run the table does not have, is an error
    (`shared`: the record is another table's, and only the runs the two share are read)."""
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
        if key not in runs and shared:
            continue
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
    and at the last evaluated round, so `round: best` and `round: final` read what the run read;
    where the row has the final round's detail (`final_detail`), that round's every stat and
    per-client value too, so any `round: final` column reads what the run read."""
    suffix = f"_{metric}_{stat}_best"
    protocols = [c.removesuffix(suffix) for c in row.index if c.endswith(suffix)]
    # The last evaluated round ("rounds", the rounds completed, in records written before it).
    last = row.get("last_round")
    last = int(row["rounds"] if last is None or pd.isna(last) else last)
    points: dict[int, dict] = {}
    clients: dict[int, dict] = {}
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
        detail = row.get(f"{protocol}_{metric}_final_detail")
        if isinstance(detail, str):
            _add_detail(points, clients, last, protocol, metric, stat, detail, run_dir, record)
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
    records = [
        {"round": r, "status": "ok", "summary": points[r], "clients": clients.get(r, {})}
        for r in sorted(points)
    ]
    return RunData(run_dir=Path(run_dir), info=info, records=records)


def _add_detail(points, clients, last, protocol, metric, stat, detail, run_dir, record):
    """Put one recorded final-round detail into the rebuilt run's last round (in place)."""
    where = f"--record {record}: {run_dir}: {protocol}_{metric}_final_detail"
    try:
        parsed = json.loads(detail)
        summary = {str(k): float(v) for k, v in dict(parsed.get("summary", {})).items()}
        got = parsed.get("clients")
        if got is not None:
            ids, ns, values = (list(got[k]) for k in ("ids", "n", "values"))
            if not len(ids) == len(ns) == len(values):
                raise ValueError(f"{len(ids)} ids, {len(ns)} sizes, {len(values)} values")
    except (ValueError, TypeError, KeyError, AttributeError) as err:
        raise SystemExit(f"{where}: not the detail this tool writes ({err})") from None
    have = points.get(last, {}).get(protocol, {}).get(metric, {})
    # The row's values are rounded to 6 decimals (the record's CSV); the detail's are as run.
    if stat in have and stat in summary and abs(summary[stat] - have[stat]) > 1e-6:
        raise SystemExit(
            f"{where}: its {stat} {summary[stat]} differs from the row's final value {have[stat]}"
        )
    points.setdefault(last, {}).setdefault(protocol, {})[metric] = {**have, **summary}
    if got is not None:
        clients.setdefault(last, {})[protocol] = {"ids": ids, "n": ns, metric: values}


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
