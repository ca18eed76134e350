"""One run end to end: resolved spec + prepared data + partition -> metrics.jsonl and run.yaml."""

from __future__ import annotations

import logging
import platform
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

import torch

import fedbench
from fedbench.algorithms.opt_in import PersonalEvaluation, ServerOutputs, opt_in
from fedbench.data.base import load_dataset
from fedbench.data.partition import load_partition
from fedbench.engine.build import build_run
from fedbench.engine.checkpoint import Checkpointer, CheckpointPolicy, default_path, spec_hash
from fedbench.engine.federation import Federation
from fedbench.engine.loop import Callbacks, RunState, run_rounds
from fedbench.io import atomic_paths, dump_bytes, jsonl_text, yaml_text
from fedbench.rng import Streams

log = logging.getLogger("fedbench.run")

# The file beside params.pt that keeps an algorithm's artifacts (ServerOutputs.artifacts: FedEvg's
# final synthetic set), written with the run's other outputs.
ARTIFACTS_FILE = "artifacts.pt"


def pick_device(requested: str = "auto") -> torch.device:
    """`cuda` when present (or asked for), else the CPU."""
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(requested)


def git_commit() -> str | None:
    """The fedbench checkout's commit (with '-dirty' if modified), or None outside git."""
    root = Path(fedbench.__file__).resolve().parent.parent
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return sha + ("-dirty" if dirty else "")


def execute_run(
    spec: dict[str, Any],
    dataset_path: str | Path,
    partition_path: str | Path,
    metrics_path: str | Path,
    run_yaml_path: str | Path,
    threads: int = 1,
    device: str = "auto",
    params_path: str | Path | None = None,
    checkpoint: CheckpointPolicy | None = None,
    checkpoint_path: str | Path | None = None,
) -> dict[str, Any]:
    """Train one run; write its metrics and run.yaml atomically; return the run.yaml content.

    With `params_path`, the final global parameters are also saved there (torch.save, CPU).
    Checkpoints (`checkpoint`, default `CheckpointPolicy()`; `every_rounds=0` turns them off) go
    to `checkpoint_path` (default: `checkpoint.pt` beside the metrics file); a run finding a
    valid checkpoint of the same spec there resumes from it, and removes it once complete.
    """
    torch.set_num_threads(threads)
    dev = pick_device(device)
    ds = load_dataset(dataset_path)
    streams = Streams(spec["seed"])
    run = build_run(spec, ds, dev, streams)
    algo, cfg = run.algorithm, run.config
    fed = _federation(ds, load_partition(partition_path), dev, cfg)
    log.info(
        "executor %s (%s), device %s, %d threads", run.executor, run.executor_reason, dev, threads
    )
    ckpt = Checkpointer(
        checkpoint_path or default_path(metrics_path),
        spec_hash(spec),
        checkpoint or CheckpointPolicy(),
        meta={"git_commit": git_commit()},
    )
    resumed = _resume(ckpt, dev)
    progress = _Progress(cfg.rounds, ckpt, resumed)
    state = run_rounds(
        run,
        fed,
        streams,
        Callbacks(on_record=_log_divergence, after_round=progress.after_round),
        resume=resumed.state if resumed else None,
    )
    info = {
        **_run_fields(
            spec,
            state,
            cfg.rounds,
            opt_in(algo, PersonalEvaluation).personal_protocols,
            ds,
            fed.num_clients,
        ),
        "git_commit": ckpt.meta["git_commit"],
        "torch_version": str(torch.__version__),
        "python_version": platform.python_version(),
        "device": str(dev),
        "executor": run.executor,
        "executor_reason": run.executor_reason,
        "precision": cfg.precision,
        "eval_precision": cfg.eval_precision,
        **({"lstm_impl": run.lstm_impl} if run.lstm_impl is not None else {}),
        **state.executor_info,
        "threads": threads,
        "resumed": resumed is not None,
        "resumed_from_round": progress.start_round if resumed else None,
        **({"resumed_from_commit": resumed.meta.get("git_commit")} if resumed else {}),
        # Wall-clock seconds of the rounds (training and evaluation; not data loading), summed
        # over the sessions of a resumed run (rounds lost to a kill are not counted).
        "train_seconds": round(progress.seconds(), 1),
        # The median round of this session (a round that evaluates included): the user-path
        # figure `make bench` sets beside its best-of micro-benchmarks.
        "median_round_seconds": _rounded(progress.median_round()),
    }
    artifacts = opt_in(algo, ServerOutputs).artifacts(state.server_state)
    if artifacts and params_path is not None:
        info["artifacts"] = ARTIFACTS_FILE
    _write_outputs(state, info, metrics_path, run_yaml_path, params_path, artifacts)
    ckpt.remove()
    return info


def _federation(ds, part, dev: torch.device, cfg) -> Federation:
    """The training pool on the device, clients as index tensors into it (label noise lives in
    the split); augmentation's normalisation applied to the pools once."""
    y_train = ds.y_train if part.labels is None else part.labels
    fed = Federation.from_arrays(
        ds.x_train,
        y_train,
        part.train,
        part.test,
        ds.x_test,
        ds.y_test,
        ds.num_classes,
        dev,
        val=part.val,
    )
    if cfg.augment is not None:  # batches are rotated/flipped later, per client
        fed.x, fed.x_test = (
            cfg.augment.normalise_pool(fed.x),
            cfg.augment.normalise_pool(fed.x_test),
        )
    return fed


