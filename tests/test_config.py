import copy
from pathlib import Path

import pytest
import yaml

from fedbench.config import ConfigError, resolve_run, unknown_name, validate_catalog

ROOT = Path(__file__).resolve().parent.parent


def _broken(catalog, path, value):
    c = copy.deepcopy(catalog)
    node = c
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return c


@pytest.mark.parametrize(
    "path, value, named",
    [
        (("roundz",), 3, "roundz"),
        (("datasets", "mnist", "source"), "mnistt", "mnistt"),
        (("partitions", "iid-k100", "kind"), "sharded", "partitions.iid-k100.kind"),
        (("partitions", "iid-k100", "val_fraction"), 1.5, "partitions.iid-k100: .*val_fraction"),
        (("partitions", "iid-k100", "val_fracton"), 0.1, "partitions.iid-k100: .*val_fracton"),
        (("models", "twonn", "arch"), "twonnn", "twonnn"),
        (("algorithms", "fedprox-mu0.01", "muu"), 0.1, "muu"),
        (("algorithms", "fedavg", "algorithm"), "fedsgd", "fedsgd"),
        (("training", "lrr"), 0.1, "lrr"),
        (("datasets", "fmnist", "training"), {"epochs": 2}, "epochs"),
        (("scales", "smoke", "caps"), {"round": 2}, "round"),
        (("scales", "quick-bf16", "training"), {"lr": 0.1}, r"scales\.quick-bf16\.training.*lr"),
    ],
)
def test_bad_catalog_entries_are_named(catalog, path, value, named):
    with pytest.raises(ConfigError, match=named):
        validate_catalog(_broken(catalog, path, value))


def test_resolve_run_merges_training_and_applies_caps(catalog):
    spec = resolve_run(catalog, "quick", "fmnist", "shards2-k100", "twonn", "fedprox-mu0.01", 1)
    assert spec["training"]["lr"] == catalog["datasets"]["fmnist"]["training"]["lr"]
    assert spec["algorithm"] == {
        "name": "fedprox-mu0.01",
        "algorithm": "fedprox",
        "params": {"mu": 0.01},
    }
    smoke = resolve_run(catalog, "smoke", "fmnist", "shards2-k100", "twonn", "fedavg", 1)
    assert smoke["training"]["rounds"] == 2 and smoke["partition"]["num_clients"] == 10
    assert smoke["data_mode"] == "standin"


def test_resolve_run_unknown_name(catalog):
    with pytest.raises(ConfigError, match="unknown algorithm 'fedsgd'"):
        resolve_run(catalog, "quick", "fmnist", "shards2-k100", "twonn", "fedsgd", 1)


def test_an_unknown_name_is_one_short_line_with_the_nearest(catalog):
    with pytest.raises(ConfigError) as info:
        resolve_run(catalog, "quick", "fmnist", "shards2-k100", "twonn", "FedProx-mu0.1O", 1)
    message = str(info.value)
    assert message.startswith("unknown algorithm 'FedProx-mu0.1O'; nearest: 'fedprox-mu0.1', ")
    n = len(catalog["algorithms"])
    assert message.endswith(f"({n} valid; `fedbench catalog algorithms` lists them)"), message
    assert "\n" not in message and len(message) < 200
    with pytest.raises(ConfigError, match=r"unknown scale 'quik'; nearest: 'quick'; valid: "):
        resolve_run(catalog, "quik", "fmnist", "shards2-k100", "twonn", "fedavg", 1)


def test_unknown_name_lists_few_names_and_says_when_none_is_close():
    assert unknown_name("kind", "Iid", ["shards", "iid"]) == (
        "unknown kind 'Iid'; nearest: 'iid'; valid: iid, shards"
    )
    many = [f"name{i}" for i in range(40)]
    assert unknown_name("entry", "zzz", many, "`x`") == (
        "unknown entry 'zzz'; no close match (40 valid; `x` lists them)"
    )


