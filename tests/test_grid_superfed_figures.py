"""SuPerFed Figures 2.3 and 2.5 in the paper grid: the runs that feed them, as the spec says."""

from itertools import product
from pathlib import Path

import pytest

from fedbench.algorithms import build_algorithm
from fedbench.config import resolve_run
from fedbench.grid import all_runs, cells, load_grid, output_files, output_spec

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def grid(catalog):
    return load_grid(ROOT / "config" / "papers" / "superfed.yaml", catalog)


def _resolved(catalog, key, scale="paper"):
    return resolve_run(
        catalog, scale, key.dataset, key.partition, key.model, key.algorithm, key.seed
    )


def test_figure2_3_is_the_nu_mu_grid(grid, catalog):
    fig = cells(grid, "figures", "figure2_3", catalog, "paper")
    runs = [k for keys in fig.values() for k in keys]
    assert len(fig) == 32 and len(runs) == len(set(runs)) == 32  # 16 per scheme, one seed
    settings = set()
    for key in runs:
        spec = _resolved(catalog, key)
        a, t = spec["algorithm"], spec["training"]
        algo = build_algorithm(a["algorithm"], **a["params"])  # with the class defaults
        assert (key.dataset, key.model) == ("cifar10-28", "superfed-twocnn")
        assert spec["partition"]["kind"] == "shards" and spec["partition"]["num_clients"] == 100
        assert (t["rounds"], t["local_epochs"], t["batch_size"], t["lr"]) == (100, 10, 10, 0.01)
        assert t["clients_per_round"] == 5 and algo.start == 0.4  # L = 40 of T = 100
        settings.add((algo.mode, algo.nu, algo.mu))
    nus, mus = (0.0, 1.0, 2.0, 5.0), (0.0, 0.01, 0.1, 1.0)
    assert settings == set(product(("mm", "lm"), nus, mus))
    spec = output_spec(grid, "figures", "figure2_3", catalog, "paper")
    assert (spec.kind, spec.panels, len(spec.columns)) == ("lambda", "cells", 16)
    smoke = cells(grid, "figures", "figure2_3", catalog, "smoke")
    assert sum(len(v) for v in smoke.values()) == 32


def test_figure2_5_reuses_table2_3_runs(grid, catalog):
    fig = cells(grid, "figures", "figure2_5", catalog, "paper")
    assert list(fig) == [(r, "mnist-k500") for r in ("apfl", "superfed-mm", "superfed-lm")]
    seeds = grid.raw["seeds"]
    assert all([k.seed for k in keys] == seeds for keys in fig.values())  # 3 runs × seeds
    runs = {k for keys in fig.values() for k in keys}
    table = cells(grid, "tables", "table2_3", catalog, "paper")
    assert runs == {
        k for r in ("apfl", "superfed-mm", "superfed-lm") for k in table[(r, "mnist-k500")]
    }
    for key in runs:
        spec = _resolved(catalog, key)
        assert (key.dataset, key.model) == ("mnist", "superfed-twonn")
        assert spec["partition"]["num_clients"] == 500 and spec["training"]["rounds"] == 500
    # The figures add only Figure 2.3's 32 runs to the grid.
    tables_only = {
        k
        for t in grid.outputs("tables")
        for v in cells(grid, "tables", t, catalog, "paper").values()
        for k in v
    }
    assert len(all_runs(grid, catalog, "paper")) == len(tables_only) + 32
    smoke = cells(grid, "figures", "figure2_5", catalog, "smoke")
    assert sum(len(v) for v in smoke.values()) == 3
    files = output_files(grid, "smoke")
    assert {f"results/smoke/papers/superfed/figure2_{i}.png" for i in (3, 5)} <= set(files)
