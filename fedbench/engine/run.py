"""One run end to end: resolved spec + prepared data + partition -> metrics.jsonl and run.yaml."""

from __future__ import annotations

import logging
import platform
import subprocess
import time
from pathlib import Path
from typing import Any

import torch

import fedbench
from fedbench.algorithms import build_algorithm
from fedbench.data.base import load_dataset
from fedbench.data.partition import load_partition
from fedbench.engine.config import TrainConfig
from fedbench.engine.federation import Federation
from fedbench.engine.functional import make_apply, params_of
from fedbench.engine.loop import run_rounds
from fedbench.engine.vectorised import resolve_executor
from fedbench.io import atomic_path, write_jsonl, write_yaml
from fedbench.models import build_model
from fedbench.models.superfed import choose_recurrent_impl
from fedbench.rng import Streams

log = logging.getLogger("fedbench.run")


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
) -> dict[str, Any]:
    """Train one run; write its metrics and run.yaml atomically; return the run.yaml content.

    With `params_path`, the final global parameters are also saved there (torch.save, CPU).
    """
    torch.set_num_threads(threads)
    dev = pick_device(device)
    ds = load_dataset(dataset_path)
    part = load_partition(partition_path)
    streams = Streams(spec["seed"])
    cfg = TrainConfig.from_dict(spec["training"])
    algo = build_algorithm(spec["algorithm"]["algorithm"], **spec["algorithm"]["params"])
    model = build_model(
        spec["model"]["arch"],
        input_shape=tuple(ds.x_train.shape[1:]),
        num_classes=ds.num_classes,
        init_seed=streams.torch_seed("init"),
        **spec["model"]["params"],
    ).to(dev)
    y_train = ds.y_train if part.labels is None else part.labels  # label noise lives in the split
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
    if cfg.augment is not None:  # normalise the pools once; batches are rotated/flipped later
        fed.x, fed.x_test = (
            cfg.augment.normalise_pool(fed.x),
            cfg.augment.normalise_pool(fed.x_test),
        )
    executor, why = resolve_executor(cfg.executor, model)
    lstm_impl = choose_recurrent_impl(model, executor)
    log.info("executor %s (%s), device %s, %d threads", executor, why, dev, threads)
    started = time.perf_counter()

    def progress(record: dict[str, Any]) -> None:
        if record["status"] != "ok":
            log.warning("round %d: %s (%s)", record["round"], record["status"], record["reason"])
            return
        s = record["summary"].get("global", {}).get("top1", {})
        elapsed = time.perf_counter() - started
        eta = elapsed / record["round"] * (cfg.rounds - record["round"])
        log.info(
            "round %d/%d train_loss %.4f top1(wmean) %.4f elapsed %.1fs eta %.1fs",
            record["round"],
            cfg.rounds,
            record["train_loss"],
            s.get("wmean", float("nan")),
            elapsed,
            eta,
        )

    def fresh_init(client_id: int) -> dict[str, torch.Tensor]:
        # Keyed by client in the `init` stream: independent of the global init and of each other.
        other = build_model(
            spec["model"]["arch"],
            input_shape=tuple(ds.x_train.shape[1:]),
            num_classes=ds.num_classes,
            init_seed=streams.torch_seed("init", 1, client_id),
            **spec["model"]["params"],
        ).to(dev)
        return params_of(other)

    state = run_rounds(
        algo, make_apply(model), fed, cfg, streams, params_of(model), progress, executor, fresh_init
    )
    write_jsonl(metrics_path, state.records)
    if params_path is not None:
        with atomic_path(params_path, suffix=".pt") as tmp:
            torch.save({k: v.detach().cpu() for k, v in state.global_params.items()}, tmp)
    info = {
        "run": {
            k: spec[k]["name"] if isinstance(spec[k], dict) else spec[k]
            for k in ("scale", "dataset", "partition", "model", "algorithm", "seed")
        },
        "status": state.status,
        "diverged_round": state.diverged_round,
        "rounds": cfg.rounds,
        "rounds_completed": state.round if state.status == "ok" else state.round - 1,
        "eval_protocols": ["global", *algo.personal_protocols],
        "standin": bool(ds.standin),
        "data_provenance": ds.provenance,
        "num_clients": fed.num_clients,
        "spec": spec,
        "fedbench_version": fedbench.__version__,
        "git_commit": git_commit(),
        "torch_version": str(torch.__version__),
        "python_version": platform.python_version(),
        "device": str(dev),
        "executor": executor,
        "executor_reason": why,
        **({"lstm_impl": lstm_impl} if lstm_impl is not None else {}),
        **state.executor_info,
        "threads": threads,
        # Wall-clock seconds of the rounds (training and evaluation; not data loading).
        "train_seconds": round(time.perf_counter() - started, 1),
    }
    write_yaml(run_yaml_path, info)
    return info