@pytest.mark.parametrize(
    "path, value, hint",
    [
        (("models", "twonn", "arch"), "twonnn", "nearest: 'twonn'"),
        (("datasets", "mnist", "source"), "fashion-mnist", "nearest: 'fashion_mnist'"),
        (("algorithms", "fedavg", "algorithm"), "fedproxx", "nearest: 'fedprox'"),
        (("algorithms", "fedprox-mu0.01", "muu"), 0.1, "(nearest: 'mu')"),
        (("training", "lrr"), 0.1, "(nearest: 'lr'"),
        (("partitions", "iid-k100", "kind"), "shard", "nearest: 'shards'"),
    ],
)
def test_catalog_typos_name_the_nearest_valid_name(catalog, path, value, hint):
    with pytest.raises(ConfigError) as info:
        validate_catalog(_broken(catalog, path, value))
    assert hint in str(info.value) and "\n" not in str(info.value)


def test_bad_training_value_is_named_at_resolution(catalog):
    c = _broken(catalog, ("datasets", "fmnist", "training"), {"lr": -1.0})
    with pytest.raises(ValueError, match="lr"):
        resolve_run(c, "quick", "fmnist", "shards2-k100", "twonn", "fedavg", 0)


def test_catalog_file_is_plain_yaml():
    assert yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["scales"]


def test_catalog_files_extend_and_reject_duplicates(tmp_path, catalog):
    from fedbench.config import extend_catalog

    c = copy.deepcopy(catalog)
    a = tmp_path / "a.yaml"
    a.write_text("algorithms:\n  fedprox-mu5: {algorithm: fedprox, mu: 5.0}\n")
    extend_catalog(c, [a])
    assert c["algorithms"]["fedprox-mu5"]["mu"] == 5.0
    validate_catalog(c)
    b = tmp_path / "b.yaml"
    b.write_text("algorithms:\n  fedavg: {algorithm: fedavg}\n")
    with pytest.raises(ConfigError, match="fedavg is already defined in config.yaml"):
        extend_catalog(c, [b])
    bad = tmp_path / "c.yaml"
    bad.write_text("scales: {}\n")
    with pytest.raises(ConfigError, match="scales"):
        extend_catalog(c, [bad])


def test_smoke_caps_local_steps_and_batch_size(catalog):
    # pFedBreD's Sent140 cell: R = 20 iterations of batch 400 at paper scale (mh reads two batches
    # an iteration as released: 40 engine steps), capped at smoke scale.
    paper = resolve_run(
        catalog,
        "paper",
        "pfedbred-sent140",
        "pfedbred-sent140-natural",
        "pfedbred-lstm",
        "pfedbred-mh-l15",
        0,
    )["training"]
    smoke = resolve_run(
        catalog,
        "smoke",
        "pfedbred-sent140",
        "pfedbred-sent140-natural",
        "pfedbred-lstm",
        "pfedbred-mh-l15",
        0,
    )["training"]
    caps = catalog["scales"]["smoke"]["caps"]
    assert (paper["local_steps"], paper["batch_size"]) == (40, 400)
    assert smoke["local_steps"] == min(40, caps["local_steps"]) < 40
    assert smoke["batch_size"] == min(400, caps["batch_size"]) < 400


@pytest.mark.parametrize("bad", [-1, 2.5, "often", True])
def test_checkpoint_every_is_checked_at_dag_build(catalog, bad):
    c = copy.deepcopy(catalog)
    c["checkpoint_every"] = bad
    with pytest.raises(ConfigError, match="checkpoint_every"):
        validate_catalog(c)
    c["checkpoint_every"] = 0  # 0 turns checkpoints off
    validate_catalog(c)


