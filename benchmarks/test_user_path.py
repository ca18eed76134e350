"""The user-path figure: the median round of a real run, as the workflow's train job runs it
(`fedbench.jobs.train` in a fresh Python process, as a train job gets one: Snakemake's `script:`
directive starts it, or the warm worker forks it from a server that has only imported modules;
files in, the run's log and run.yaml out), for the FedAvg TwoNN round of test_round.py. The
summary sets it beside the best-of micro-benchmark of the same round.

A fresh process, not this one: after the other benchmarks the pytest process's rounds ran
1.0-1.3 ms slower at 10 clients (7.9 against 6.6 ms for the rounds that only train, 2026-12-05),
which no train job sees."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from bench_lib import BATCH, LR, NUM_CLASSES, SAMPLES_PER_CLIENT, sample_inputs

from fedbench.config import load_catalog, resolve_run
from fedbench.data.base import ArrayDataset, save_dataset
from fedbench.data.partition import Partition, save_partition

ROOT = Path(__file__).resolve().parents[1]
ROUNDS = 12  # enough rounds for a stable median (every eval_every-th round also evaluates)
TEST_PER_CLIENT = 10


# The train job, as workflow/scripts/train.py calls it (no checkpoints).
JOB = """import json, sys
from fedbench.jobs import train
a = json.load(open(sys.argv[1]))
train(a["spec"], a["data"], a["part"], a["out"], a["log"], a["threads"], "cpu", 0, 0)
"""


def _files(tmp: Path, clients: int, per_client: int) -> tuple[Path, Path]:
    """A random TwoNN-shaped training pool of `clients` x `per_client` samples and its split."""
    rng = np.random.default_rng(0)
    n = clients * (per_client + TEST_PER_CLIENT)
    x = sample_inputs((1, 28, 28), n, rng)
    y = rng.integers(0, NUM_CLASSES, n)
    ds = ArrayDataset("bench", x, y, x[:0], y[:0], NUM_CLASSES, True, "random benchmark inputs")
    save_dataset(ds, tmp / "data.npz")
    rows = np.arange(n).reshape(clients, per_client + TEST_PER_CLIENT)
    part = Partition([r[:per_client] for r in rows], [r[per_client:] for r in rows])
    save_partition(tmp / "part.npz", part)
    return tmp / "data.npz", tmp / "part.npz"


@pytest.mark.parametrize("clients", [10, 100, 1000])
def test_user_path_round(benchmark, tmp_path, clients):
    per_client = SAMPLES_PER_CLIENT if benchmark.enabled else BATCH
    rounds = ROUNDS if benchmark.enabled else 2
    data, part = _files(tmp_path, clients, per_client)
    catalog = load_catalog(ROOT / "config" / "config.yaml")
    spec = resolve_run(catalog, "quick", "fmnist", "dir0.3-k100", "twonn", "fedavg", 0)
    spec["training"].update(
        rounds=rounds,
        batch_size=BATCH,
        lr=LR,
        local_epochs=1,
        clients_per_round=clients,
    )  # evaluation every eval_every rounds (the catalog's) and at the last, as a real run
    out = {"metrics": tmp_path / "run" / "metrics.jsonl", "run": tmp_path / "run" / "run.yaml"}
    log = tmp_path / "train.log"

    threads = torch.get_num_threads()  # the micro-benchmarks' own

    args = {"spec": spec, "data": str(data), "part": str(part), "log": str(log)}
    args.update(out={k: str(v) for k, v in out.items()}, threads=threads)
    (tmp_path / "job.json").write_text(json.dumps(args))

    def run():
        subprocess.run([sys.executable, "-c", JOB, str(tmp_path / "job.json")], check=True)
        return yaml.safe_load(out["run"].read_text())

    info = benchmark.pedantic(run, rounds=1, warmup_rounds=0)
    assert info["rounds_completed"] == rounds and info["executor"] == "vectorised"
    per_round = [
        float(line.rsplit("(this round ", 1)[1].rstrip(")\n"))
        for line in log.open()
        if "(this round " in line
    ]
    assert len(per_round) == rounds
    evaluated = [json.loads(line)["round"] for line in out["metrics"].open()]
    assert evaluated and evaluated[-1] == rounds  # the last round always evaluates
    benchmark.extra_info.update(
        kind="user_path",
        arch="twonn",
        clients=clients,
        rounds=rounds,
        threads=threads,
        median_round_s=info["median_round_seconds"],
        round_s=per_round,
        eval_rounds=evaluated,
    )
