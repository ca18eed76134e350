"""Fake finished runs of the quick grid's table1, laid out where its spec looks for them."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedbench.grid import cells, load_grid
from fedbench.io import write_jsonl, write_yaml
from fedbench.metrics import distribution_pack

ROOT = Path(__file__).resolve().parents[2]
TOP1 = {"fedavg": 0.60, "fedprox": 0.601, "scaffold": 0.70}


def fake_run(run_dir: Path, key, top1: float, scale: str = "quick") -> None:
    """One finished run whose clients all score `top1` (test sizes 10, 20, 30)."""
    clients = {"ids": [0, 1, 2], "n": [10, 20, 30], "top1": [top1] * 3, "loss": [1 - top1] * 3}
    summary = {"global": {m: distribution_pack(clients[m], clients["n"]) for m in ("top1", "loss")}}
    record = {"round": 40, "status": "ok", "lr": 0.05, "train_loss": 0.5}
    write_jsonl(
        run_dir / "metrics.jsonl", [{**record, "clients": {"global": clients}, "summary": summary}]
    )
    run = {"scale": scale, "seed": key.seed}
    run |= {f: getattr(key, f) for f in ("dataset", "partition", "model", "algorithm")}
    info = {"run": run, "status": "ok", "rounds": 40, "standin": False, "device": "cpu"}
    write_yaml(run_dir / "run.yaml", {**info, "spec": {"seed": key.seed}})


@pytest.fixture
def quick_runs(tmp_path, monkeypatch, catalog):
    """The quick grid, with table1's runs written under tmp_path (the working directory): TOP1 per
    row + 0.01 per seed, SCAFFOLD 5 points more on the 2-shards split, and SCAFFOLD's seed 2 on
    Synthetic not finished."""
    grid = load_grid(ROOT / "config" / "papers" / "quick.yaml", catalog)
    cellmap = cells(grid, "tables", "table1", catalog, "quick")
    monkeypatch.chdir(tmp_path)
    for (row, col), keys in cellmap.items():
        for key in keys:
            if (row, col, key.seed) == ("scaffold", "synthetic", 2):
                continue
            bonus = 0.05 if (row, col) == ("scaffold", "image-shards") else 0.0
            fake_run(Path(key.folder("quick")), key, TOP1[row] + bonus + 0.01 * key.seed)
    return grid
