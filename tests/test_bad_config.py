"""Bad input at DAG build: malformed catalogs and grids are rejected by `load_workflow` (what the
Snakefile calls) with an error naming where (entry or grid file) and the key."""

from __future__ import annotations

import copy
import math
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fedbench.config import ConfigError, check_top_level
from fedbench.grid import load_workflow

ROOT = Path(__file__).resolve().parent.parent
K = 20  # clients of every partition of the toy catalog

BASE = {
    "scale": None,
    "threads": 1,
    "device": "auto",
    "gpus_per_run": 0,
    "scales": {
        "paper": {"data": "real"},
        "smoke": {
            "data": "standin",
            "caps": {"rounds": 2, "num_clients": 10, "clients_per_round": 5, "seeds": 1},
            "standin_size": {"n_train": 600, "n_test": 200},
        },
    },
    "training": {
        "rounds": 10,
        "local_epochs": 1,
        "batch_size": 10,
        "lr": 0.01,
        "clients_per_round": 5,
        "momentum": 0.0,
        "weight_decay": 0.0,
        "lr_decay": 1.0,
        "eval_every": 5,
    },
    "datasets": {"mnist": {"source": "mnist"}},
    "partitions": {
        "iid": {"kind": "iid", "num_clients": K, "test_fraction": 0.2},
        "dir": {"kind": "dirichlet", "num_clients": K, "alpha": 0.5, "min_size": 5},
        "shards": {"kind": "shards", "num_clients": K, "shards_per_client": 2},
    },
    "models": {"linear": {"arch": "linear"}},
    "algorithms": {
        "fedavg": {"algorithm": "fedavg"},
        "fedprox": {"algorithm": "fedprox", "mu": 0.1},
    },
}
GRID = {
    "paper": "toy",
    "seeds": [0],
    "tables": {
        "table1": {
            "metric": "top1",
            "protocol": "global",
            "stat": "wmean",
            "rows": [{"id": a, "algorithm": a} for a in ("fedavg", "fedprox")],
            "columns": [
                {"id": p, "dataset": "mnist", "partition": p, "model": "linear"}
                for p in ("iid", "dir", "shards")
            ],
        }
    },
}


def _load(catalog: dict, grid: dict) -> None:
    """Write the grid as config/papers/toy.yaml in a fresh folder and load both, as at DAG build."""
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "papers").mkdir()
        (Path(d) / "papers" / "toy.yaml").write_text(yaml.safe_dump(grid))
        load_workflow(copy.deepcopy(catalog), d)


def _set(tree: dict, path: tuple, value) -> dict:
    tree = copy.deepcopy(tree)
    node = tree
    for key in path[:-1]:
        node = node.setdefault(key, {}) if isinstance(node, dict) else node[key]
    node[path[-1]] = value
    return tree


def test_the_toy_catalog_and_grid_load():
    _load(BASE, GRID)  # the mutations below are the only reason anything is rejected


# Values that are not numbers at all, for any numeric key.
not_a_number = st.one_of(st.text(max_size=4), st.booleans(), st.lists(st.integers(), max_size=2))
ints_below = lambda lo: st.integers(max_value=lo - 1)  # noqa: E731
non_finite = st.sampled_from([math.nan, math.inf, -math.inf])
# Where a training block may sit: the defaults, or any entry of a section.
TRAINING_AT = [
    ("training",),
    ("datasets", "mnist", "training"),
    ("partitions", "dir", "training"),
    ("models", "linear", "training"),
    ("algorithms", "fedprox", "training"),
]
ENTRY_AT = TRAINING_AT[1:]
BAD_TRAINING = {
    "rounds": st.one_of(ints_below(1), not_a_number, st.floats(allow_nan=True)),
    "batch_size": st.one_of(ints_below(1), not_a_number),
    "local_epochs": st.one_of(ints_below(1), not_a_number, st.just(1.5)),
    "eval_every": st.one_of(ints_below(1), not_a_number),
    "lr": st.one_of(st.floats(max_value=0), non_finite, not_a_number),
    "momentum": st.one_of(st.floats(min_value=1), st.floats(max_value=0, exclude_max=True)),
    "weight_decay": st.one_of(st.floats(max_value=0, exclude_max=True), non_finite),
    "lr_decay": st.one_of(st.floats(max_value=0), st.floats(min_value=1, exclude_min=True)),
}


