"""A run end to end from files: byte-identical outputs for the same seed, run.yaml provenance."""

from pathlib import Path

import numpy as np
import pytest
import yaml

from fedbench.config import load_catalog, resolve_run
from fedbench.data import prepare_dataset
from fedbench.data.base import save_dataset
from fedbench.data.partition import make_partition, save_partition
from fedbench.engine.run import execute_run
from fedbench.rng import Streams


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    root = tmp_path_factory.mktemp("run")
    catalog = load_catalog(Path(__file__).resolve().parents[2] / "config" / "config.yaml")
    params = {"alpha": 1.0, "beta": 1.0, "num_clients": 6}
    ds = prepare_dataset("synthetic", params, None, "standin", np.random.default_rng(0))
    save_dataset(ds, root / "data.npz")
    spec_part = {"kind": "natural", "test_fraction": 0.2}
    for seed in (0, 1):
        part = make_partition(
            ds.y_train, ds.groups, spec_part, Streams(seed).generator("partition")
        )
        save_partition(root / f"part{seed}.npz", part)
    return root, catalog


def _run(root, catalog, seed, tag, executor="sequential", **training):
    spec = resolve_run(catalog, "smoke", "synthetic-1-1", "natural", "linear", "scaffold", seed)
    spec["training"].update(rounds=3, eval_every=1, executor=executor, **training)
    out = root / tag
    paths = (root / "data.npz", root / f"part{seed}.npz", out / "metrics.jsonl", out / "run.yaml")
    info = execute_run(spec, *paths)
    return (out / "metrics.jsonl").read_bytes(), info, out


def test_same_seed_byte_identical_other_seed_differs(prepared):
    root, catalog = prepared
    a, info, out = _run(root, catalog, 0, "a")
    b, _, _ = _run(root, catalog, 0, "b")
    c, _, _ = _run(root, catalog, 1, "c")
    assert a == b
    assert a != c
    assert len(a.splitlines()) == 3
    written = yaml.safe_load((out / "run.yaml").read_text())
    assert written["status"] == "ok" and written["standin"] is True
    for key in (
        "fedbench_version",
        "git_commit",
        "torch_version",
        "device",
        "spec",
        "executor",
        "train_seconds",
    ):
        assert key in written
    assert written["run"]["algorithm"] == "scaffold" and written["spec"]["seed"] == 0
    assert written["precision"] == written["eval_precision"] == "fp32"
    assert sorted(p.name for p in out.iterdir()) == ["metrics.jsonl", "run.yaml"]


def test_run_yaml_records_the_precision(prepared):
    root, catalog = prepared
    fp32, _, _ = _run(root, catalog, 0, "fp32")
    bf16, info, out = _run(root, catalog, 0, "bf16", precision="bf16")
    written = yaml.safe_load((out / "run.yaml").read_text())
    assert written["precision"] == "bf16" and written["spec"]["training"]["precision"] == "bf16"
    assert written["eval_precision"] == "fp32"
    assert bf16 != fp32  # the setting reached the steps


def test_vectorised_run_matches_sequential_to_4_decimals(prepared):
    import json

    root, catalog = prepared
    seq, _, _ = _run(root, catalog, 0, "seq", "sequential")
    vec, info, _ = _run(root, catalog, 0, "vec", "vectorised")
    assert info["executor"] == "vectorised"
    assert info["chunk_size"] >= 1 and info["chunk_reason"] and info["vectorised_path"]
    for ls, lv in zip(seq.splitlines(), vec.splitlines()):
        rs, rv = json.loads(ls), json.loads(lv)
        for metric, pack in rs["summary"]["global"].items():
            for stat, value in pack.items():
                assert rv["summary"]["global"][metric][stat] == pytest.approx(value, abs=1e-4)


