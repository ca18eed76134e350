"""A training job's start-up: importing the entry point and training a round with the sequential
executor imports no heavy library it does not use, nor the other papers' modules."""

import json
import subprocess
import sys

from fedbench.algorithms import ALGORITHMS
from fedbench.config import resolve_run
from fedbench.data import SOURCES, prepare_dataset
from fedbench.data.base import save_dataset
from fedbench.data.partition import make_partition, save_partition
from fedbench.models import MODELS
from fedbench.rng import Streams

# What a job that trains FedAvg on a linear model imports nowhere (torch._dynamo: functorch's
# grad imports it on its first call; the sequential executor's step uses torch.autograd).
HEAVY = ("scipy", "pandas", "matplotlib", "datasets", "sklearn", "mlxtend", "torch._dynamo")

# A fresh interpreter: import the training entry point, train, report what was imported.
CHILD = """
import json, sys, time
started = time.perf_counter()
from fedbench.engine.run import execute_run
imported = time.perf_counter()
spec, paths = json.loads(sys.argv[1])
execute_run(spec, *paths)
print(json.dumps({
    "modules": sorted(sys.modules),
    "import_s": imported - started,
    "run_s": time.perf_counter() - imported,
}))
"""


def _loaded(modules: list[str], name: str) -> bool:
    return any(m == name or m.startswith(name + ".") for m in modules)


def test_training_job_imports_only_what_it_uses(tmp_path, catalog, record_property):
    params = {"alpha": 1.0, "beta": 1.0, "num_clients": 3}
    ds = prepare_dataset("synthetic", params, None, "standin", Streams(0).generator("standin"))
    save_dataset(ds, tmp_path / "data.npz")
    split = {"kind": "natural", "test_fraction": 0.2}
    part = make_partition(ds.y_train, ds.groups, split, Streams(0).generator("partition"))
    save_partition(tmp_path / "part.npz", part)
    spec = resolve_run(catalog, "smoke", "synthetic-1-1", "natural", "linear", "fedavg", 0)
    spec["training"].update(rounds=1, eval_every=1, clients_per_round=3, executor="sequential")
    paths = [str(tmp_path / n) for n in ("data.npz", "part.npz", "metrics.jsonl", "run.yaml")]

    out = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps([spec, paths])],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    report = json.loads(out.strip().splitlines()[-1])
    modules = report["modules"]
    record_property("import_s", round(report["import_s"], 3))
    record_property("run_s", round(report["run_s"], 3))

    assert (tmp_path / "metrics.jsonl").read_text().count("\n") == 1  # the round did run
    assert [h for h in HEAVY if _loaded(modules, h)] == []
    # Only the registry entries the run names are imported: fedavg's base, the linear model's.
    others = {
        *(ALGORITHMS.target(n) for n in ALGORITHMS if n != "fedavg"),
        *(MODELS.target(n) for n in MODELS if n != "linear"),
        *(SOURCES.target(n) for n in SOURCES),  # a job loads a prepared .npz
    }
    used = {ALGORITHMS.target("fedavg"), MODELS.target("linear")}
    unexpected = {t.split(":")[0] for t in others} - {t.split(":")[0] for t in used}
    assert sorted(m for m in unexpected if m in modules) == []