def _where(path: tuple) -> str:
    """The entry an error must name: 'algorithms.fedprox', or 'training' for the defaults."""
    return ".".join(path[:2]) if path[0] != "training" else "training"


@st.composite
def bad_catalogs(draw):
    """(catalog, grid, the place an error must name, the key it must name)."""
    kind = draw(
        st.sampled_from(
            [
                "training",
                "participation",
                "clients_per_round",
                "training_key",
                "partition",
                "names",
                "top",
                "entry_type",
                "algorithm_param",
                "grid_shape",
            ]
        )
    )
    if kind == "grid_shape":  # a grid whose seeds, axes or formatting have the wrong shape
        key, value = draw(
            st.one_of(
                st.tuples(
                    st.just("seeds"),
                    st.one_of(
                        st.lists(st.integers(max_value=-1), min_size=1, max_size=3),
                        st.just([]),
                        st.just([0, 0]),
                        st.text(max_size=3),
                        st.lists(st.booleans(), min_size=1, max_size=2),
                    ),
                ),
                st.tuples(
                    st.sampled_from(["rows", "columns"]),
                    st.one_of(
                        st.text(max_size=4), st.just([]), st.lists(st.integers(), min_size=1)
                    ),
                ),
                st.tuples(st.just("decimals"), st.one_of(ints_below(0), st.text(max_size=2))),
                st.tuples(st.just("percent"), st.one_of(st.text(max_size=3), st.integers())),
            )
        )
        grid = copy.deepcopy(GRID)
        on_table = key != "seeds" or draw(st.booleans())
        (grid["tables"]["table1"] if on_table else grid)[key] = value
        return BASE, grid, "toy.yaml", key
    if kind == "training":
        at = draw(st.sampled_from(TRAINING_AT))
        key = draw(st.sampled_from(sorted(BAD_TRAINING)))
        value = draw(BAD_TRAINING[key])
        return _set(BASE, (*at, key), value), GRID, _where(at), key
    if kind == "participation":  # a fraction replaces the count of an entry's runs
        at = draw(st.sampled_from(ENTRY_AT))
        value = draw(
            st.one_of(
                st.floats(max_value=0),
                st.floats(min_value=1, exclude_min=True),
                non_finite,
                not_a_number,
            )
        )
        return _set(BASE, (*at, "participation"), value), GRID, _where(at), "participation"
    if kind == "clients_per_round":  # more sampled clients than the partition has
        at = draw(st.sampled_from(TRAINING_AT))
        value = draw(st.integers(min_value=K + 1, max_value=10**6))
        return _set(BASE, (*at, "clients_per_round"), value), GRID, "toy.yaml", "clients_per_round"
    if kind == "training_key":
        at = draw(st.sampled_from(TRAINING_AT))
        key = draw(st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=8))
        if key in BASE["training"] or key in BAD_TRAINING or key in _training_fields():
            key += "_zz"
        return _set(BASE, (*at, key), 1), GRID, _where(at), key
    if kind == "partition":
        name, key, value = draw(
            st.one_of(
                st.tuples(
                    st.just("dir"),
                    st.just("alpha"),
                    st.one_of(st.floats(max_value=0), non_finite, not_a_number),
                ),
                st.tuples(
                    st.sampled_from(["iid", "dir", "shards"]),
                    st.just("num_clients"),
                    st.one_of(ints_below(1), not_a_number, st.just(2.5)),
                ),
                st.tuples(st.just("dir"), st.just("min_size"), st.one_of(ints_below(0))),
                st.tuples(st.just("shards"), st.just("shards_per_client"), ints_below(1)),
                st.tuples(
                    st.sampled_from(["iid", "dir"]),
                    st.sampled_from(["test_fraction", "val_fraction"]),
                    st.one_of(st.floats(min_value=1), st.floats(max_value=0, exclude_max=True)),
                ),
                st.tuples(
                    st.just("iid"),
                    st.just("pool_fraction"),
                    st.one_of(st.floats(max_value=0), st.floats(min_value=1, exclude_min=True)),
                ),
                st.tuples(st.just("iid"), st.just("kind"), st.just("sharded")),
                st.tuples(st.just("iid"), st.just("clients"), st.integers(1, 5)),
            )
        )
        return _set(BASE, ("partitions", name, key), value), GRID, f"partitions.{name}", key
    if kind == "names":  # an unknown registry name in the catalog, or an unknown entry in a cell
        bogus = draw(st.text(alphabet="xyzq", min_size=1, max_size=6))
        where = draw(st.sampled_from(["source", "arch", "model_param", "algorithm", "cell"]))
        if where == "source":
            return _set(BASE, ("datasets", "mnist", "source"), bogus), GRID, "datasets.mnist", bogus
        if where == "arch":
            return _set(BASE, ("models", "linear", "arch"), bogus), GRID, "models.linear", bogus
        if where == "model_param":
            cat = _set(BASE, ("models", "linear", "params"), {bogus: 1})
            return cat, GRID, "models.linear.params", bogus
        if where == "algorithm":
            cat = _set(BASE, ("algorithms", "fedprox", "algorithm"), bogus)
            return cat, GRID, "algorithms.fedprox", bogus
        field = draw(st.sampled_from(["algorithm", "dataset", "partition", "model"]))
        axis = "rows" if field == "algorithm" else "columns"
        grid = copy.deepcopy(GRID)
        grid["tables"]["table1"][axis][0][field] = bogus
        return BASE, grid, "toy.yaml", bogus
    if kind == "top":
        key, value = draw(
            st.one_of(
                st.tuples(st.just("threads"), st.one_of(ints_below(1), not_a_number)),
                st.tuples(st.just("gpus_per_run"), st.one_of(ints_below(0), not_a_number)),
                st.tuples(st.just("device"), st.sampled_from(["gpu", "cuda:x", "", "tpu:0"])),
                st.tuples(st.just("scale"), st.sampled_from(["huge", "quick", "Paper"])),
                st.tuples(st.just("roundz"), st.integers()),
            )
        )
        return _set(BASE, (key,), value), GRID, key, key
    if kind == "entry_type":  # an entry, params or training block that is not a mapping
        path = draw(
            st.sampled_from(
                [
                    ("datasets", "mnist"),
                    ("models", "linear"),
                    ("datasets", "mnist", "params"),
                    ("models", "linear", "params"),
                    ("algorithms", "fedavg", "training"),
                    ("scales", "smoke", "caps", "rounds"),
                ]
            )
        )
        value = draw(st.one_of(st.text(max_size=3), st.lists(st.integers(), max_size=2)))
        return _set(BASE, path, value), GRID, ".".join(path[:2]), path[-1]
    value = draw(st.one_of(st.floats(max_value=0, exclude_max=True), non_finite, not_a_number))
    return _set(BASE, ("algorithms", "fedprox", "mu"), value), GRID, "algorithms.fedprox", "mu"


