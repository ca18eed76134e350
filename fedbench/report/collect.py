"""Read run directories (metrics.jsonl + run.yaml) into tidy pandas frames."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from fedbench.io import read_jsonl, rewrite_advice
from fedbench.metrics.distribution import VECTOR_STATS, client_stat, vector_stat

RUN_KEYS = ("scale", "dataset", "partition", "model", "algorithm", "seed")
RUN_FRAME_COLUMNS = (
    *RUN_KEYS,
    "round",
    "status",
    "protocol",
    "metric",
    "stat",
    "value",
    "standin",
    "run_dir",
)
CLIENT_FRAME_COLUMNS = (
    *RUN_KEYS,
    "round",
    "protocol",
    "client",
    "n",
    "metric",
    "value",
    "standin",
    "run_dir",
)
GLOBAL_TEST = "global_test"
TRAIN = "train"
SERVER = "server"  # scalars an algorithm's server logs (ServerOutputs.server_metrics), stat "value"
VALUE = "value"
# Numbers a run writes to run.yaml once (fedbench.engine.run), read as protocol "run", stat
# "value", at the run's final evaluated round: DQN-Fed's Table 2 reads train_seconds.
RUN = "run"
RUN_METRICS = ("train_seconds", "median_round_seconds")


class RunDataError(ValueError):
    """A run directory whose files are missing, unreadable or inconsistent."""


def _unreadable(path: Path, problem: str) -> RunDataError:
    """A run file the train rule writes is missing or damaged: the error ends with (and carries,
    as `advice`, for the job's log) the command that writes it again."""
    advice = rewrite_advice(path, "train")
    err = RunDataError(f"{path}: {problem}; {advice}")
    err.advice = advice
    return err


@dataclass(frozen=True)
class RunData:
    """One run: its run.yaml content and its evaluation records, in file order."""

    run_dir: Path
    info: dict[str, Any]
    records: list[dict[str, Any]]

    @property
    def key(self) -> dict[str, Any]:
        """scale, dataset, partition, model, algorithm, seed."""
        return {k: self.info["run"][k] for k in RUN_KEYS}

    @property
    def status(self) -> str:
        """'ok' or 'diverged'."""
        return self.info["status"]

    @property
    def diverged_round(self) -> int | None:
        """The round at which training diverged, or None."""
        return self.info.get("diverged_round")

    @property
    def standin(self) -> bool:
        """True when the run trained on generated stand-in data."""
        return bool(self.info["standin"])

    @property
    def precision(self) -> str:
        """training.precision of the run (runs recorded before it existed: fp32)."""
        return str(self.info.get("precision", "fp32"))

    @property
    def ok_records(self) -> list[dict[str, Any]]:
        """Evaluation records with metrics (the diverged marker line excluded)."""
        return [r for r in self.records if r.get("status") == "ok"]


def _read_run_yaml(path: Path) -> dict[str, Any]:
    """Load and check run.yaml."""
    if not path.is_file():
        raise _unreadable(path, "run.yaml is missing")
    try:
        info = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        raise _unreadable(path, f"cannot parse run.yaml: {err}") from err
    if not isinstance(info, dict):
        raise RunDataError(f"{path}: run.yaml is not a mapping")
    missing = [k for k in ("run", "status", "standin", "rounds") if k not in info]
    if missing:
        raise RunDataError(f"{path}: run.yaml lacks key(s) {missing}")
    run = info["run"]
    if not isinstance(run, dict) or any(k not in run for k in RUN_KEYS):
        raise RunDataError(f"{path}: run.yaml 'run' must hold {list(RUN_KEYS)}")
    if info["status"] not in ("ok", "diverged"):
        raise RunDataError(f"{path}: unknown status {info['status']!r} (expected ok or diverged)")
    return info


def _read_metrics(path: Path) -> list[dict[str, Any]]:
    """Load and check metrics.jsonl."""
    if not path.is_file():
        raise _unreadable(path, "metrics.jsonl is missing")
    try:
        records = read_jsonl(path)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise _unreadable(path, f"cannot parse metrics.jsonl: {err}") from err
    if not records:
        raise RunDataError(f"{path}: metrics.jsonl has no records")
    for i, r in enumerate(records, start=1):
        if not isinstance(r, dict) or not isinstance(r.get("round"), int):
            raise RunDataError(f"{path}: line {i} is not an object with an integer 'round'")
        status = r.get("status")
        if status == "diverged":
            if i != len(records):
                raise RunDataError(f"{path}: line {i} is a 'diverged' record but not the last")
        elif status != "ok":
            raise RunDataError(f"{path}: line {i} has unknown status {status!r}")
        elif not isinstance(r.get("summary"), dict) or not isinstance(r.get("clients"), dict):
            raise RunDataError(f"{path}: line {i} (round {r['round']}) lacks summary/clients")
    rounds = [r["round"] for r in records]
    if rounds != sorted(set(rounds)):
        raise RunDataError(f"{path}: rounds are not strictly increasing: {rounds}")
    return records


def load_run(run_dir: str | Path) -> RunData:
    """Read one run directory, checking that run.yaml and metrics.jsonl agree."""
    run_dir = Path(run_dir)
    info = _read_run_yaml(run_dir / "run.yaml")
    records = _read_metrics(run_dir / "metrics.jsonl")
    last = records[-1]
    if info["status"] == "diverged":
        if last["status"] != "diverged" or info.get("diverged_round") != last["round"]:
            raise RunDataError(
                f"{run_dir}: run.yaml says diverged at round {info.get('diverged_round')} but "
                f"metrics.jsonl ends with a {last['status']!r} record at round {last['round']}"
            )
    elif last["status"] != "ok" or last["round"] != info["rounds"]:
        raise RunDataError(
            f"{run_dir}: run.yaml says ok with {info['rounds']} rounds but metrics.jsonl ends "
            f"with a {last['status']!r} record at round {last['round']} (incomplete run?)"
        )
    return RunData(run_dir, info, records)


def _finite(x: Any) -> float:
    """A float (NaN for None), so missing values stay visible as NaN."""
    return float("nan") if x is None else float(x)


def record_values(record: dict[str, Any]) -> Iterable[tuple[str, str, str, float]]:
    """(protocol, metric, stat, value) of one ok record: packs, global test set, training loss,
    server scalars."""
    for protocol, pack in record["summary"].items():
        for metric, stats in pack.items():
            for stat, value in stats.items():
                yield protocol, metric, stat, _finite(value)
    glob = record.get(GLOBAL_TEST)
    if glob is not None:
        for metric, value in glob.items():
            if metric != "n":
                yield GLOBAL_TEST, metric, VALUE, _finite(value)
    if "train_loss" in record:
        yield TRAIN, "loss", VALUE, _finite(record["train_loss"])
    if "improved_clients" in record:  # DQN-Fed's ρ_t (eq. 29), training.improved_clients
        yield TRAIN, "improved_clients", VALUE, _finite(record["improved_clients"])
    for name, value in (record.get(SERVER) or {}).items():
        yield SERVER, name, VALUE, _finite(value)


def client_values(record: dict[str, Any], protocol: str, metric: str) -> list | None:
    """The per-client values of a metric under a protocol in one ok record (None: not there)."""
    return (record["clients"].get(protocol) or {}).get(metric)


def client_value(record: dict[str, Any], protocol: str, metric: str, client: int) -> float | None:
    """One client's own value of a metric under a protocol in one ok record (None: not there)."""
    ids = (record["clients"].get(protocol) or {}).get("ids", [])
    values = client_values(record, protocol, metric)
    if values is None or client not in ids:
        return None
    return _finite(values[ids.index(client)])


def run_series(run: RunData, protocol: str, metric: str, stat: str) -> pd.Series:
    """One quantity over the evaluated rounds (index: round); error if the run never has it.
    A stat `client<k>` reads client k's own value (`fedbench.metrics.distribution.client_stat`);
    protocol `run` reads a number of run.yaml (RUN_METRICS) as one point at the final round."""
    if protocol == RUN:
        return _run_yaml_series(run, metric)
    if stat in VECTOR_STATS:  # read from the per-client values (DQN-Fed's tails, Angle, KL)
        found = ((r["round"], client_values(r, protocol, metric)) for r in run.ok_records)
        points = {rd: vector_stat(stat, v) for rd, v in found if v is not None}
        if not points and run.ok_records:
            raise RunDataError(
                f"{run.run_dir}: no per-client {protocol}/{metric} values in metrics.jsonl "
                f"(stat {stat} reads them)"
            )
        return pd.Series(points, name=f"{protocol}/{metric}/{stat}", dtype="float64").rename_axis(
            "round"
        )
    client = client_stat(stat)
    if client is not None:
        found = ((r["round"], client_value(r, protocol, metric, client)) for r in run.ok_records)
        points = {rd: v for rd, v in found if v is not None}
        if not points and run.ok_records:
            raise RunDataError(
                f"{run.run_dir}: no {protocol}/{metric} value of client {client} in "
                "metrics.jsonl (stat client<k> reads client id k's own value)"
            )
        return pd.Series(points, name=f"{protocol}/{metric}/{stat}", dtype="float64").rename_axis(
            "round"
        )
    points = {
        r["round"]: v
        for r in run.ok_records
        for p, m, s, v in record_values(r)
        if (p, m, s) == (protocol, metric, stat)
    }
    if not points and run.ok_records:
        have = sorted({(p, m, s) for r in run.ok_records for p, m, s, _ in record_values(r)})
        protocols = sorted({p for p, _, _ in have})
        metrics = sorted({m for p, m, _ in have if p == protocol})
        raise RunDataError(
            f"{run.run_dir}: no {protocol}/{metric}/{stat} in metrics.jsonl "
            f"(protocols: {protocols}; metrics under {protocol!r}: {metrics})"
        )
    return pd.Series(points, name=f"{protocol}/{metric}/{stat}", dtype="float64").rename_axis(
        "round"
    )


def _run_yaml_series(run: RunData, metric: str) -> pd.Series:
    """run.yaml's `metric` (one of RUN_METRICS) as a one-point series at the final ok round."""
    name = f"{RUN}/{metric}/{VALUE}"
    if metric not in RUN_METRICS:
        raise RunDataError(
            f"protocol {RUN!r} reads {list(RUN_METRICS)} of run.yaml, not {metric!r}"
        )
    value = run.info.get(metric)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RunDataError(
            f"{run.run_dir / 'run.yaml'}: no number under {metric!r} (got {value!r}); runs "
            "trained before the engine recorded it must be trained again"
        )
    if not run.ok_records:
        return pd.Series({}, name=name, dtype="float64").rename_axis("round")
    last = run.ok_records[-1]["round"]
    return pd.Series({last: float(value)}, name=name, dtype="float64").rename_axis("round")


def collect_runs(run_dirs: Iterable[str | Path]) -> pd.DataFrame:
    """Tidy frame: one row per (run, round, protocol, metric, stat); diverged marker rows have NaN.

    Protocols are those of `summary` plus "global_test" (stat "value") and "train" (metric "loss",
    stat "value": the mean training loss of the round). A diverged run contributes one extra row
    at its divergence round with status "diverged" and protocol/metric/stat/value empty.
    """
    cols: dict[str, list] = {c: [] for c in RUN_FRAME_COLUMNS}
    for run_dir in run_dirs:
        run = load_run(run_dir)
        fixed = {**run.key, "standin": run.standin, "run_dir": str(run.run_dir)}
        for r in run.records:
            rows = list(record_values(r)) if r["status"] == "ok" else [(None, None, None, math.nan)]
            for protocol, metric, stat, value in rows:
                for k, v in fixed.items():
                    cols[k].append(v)
                cols["round"].append(r["round"])
                cols["status"].append(r["status"])
                cols["protocol"].append(protocol)
                cols["metric"].append(metric)
                cols["stat"].append(stat)
                cols["value"].append(value)
    return pd.DataFrame(cols).astype({"seed": "int64", "round": "int64", "value": "float64"})


def collect_clients(run_dirs: Iterable[str | Path]) -> pd.DataFrame:
    """Tidy frame of per-client values: one row per (run, round, protocol, client, metric)."""
    cols: dict[str, list] = {c: [] for c in CLIENT_FRAME_COLUMNS}
    for run_dir in run_dirs:
        run = load_run(run_dir)
        fixed = {**run.key, "standin": run.standin, "run_dir": str(run.run_dir)}
        for r in run.ok_records:
            for protocol, res in r["clients"].items():
                ids, ns = res.get("ids", []), res.get("n", [])
                metrics = [k for k in res if k not in ("ids", "n")]
                for metric in metrics:
                    if len(res[metric]) != len(ids) or len(ns) != len(ids):
                        raise RunDataError(
                            f"{run.run_dir / 'metrics.jsonl'}: round {r['round']}, protocol "
                            f"{protocol!r}: {metric} has {len(res[metric])} values for "
                            f"{len(ids)} client ids and {len(ns)} sizes"
                        )
                    for cid, n, value in zip(ids, ns, res[metric], strict=True):
                        for k, v in fixed.items():
                            cols[k].append(v)
                        cols["round"].append(r["round"])
                        cols["protocol"].append(protocol)
                        cols["client"].append(cid)
                        cols["n"].append(n)
                        cols["metric"].append(metric)
                        cols["value"].append(_finite(value))
    types = {"seed": "int64", "round": "int64", "client": "int64", "n": "int64", "value": "float64"}
    return pd.DataFrame(cols).astype(types)
