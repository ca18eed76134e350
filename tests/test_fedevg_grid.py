"""The FedEvg paper grid (config/papers/fedevg.yaml) wires each cell to the settings of the
release's launch scripts (spec fedevg.md §2, §6.2: commands/{32,64}/{fedevg,fedcgan,fedcvae}.sh)
and draws every table and figure of the thesis' chapter IV."""

from __future__ import annotations

import pytest

from fedbench.config import resolve_run
from fedbench.grid import all_runs, cells, load_grid

GRID = "config/papers/fedevg.yaml"
TABLES = {"table4_2": "accuracy", "table4_3": "accuracy", "table4_4": "fid", "table4_5": "fid"}
DATASETS = {
    "table4_2": ("fedevg-mnist", "fedevg-cifar10"),
    "table4_3": ("fedevg-dermamnist", "fedevg-organcmnist"),
}
DATASETS.update(table4_4=DATASETS["table4_2"], table4_5=DATASETS["table4_3"])
# Figures 4.1-4.4 (spec §5.3): the dataset each draws, at K = 10, α = 0.01, seed 1.
FIGURES = {
    "figure4_1": "fedevg-mnist",
    "figure4_2": "fedevg-cifar10",
    "figure4_3": "fedevg-organcmnist",
    "figure4_4": "fedevg-dermamnist",
}
ROWS = ["fedcgan", "fedcvae", "fedevg"]
# Typed from the release's scripts (spec §6.2): (rounds, eval_every, lr_decay_every) per method
# and K; every run: E = 1, B = 64, Adam(1e-3, (0.5, 0.999), wd 1e-4), lr x 0.9 per decay step.
SCHEDULE = {
    ("fedevg", 10): (500, 50, 50),
    ("fedevg", 100): (500, 50, 50),
    ("fedcgan", 10): (100, 10, 5),
    ("fedcgan", 100): (1000, 100, 50),
    ("fedcvae", 10): (100, 10, 5),
    ("fedcvae", 100): (1000, 100, 50),
}
MODELS = {"fedcgan": "fedevg_acgan", "fedcvae": "fedevg_cvae", "fedevg": "fedevg_resnet10"}


@pytest.fixture(scope="module")
def grid(catalog):
    return load_grid(GRID, catalog)


def _resolve(catalog, scale, run):
    return resolve_run(
        catalog, scale, run.dataset, run.partition, run.model, run.algorithm, run.seed
    )


def test_the_grid_names_the_thesis_outputs(grid):
    assert list(grid.outputs("tables")) == list(TABLES)
    figures = grid.outputs("figures")
    assert [n for n in figures if figures[n].get("kind") == "image_grid"] == list(FIGURES)
    curves = {n: f for n, f in figures.items() if f.get("kind") == "rounds"}
    assert sorted(curves) == [f"figure4_curves_{t}" for t in TABLES]
    for name, kind in TABLES.items():  # each curve figure reads its table's cells
        assert curves[f"figure4_curves_{name}"].get("server") == grid.output("tables", name).get(
            "server"
        )
        assert ("server" in grid.output("tables", name)) == (kind == "fid")


def test_paper_scale_is_the_thesis_grid(grid, catalog):
    # 4 datasets x K in {10, 100} x α in {0.01, 1.00} x 3 methods x seeds 1-3 (spec §3)
    runs = all_runs(grid, catalog, "paper")
    assert len(runs) == 144 and {r.seed for r in runs} == {1, 2, 3}
    assert len(all_runs(grid, catalog, "smoke")) == 48  # the smoke scale keeps one seed


@pytest.mark.parametrize("table", list(TABLES))
def test_cells_run_the_release_settings(grid, catalog, table):
    got = cells(grid, "tables", table, catalog, "paper")
    assert len(got) == 3 * 8 and {row for row, _ in got} == set(ROWS)
    for (row, col), runs in got.items():
        dataset, k = runs[0].dataset, int(col.split("-k")[1].split("-")[0])
        assert dataset == DATASETS[table][0 if col.startswith(("mnist", "derma")) else 1]
        spec = _resolve(catalog, "paper", runs[0])
        t = spec["training"]
        assert (t["rounds"], t["eval_every"], t["lr_decay_every"]) == SCHEDULE[(row, k)], (row, col)
        assert spec["partition"]["num_clients"] == k
        assert t["participation"] == {10: 1.0, 100: 0.1}[k]
        assert spec["partition"]["alpha"] == (0.01 if col.endswith("a0.01") else 1.0)
        assert spec["partition"]["kind"] == "fedevg_code"
        assert (t["local_epochs"], t["batch_size"], t["optimizer"]) == (1, 64, "adam")
        assert (t["lr"], t["betas"], t["weight_decay"], t["lr_decay"]) == (
            0.001, [0.5, 0.999], 1e-4, 0.9
        )  # fmt: skip
        assert spec["algorithm"]["algorithm"] == row
        assert spec["model"]["arch"] == MODELS[row] and spec["model"]["params"]["hidden"] == 64
        assert spec["algorithm"]["params"].get("fid_extractor", "inception") == "inception"


def test_fedcgan_initialises_as_its_scripts(catalog):
    # commands/*/fedcgan.sh: --init_type normal --init_gain 0.02; fedcvae.sh: the defaults
    assert catalog["models"]["fedevg-acgan"]["params"] == {
        "hidden": 64,
        "init": "normal",
        "init_gain": 0.02,
    }
    assert catalog["models"]["fedevg-cvae"]["params"]["init"] == "xavier"


def test_the_thesis_rounds_are_a_named_alternative(catalog):
    for method, model in (("fedcgan", "fedevg-acgan"), ("fedcvae", "fedevg-cvae")):
        names = ("fedevg-mnist", "fedevg-k100-a1", model, f"{method}-thesis", 1)
        spec = resolve_run(catalog, "paper", *names)
        assert (spec["training"]["rounds"], spec["algorithm"]["algorithm"]) == (500, method)


def test_smoke_needs_no_inception_weights(grid, catalog):
    for run in all_runs(grid, catalog, "smoke"):
        spec = _resolve(catalog, "smoke", run)
        assert spec["algorithm"]["params"]["fid_extractor"] == "proxy"
        assert spec["algorithm"]["standin_params"]["fid_extractor"] == "proxy"  # in run.yaml


@pytest.mark.parametrize("figure", list(FIGURES))
def test_image_grids_draw_the_thesis_setting(grid, catalog, figure):
    got = cells(grid, "figures", figure, catalog, "paper")
    assert [row for row, _ in got] == ROWS  # panels left to right: FedCGAN | FedCVAE | FedEvg
    for runs in got.values():
        (run,) = runs
        assert (run.dataset, run.partition, run.seed) == (FIGURES[figure], "fedevg-k10-a0.01", 1)
    assert {runs[0].algorithm for runs in got.values()} == {"fedcgan-k10", "fedcvae-k10", "fedevg"}
