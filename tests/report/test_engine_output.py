"""The report layer reads what the engine really writes (records from run_rounds)."""

from __future__ import annotations

from fedbench.algorithms import build_algorithm
from fedbench.engine.build import Run
from fedbench.engine.loop import run_rounds
from fedbench.engine.train_config import TrainConfig
from fedbench.io import write_jsonl, write_yaml
from fedbench.report.collect import collect_clients, collect_runs
from fedbench.report.tables import TableSpec, build_table
from fedbench.rng import Streams

CFG = dict(
    rounds=2, batch_size=4, lr=0.1, local_epochs=1, clients_per_round=2, executor="sequential"
)


def write_run(root, seed, state, rounds):
    """Lay out one engine result the way execute_run does."""
    run_dir = root / "quick" / "runs" / "toy" / "iid" / "mlp" / "fedavg" / f"seed{seed}"
    write_jsonl(run_dir / "metrics.jsonl", state.records)
    run = dict(
        scale="quick", dataset="toy", partition="iid", model="mlp", algorithm="fedavg", seed=seed
    )
    info = {
        "run": run,
        "status": state.status,
        "diverged_round": state.diverged_round,
        "rounds": rounds,
        "standin": False,
    }
    write_yaml(run_dir / "run.yaml", info)
    return run_dir


def _toy_table(run_dirs, stat: str) -> TableSpec:
    """The toy table: final-round global top1 (`stat` over clients) in %, FedAvg × Toy."""
    return TableSpec(
        paper="toy",
        name="table1",
        caption="toy",
        metric="top1",
        protocol="global",
        stat=stat,
        round="final",
        percent=True,
        rows=[{"id": "fedavg", "label": "FedAvg"}],
        columns=[{"id": "toy", "label": "Toy"}],
        cells={("fedavg", "toy"): run_dirs},
        scale="quick",
    )


def test_engine_records_collect_and_tabulate(tiny, tmp_path):
    fed, apply, p0 = tiny
    cfg = TrainConfig(**CFG)
    algo = build_algorithm("fedavg")
    dirs = [write_run(tmp_path, 0, run_rounds(Run(algo, apply, cfg, p0), fed, Streams(0)), 2)]
    df = collect_runs(dirs)
    assert sorted(df["round"].unique()) == [1, 2]
    assert {"global", "global_test", "train"} <= set(df["protocol"])
    assert (
        len(collect_clients(dirs)) == 2 * 4 * 5
    )  # rounds × clients × metrics (loss, top1, top5, ece, mce)
    spec = _toy_table(dirs, stat="wmean")
    cell = build_table(spec, None).iloc[0]
    final = df[(df["round"] == 2) & (df.protocol == "global") & (df.metric == "top1")]
    assert cell.n_runs == 1
    assert abs(cell.ours_mean - 100 * final[final.stat == "wmean"]["value"].mean()) < 1e-9


def test_engine_divergence_at_round_one(tiny, tmp_path):
    fed, apply, p0 = tiny
    fed.x = fed.x * 1e30
    cfg = TrainConfig(**{**CFG, "lr": 1e10})
    state = run_rounds(Run(build_algorithm("fedavg"), apply, cfg, p0), fed, Streams(0))
    run_dir = write_run(tmp_path, 0, state, 2)
    spec = _toy_table([run_dir], stat="mean")
    assert build_table(spec, None).iloc[0].status == "diverged (round 1)"
    assert len(collect_runs([run_dir])) == 1
