"""A training job's fixed cost: a fresh interpreter that imports the entry point
(fedbench.engine.run) and trains one smoke-sized round (3 generated clients, sequential
executor), from process start to the end of its first round.

The timed value is the subprocess's wall time; extra_info splits it as the child measured it
(`import_s`: the entry point's import, `run_s`: execute_run), from the last timed round.
"""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fedbench import worker
from fedbench.config import load_catalog, resolve_run
from fedbench.data import prepare_dataset
from fedbench.data.base import save_dataset
from fedbench.data.partition import make_partition, save_partition
from fedbench.rng import Streams

CATALOG = Path(__file__).resolve().parents[1] / "config" / "config.yaml"
CLIENTS = 3
CHILD = """
import json, sys, time
started = time.perf_counter()
from fedbench.engine.run import execute_run
imported = time.perf_counter()
spec, paths = json.loads(sys.argv[1])
execute_run(spec, *paths)
print(json.dumps({"import_s": imported - started, "run_s": time.perf_counter() - imported}))
"""


def _one_round_job(tmp_path: Path) -> tuple[dict, list[str]]:
    """A smoke-sized run (one round, generated data) and its four file paths."""
    params = {"alpha": 1.0, "beta": 1.0, "num_clients": CLIENTS}
    ds = prepare_dataset("synthetic", params, None, "standin", Streams(0).generator("standin"))
    save_dataset(ds, tmp_path / "data.npz")
    split = {"kind": "natural", "test_fraction": 0.2}
    part = make_partition(ds.y_train, ds.groups, split, Streams(0).generator("partition"))
    save_partition(tmp_path / "part.npz", part)
    spec = resolve_run(
        load_catalog(CATALOG), "smoke", "synthetic-1-1", "natural", "linear", "fedavg", 0
    )
    spec["training"].update(
        rounds=1, eval_every=1, clients_per_round=CLIENTS, executor="sequential"
    )
    paths = [str(tmp_path / n) for n in ("data.npz", "part.npz", "metrics.jsonl", "run.yaml")]
    return spec, paths


def test_startup(benchmark, tmp_path):
    spec, paths = _one_round_job(tmp_path)
    cmd = [sys.executable, "-c", CHILD, json.dumps([spec, paths])]

    def job():
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        return json.loads(out.strip().splitlines()[-1])

    split_times = benchmark.pedantic(job, rounds=3, iterations=1)
    assert (tmp_path / "metrics.jsonl").exists()
    benchmark.extra_info.update(
        kind="startup",
        clients=CLIENTS,
        executor="sequential",
        **{k: round(v, 3) for k, v in split_times.items()},
    )


WARM_ADAPTER = """
import json, sys, types
snakemake = types.SimpleNamespace(config={})
from fedbench.worker import delegate
delegate(snakemake, __file__)
from fedbench.engine.run import execute_run
spec, paths = json.loads(open(__file__ + ".json").read())
execute_run(spec, *paths)
"""


def test_startup_warm(benchmark, tmp_path):
    """The same job handed to the warm worker (fedbench/worker.py), as a smoke grid's jobs are:
    the adapter process's wall time, server start not included (it is paid once per grid)."""
    spec, paths = _one_round_job(tmp_path)
    script = tmp_path / "adapter.py"
    script.write_text(WARM_ADAPTER)
    Path(f"{script}.json").write_text(json.dumps([spec, paths]))
    sockets = tempfile.mkdtemp(prefix="fbw", dir="/tmp")  # a socket path must fit in 108 bytes
    env = {**os.environ, worker.DIR_ENV: sockets, worker.ENV_SWITCH: "1"}
    path = str(worker.socket_path(env))
    log = tmp_path / "server.log"
    with open(log, "w") as out:
        server = subprocess.Popen(
            worker.server_command(Path(path), 60),
            env=env,
            stdout=out,
            start_new_session=True,
        )
    try:
        end = time.monotonic() + 120
        while not Path(path).exists() and time.monotonic() < end:
            time.sleep(0.05)
        benchmark.pedantic(
            lambda: subprocess.run([sys.executable, str(script)], env=env, check=True),
            rounds=3,
            iterations=1,
        )
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert (tmp_path / "metrics.jsonl").exists()
    assert "adapter.py exit 0" in log.read_text()  # timed in the worker, not in-process
    benchmark.extra_info.update(kind="startup", clients=CLIENTS, executor="sequential", warm=True)
