"""Fake run directories, written exactly as the engine lays them out."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedbench.io import write_jsonl, write_yaml
from fedbench.metrics import distribution_pack

OFFSETS = (-0.05, 0.0, 0.05)
SIZES = (10, 20, 30)
CURVES = {  # per-seed client-mean top1 at each evaluated round
    0: {5: 0.60, 10: 0.75, 15: 0.70, 20: 0.68},
    1: {5: 0.62, 10: 0.70, 15: 0.78, 20: 0.74},
    2: {5: 0.55, 10: 0.65, 15: 0.66, 20: 0.67},
}


METRICS = ("loss", "top1", "top5")
# Each client's metric from its top1 (ece/mce only in runs made with metrics=(..., "ece", "mce")).
CLIENT_VALUE = {
    "loss": lambda v: 1.0 - v,
    "top1": lambda v: v,
    "top5": lambda v: min(1.0, v + 0.1),
    "ece": lambda v: (1.0 - v) / 4,
    "mce": lambda v: (1.0 - v) / 2,
}
PROTOCOL_OFFSET = {"global": 0.0, "best_lambda": 0.15}  # any other protocol: +0.1


def _clients(top1_mean: float, metrics: tuple[str, ...], offsets: tuple[float, ...]) -> dict:
    """Three clients at `top1_mean` + offsets; other metrics per CLIENT_VALUE."""
    top1 = [top1_mean + o for o in offsets]
    return {"ids": [0, 1, 2], "n": list(SIZES)} | {
        m: [CLIENT_VALUE[m](v) for v in top1] for m in metrics
    }


def _record(
    t: int,
    top1_mean: float,
    protocols: tuple[str, ...],
    metrics=METRICS,
    offsets=OFFSETS,
    protocol_offset: dict[str, float] | None = None,
) -> dict:
    """One ok evaluation record in the engine's format (protocol_offset: per-protocol shifts)."""
    shift = PROTOCOL_OFFSET | (protocol_offset or {})
    clients = {p: _clients(top1_mean + shift.get(p, 0.1), metrics, offsets) for p in protocols}
    summary = {p: {m: distribution_pack(c[m], c["n"]) for m in metrics} for p, c in clients.items()}
    glob = {"loss": 1.0 - top1_mean, "top1": top1_mean + 0.01, "top5": 0.99, "n": 100}
    return {
        "round": t,
        "status": "ok",
        "lr": 0.01,
        "train_loss": 2.0 / t,
        "global_test": glob,
        "clients": clients,
        "summary": summary,
    }


def make_run(
    root: Path,
    seed: int = 0,
    algorithm: str = "fedavg",
    dataset: str = "mnist",
    scale: str = "quick",
    diverged_round: int | None = None,
    standin: bool = False,
    protocols: tuple[str, ...] = ("global",),
    curve: dict[int, float] | None = None,
    metrics: tuple[str, ...] = METRICS,
    offsets: tuple[float, ...] = OFFSETS,
    protocol_offset: dict[str, float] | None = None,
    precision: str | None = None,
    git_commit: str | None = None,
) -> Path:
    """Write metrics.jsonl and run.yaml of one fake run (`precision` None: a run.yaml written
    before training.precision existed); return its directory."""
    run_dir = root / scale / "runs" / dataset / "dir0.1" / "twocnn" / algorithm / f"seed{seed}"
    curve = curve if curve is not None else CURVES[seed]
    if diverged_round is None:
        records = [
            _record(t, v, protocols, metrics, offsets, protocol_offset) for t, v in curve.items()
        ]
    else:
        records = [
            _record(t, v, protocols, metrics, offsets, protocol_offset)
            for t, v in curve.items()
            if t < diverged_round
        ]
        records.append({"round": diverged_round, "status": "diverged", "reason": "non-finite"})
    write_jsonl(run_dir / "metrics.jsonl", records)
    run = dict(
        scale=scale,
        dataset=dataset,
        partition="dir0.1",
        model="twocnn",
        algorithm=algorithm,
        seed=seed,
    )
    write_yaml(
        run_dir / "run.yaml",
        {
            "run": run,
            "status": "ok" if diverged_round is None else "diverged",
            "diverged_round": diverged_round,
            "rounds": max(curve),
            "standin": standin,
            "data_provenance": "generated" if standin else "test fixture",
            "spec": {"seed": seed},
            "fedbench_version": "0.1.0",
            "git_commit": git_commit,
            "torch_version": "x",
            "device": "cpu",
            "executor": "sequential",
            **({} if precision is None else {"precision": precision}),
        },
    )
    return run_dir


@pytest.fixture
def runs(tmp_path: Path) -> dict[str, Path]:
    """Named fake runs under tmp_path/results."""
    root = tmp_path / "results"
    return {
        "avg0": make_run(root, 0),
        "avg1": make_run(root, 1),
        "prox0_div": make_run(root, 0, algorithm="fedprox", diverged_round=12),
        "prox1": make_run(root, 1, algorithm="fedprox"),
        "avg0_standin": make_run(root, 0, dataset="synthetic", standin=True),
        "avg0_personal": make_run(root, 0, algorithm="ditto", protocols=("global", "personal")),
    }


@pytest.fixture
def make(tmp_path: Path):
    """make_run bound to tmp_path/results, for tests that need an unusual run."""
    return lambda **kw: make_run(tmp_path / "results", **kw)