def _training_fields() -> set[str]:
    import dataclasses

    from fedbench.engine.train_config import TrainConfig

    return {f.name for f in dataclasses.fields(TrainConfig)}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bad_catalogs())
def test_malformed_config_is_rejected_at_dag_build_naming_the_key(case):
    catalog, grid, where, key = case
    with pytest.raises(ConfigError) as info:
        _load(catalog, grid)
    message = str(info.value)
    assert where in message, message
    assert key in message, message


@pytest.mark.workflow
def test_snakemake_dry_run_fails_before_any_job_naming_the_key():
    """A bad --config value stops `snakemake -n` while it loads the config: no job is listed."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "-n",
            "--cores",
            "1",
            "quick",
            "--config",
            "scale=enormous",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    log = result.stdout + result.stderr  # snakemake logs to stdout when it is not a terminal
    assert result.returncode != 0
    assert re.search(r"ConfigError.*\n.*scale: unknown scale 'enormous'", log), log
    assert "Job stats" not in log and "Building DAG" not in log, log


# Many variants, as in the real catalog (~250): an error may not list them all.
MANY = {
    **BASE["algorithms"],
    **{f"fedprox-mu{m}": {"algorithm": "fedprox", "mu": float(m)} for m in range(1, 40)},
}


def test_an_unknown_algorithm_in_a_grid_names_the_nearest_ones_not_all():
    grid = copy.deepcopy(GRID)
    grid["tables"]["table1"]["rows"][1]["algorithm"] = "fedprox-mu3O"  # letter O for a zero
    with pytest.raises(ConfigError) as info:
        _load(_set(BASE, ("algorithms",), MANY), grid)
    message = str(info.value)
    assert message.startswith("toy.yaml.tables.table1 cell (fedprox, iid): ")
    assert "unknown algorithm 'fedprox-mu3O'; nearest: 'fedprox-mu3', " in message
    assert f"({len(MANY)} valid; `fedbench catalog algorithms` lists them)" in message
    assert "fedprox-mu17" not in message and "\n" not in message and len(message) < 250


def test_an_unknown_name_among_few_lists_them_all():
    grid = copy.deepcopy(GRID)
    grid["tables"]["table1"]["columns"][0]["partition"] = "Dir"  # case is ignored when matching
    with pytest.raises(ConfigError, match=r"unknown partition 'Dir'; nearest: 'dir'; valid: dir, "):
        _load(BASE, grid)


def test_an_unknown_top_level_key_is_one_line_naming_the_nearest_and_the_valid_ones():
    with pytest.raises(ConfigError) as info:
        check_top_level(_set(BASE, ("scael",), "smoke"))
    message = str(info.value)
    assert "unknown key(s) ['scael'] (nearest: 'scale', 'scales'); valid: [" in message
    assert "'warm_worker'" in message and "\n" not in message and len(message) < 330
    with pytest.raises(ConfigError, match=r"threads: must be a positive integer"):
        check_top_level(_set(BASE, ("threads",), 0))
    check_top_level(copy.deepcopy(BASE))


@pytest.mark.workflow
def test_snakemake_with_a_typo_in_a_config_key_says_so_in_a_few_lines():
    """`--config scael=smoke`: the key, its nearest valid key, the valid keys; not the schema."""
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "quick", "--config", "scael=smoke"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    log = result.stdout + result.stderr
    assert result.returncode != 0
    assert len(log.splitlines()) <= 15, log[-3000:]
    assert "unknown key(s) ['scael'] (nearest: 'scale'" in log, log[-3000:]


@pytest.mark.workflow
def test_a_target_typo_names_the_nearest_target_rule():
    """`snakemake quikc`: one line naming `quick`, not Snakemake's bare "No rule to produce"."""
    from fedbench.advice import unknown_target

    rules = ["all", "claims", "quick", "quick_figure", "superfed", "train"]
    assert "did you mean quick?" in unknown_target(["quikc"], rules)
    assert unknown_target(["quick", "results/smoke/papers/quick/table1.md"], rules) is None
    assert "did you mean" not in unknown_target(["zzzz"], rules)
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--cores", "1", "quikc"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    log = result.stdout + result.stderr
    assert result.returncode != 0
    assert "snakemake target 'quikc' is not a rule of this workflow: did you mean quick?" in log
    assert "No rule to produce" not in log and len(log.splitlines()) <= 15, log[-3000:]