def _resume(ckpt: Checkpointer, dev: torch.device):
    """The valid checkpoint of this spec to resume from (None: start afresh)."""
    ckpt.clean_temporaries()
    resumed = ckpt.load(dev) if ckpt.policy.every_rounds else None
    if resumed and resumed.meta.get("git_commit") != ckpt.meta["git_commit"]:
        log.warning(
            "resuming a checkpoint of commit %s under %s: run.yaml records both",
            resumed.meta.get("git_commit"),
            ckpt.meta["git_commit"],
        )
    return resumed


def _log_divergence(record: dict[str, Any]) -> None:
    if record["status"] != "ok":
        log.warning("round %d: %s (%s)", record["round"], record["status"], record["reason"])


class _Progress:
    """After each round: one log line with the time per round and the estimate left, and a
    checkpoint when the policy says so. Times add earlier sessions' kept rounds on resume."""

    def __init__(self, rounds: int, ckpt: Checkpointer, resumed) -> None:
        self.rounds, self.ckpt = rounds, ckpt
        self.start_round = resumed.state.round if resumed else 0
        self.before = resumed.seconds if resumed else 0.0
        self.started = self.last = time.perf_counter()
        self.round_seconds: list[float] = []  # this session's rounds, each on its own

    def median_round(self) -> float | None:
        """Median wall-clock seconds of one round (training, aggregation and any evaluation) over
        this session's rounds; None before any."""
        return float(statistics.median(self.round_seconds)) if self.round_seconds else None

    def seconds(self) -> float:
        """Wall-clock seconds of this run's rounds so far, earlier sessions included."""
        return self.before + time.perf_counter() - self.started

    def after_round(self, state: RunState, train_loss: float) -> None:
        now = time.perf_counter()
        self.round_seconds.append(now - self.last)
        self.last = now
        elapsed = now - self.started
        per_round = elapsed / (state.round - self.start_round)
        last = state.records[-1] if state.records else None
        record = last if last is not None and last["round"] == state.round else None
        eta = per_round * (self.rounds - state.round)
        log.info(
            progress_line(state.round, self.rounds, train_loss, record, eta)
            + f" s/round {per_round:.2f} (this round {self.round_seconds[-1]:.4f})"
        )
        if state.round < self.rounds:
            self.ckpt.maybe_save(state, self.before + elapsed)


def _rounded(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def _run_fields(
    spec: dict, state: RunState, rounds: int, protocols, ds, num_clients: int
) -> dict[str, Any]:
    """run.yaml's description of the run: names, outcome, data, spec and version."""
    return {
        "run": {
            k: spec[k]["name"] if isinstance(spec[k], dict) else spec[k]
            for k in ("scale", "dataset", "partition", "model", "algorithm", "seed")
        },
        "status": state.status,
        "diverged_round": state.diverged_round,
        "rounds": rounds,
        "rounds_completed": state.round if state.status == "ok" else state.round - 1,
        "eval_protocols": ["global", *protocols],
        "standin": bool(ds.standin),
        "data_provenance": ds.provenance,
        "num_clients": num_clients,
        "spec": spec,
        "fedbench_version": fedbench.__version__,
    }


def _write_outputs(
    state: RunState,
    info: dict[str, Any],
    metrics_path: str | Path,
    run_yaml_path: str | Path,
    params_path: str | Path | None,
    artifacts: dict[str, torch.Tensor] | None = None,
) -> None:
    """metrics.jsonl, run.yaml and (if asked) params.pt, with the algorithm's artifacts beside
    params.pt (ARTIFACTS_FILE) when it has any: all or none (a full disk leaves no half file)."""
    files = [metrics_path, run_yaml_path, *([params_path] if params_path is not None else [])]
    keep = bool(artifacts) and params_path is not None
    if keep:
        files.append(Path(params_path).with_name(ARTIFACTS_FILE))
    with atomic_paths(*files) as tmps:
        dump_bytes(tmps[0], jsonl_text(state.records).encode())
        dump_bytes(tmps[1], yaml_text(info).encode())
        if params_path is not None:
            torch.save({k: v.detach().cpu() for k, v in state.global_params.items()}, tmps[2])
        if keep:
            torch.save({k: v.detach().cpu() for k, v in artifacts.items()}, tmps[3])


def _duration(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


def progress_line(
    round_: int, rounds: int, train_loss: float, record: dict[str, Any] | None, eta: float
) -> str:
    """One short, stable log line per round: `round 12/200 loss 0.4312 acc 0.8123 eta 0:10:12`.

    `acc` is the global model's top-1 over all clients' test samples (client-weighted mean), on
    evaluation rounds only (`-` otherwise); `eta` is H:MM:SS from the mean round time so far.
    """
    acc = "-"
    if record is not None:
        wmean = record["summary"].get("global", {}).get("top1", {}).get("wmean")
        if wmean is None and record.get("global_test"):
            wmean = record["global_test"].get("top1")
        if wmean is not None:
            acc = f"{wmean:.4f}"
    return f"round {round_}/{rounds} loss {train_loss:.4f} acc {acc} eta {_duration(eta)}"