@pytest.mark.parametrize("bad", [-1, 601, "soon", True, None])
def test_checkpoint_min_seconds_is_checked_at_dag_build(catalog, bad):
    c = copy.deepcopy(catalog)
    c["checkpoint_min_seconds"] = bad
    with pytest.raises(ConfigError, match="checkpoint_min_seconds"):
        validate_catalog(c)
    c["checkpoint_min_seconds"] = 0  # a checkpoint every checkpoint_every rounds, however fast
    validate_catalog(c)


@pytest.mark.parametrize("bad", ["yes", 1, None])
def test_warm_worker_is_checked_at_dag_build(catalog, bad):
    c = copy.deepcopy(catalog)
    c["warm_worker"] = bad
    with pytest.raises(ConfigError, match="warm_worker: must be true, false or auto"):
        validate_catalog(c)
    for good in (True, False, "auto"):
        c["warm_worker"] = good
        validate_catalog(c)


def test_standin_params_shrink_a_model_only_on_standin_data(catalog):
    names = ("aaggff-mqp", "aaggff-natural-silo", "aaggff-distilbert", "fedavg-release", 0)
    paper = resolve_run(catalog, "paper", *names)["model"]
    smoke = resolve_run(catalog, "smoke", *names)["model"]
    tiny = catalog["models"]["aaggff-distilbert"]["standin_params"]
    assert paper["params"] == {"pretrained": True, "dropout": 0.0} and "standin_params" not in paper
    assert smoke["params"] == {"dropout": 0.0, **tiny} and smoke["params"]["pretrained"] is False
    assert smoke["standin_params"] == tiny  # run.yaml shows what was shrunk
    isic = ("aaggff-isic", "aaggff-natural-silo", "aaggff-effnet", "fedavg-release", 0)
    assert resolve_run(catalog, "paper", *isic)["dataset"]["params"] == {}
    assert resolve_run(catalog, "smoke", *isic)["dataset"]["params"] == {"side": 32}


@pytest.mark.parametrize(
    "value, named",
    [
        (
            {"dimm": 8},
            r"models.aaggff-distilbert.standin_params: unknown parameter\(s\) \['dimm'\]",
        ),
        ([8], "models.aaggff-distilbert.standin_params: expected a mapping"),
    ],
)
def test_bad_standin_params_are_named(catalog, value, named):
    with pytest.raises(ConfigError, match=named):
        validate_catalog(_broken(catalog, ("models", "aaggff-distilbert", "standin_params"), value))
    where = ("datasets", "aaggff-isic", "standin_params")
    with pytest.raises(ConfigError, match=r"datasets.aaggff-isic.standin_params: .*\['sidee'\]"):
        validate_catalog(_broken(catalog, where, {"sidee": 32}))


def test_smoke_caps_the_clients_of_a_natural_split(catalog):
    # a natural split names no num_clients (every group); at smoke scale the cap keeps a subset
    names = ("aaggff-reddit", "aaggff-natural-device", "aaggff-stackedlstm", "fedavg-release", 0)
    assert "num_clients" not in resolve_run(catalog, "paper", *names)["partition"]
    cap = catalog["scales"]["smoke"]["caps"]["num_clients"]
    assert resolve_run(catalog, "smoke", *names)["partition"]["num_clients"] == cap


def test_a_scale_sets_how_its_runs_compute_after_the_caps(catalog):
    fp32 = resolve_run(catalog, "quick", "fmnist", "shards2-k100", "twonn", "fedavg", 0)
    bf16 = resolve_run(catalog, "quick-bf16", "fmnist", "shards2-k100", "twonn", "fedavg", 0)
    assert "precision" not in fp32["training"] and bf16["training"]["precision"] == "bf16"
    assert {k: v for k, v in bf16["training"].items() if k != "precision"} == fp32["training"]
    c = copy.deepcopy(catalog)
    c["scales"]["quick-bf16"]["training"]["precision"] = "fp16"
    with pytest.raises(ValueError, match=r"training\.precision.*fp32"):
        resolve_run(c, "quick-bf16", "fmnist", "shards2-k100", "twonn", "fedavg", 0)