def test_params_pt_leaves_metrics_unchanged_and_feeds_the_landscape(prepared):
    import json

    import torch

    from fedbench.engine.landscape import compute_run_landscape
    from fedbench.landscape_file import LandscapeSettings, load_landscape

    root, catalog = prepared
    out = root / "params"
    data, part = out / "data.npz", out / "part.npz"
    ds = prepare_dataset(
        "mnist", {"n_train": 120, "n_test": 40}, None, "standin", Streams(0).generator("standin")
    )
    save_dataset(ds, data)
    spec_part = {"kind": "iid", "num_clients": 4, "test_fraction": 0.25}
    save_partition(
        part, make_partition(ds.y_train, None, spec_part, Streams(0).generator("partition"))
    )
    spec = resolve_run(catalog, "smoke", "mnist", "iid-k100", "linear", "fedavg", 0)
    spec["training"].update(rounds=2, eval_every=1, clients_per_round=2)
    execute_run(spec, data, part, out / "plain.jsonl", out / "plain.yaml")
    execute_run(spec, data, part, out / "m.jsonl", out / "run.yaml", params_path=out / "p.pt")
    assert (out / "m.jsonl").read_bytes() == (out / "plain.jsonl").read_bytes()
    params = torch.load(out / "p.pt", weights_only=True)
    assert params and all(v.device.type == "cpu" for v in params.values())
    settings = LandscapeSettings(span=0.5, points=3)
    compute_run_landscape(out / "run.yaml", out / "p.pt", data, out / "l.npz", settings)
    land = load_landscape(out / "l.npz")
    final = json.loads((out / "m.jsonl").read_text().splitlines()[-1])
    assert land["loss"].shape == (3, 3) and land["status"] == "ok" and land["standin"] is True
    # the grid's centre is the run's own final global-test loss (recorded to 6 digits)
    assert land["loss"][1, 1] == pytest.approx(final["global_test"]["loss"], rel=1e-5)
    assert land["n_test"] == land["n_test_total"] == 40


def test_init_seed_fixes_initial_weights_across_run_seeds(prepared):
    from fedbench.engine.train_config import TrainConfig
    from fedbench.rng import init_streams

    # The init stream of any run seed under init_seed=k is the init stream of run seed k.
    for run_seed in (0, 3, 11):
        fixed = init_streams(Streams(run_seed), 7)
        assert fixed.torch_seed("init") == Streams(7).torch_seed("init")
        assert fixed.torch_seed("init", 1, 4) == Streams(7).torch_seed("init", 1, 4)
    assert init_streams(Streams(3), None).torch_seed("init") == Streams(3).torch_seed("init")
    assert Streams(3).torch_seed("init") != Streams(7).torch_seed("init")
    # End to end: init_seed equal to the run's own seed changes nothing; another one does.
    root, catalog = prepared
    default, _, _ = _run(root, catalog, 0, "init-default")
    spec = resolve_run(catalog, "smoke", "synthetic-1-1", "natural", "linear", "scaffold", 0)
    outs = {}
    for init_seed in (0, 1):
        spec["training"].update(rounds=3, eval_every=1, executor="sequential", init_seed=init_seed)
        out = root / f"init{init_seed}"
        paths = (root / "data.npz", root / "part0.npz", out / "metrics.jsonl", out / "run.yaml")
        info = execute_run(spec, *paths)
        assert info["spec"]["training"]["init_seed"] == init_seed
        outs[init_seed] = (out / "metrics.jsonl").read_bytes()
    assert outs[0] == default
    assert outs[1] != default
    for bad in (-1, "2022", True, 1.5):
        with pytest.raises(ValueError, match="training.init_seed"):
            TrainConfig(
                rounds=1, batch_size=1, lr=0.1, local_epochs=1, clients_per_round=1, init_seed=bad
            )


def test_a_fedevg_run_keeps_its_synthetic_set_beside_the_model(prepared):
    import torch

    root, catalog = prepared
    out = root / "fedevg"
    data, part = out / "data.npz", out / "part.npz"
    ds = prepare_dataset(
        "fashion_mnist",
        {"n_train": 80, "n_test": 20, "resize": 32},
        None,
        "standin",
        Streams(0).generator("standin"),
    )
    save_dataset(ds, data)
    spec_part = {"kind": "fedevg_code", "num_clients": 2, "alpha": 1.0, "test_fraction": 0.25}
    save_partition(
        part, make_partition(ds.y_train, None, spec_part, Streams(0).generator("partition"))
    )
    spec = resolve_run(
        catalog, "smoke", "fedevg-fmnist", "fevq-k10-a1", "fevq-resnet10-h8", "fevq-fedevg", 1
    )
    spec["training"].update(rounds=1, eval_every=1)
    info = execute_run(
        spec, data, part, out / "m.jsonl", out / "run.yaml", params_path=out / "p.pt"
    )
    art = torch.load(out / "artifacts.pt", weights_only=True)
    assert info["artifacts"] == "artifacts.pt"
    assert art["synthetic_x"].shape == (100, 1, 32, 32)  # L x spc, at the resized shape
    assert art["synthetic_y"].tolist() == [c for c in range(10) for _ in range(10)]
    assert 0 <= art["synthetic_x"].min() and art["synthetic_x"].max() <= 1  # one server step
    plain = root / "plain-fedevg"
    execute_run(spec, data, part, plain / "m.jsonl", plain / "run.yaml")
    assert not (plain / "artifacts.pt").exists()  # only beside a model that is kept
