"""The DQN-Fed paper grid (config/papers/dqnfed.yaml): Table 9 on the q-FFL Fashion-MNIST
protocol (specs/qffl-dqnfed.md B.5.2 item 6: classes 0, 2, 6 as three clients, each tested on its
class's official test images), the settings of 004:L847-849 (MLP, E = 1, full batch, η = 0.1,
300 rounds, 5 seeds), and the hyperparameter selection on a validation split (B-D13)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from fedbench.config import resolve_run
from fedbench.grid import all_runs as grid_runs
from fedbench.grid import cells as grid_cells
from fedbench.grid import chosen_tables, load_grid
from fedbench.metrics.distribution import VECTOR_STATS
from fedbench.papers import load_paper_values

ROOT = Path(__file__).resolve().parents[1]
GRID = ROOT / "config" / "papers" / "dqnfed.yaml"
ROWS = ["fedavg", "qffl", "fedmgda", "fedheal", "dqnfed", "qffl-fair"]
# Appendix H's grids (004:L896, L904) and B-D14's DQN-Fed server step scales
Q_GRID = [0, 0.001, 0.01, 0.1, 1, 2, 5, 10]
EPS_GRID = [0.01, 0.05, 0.1, 0.5, 1.0]
SCALES = [1.0, 0.5, 0.1]
ALGORITHMS = {
    "fedavg": "fedavg",
    "qffl": "qfedavg",
    "fedmgda": "fedmgda",
    "fedheal": "fedheal",
    "dqnfed": "dqnfed",
    "qffl-fair": "qfedavg",
}


@pytest.fixture(scope="module")
def grid(catalog):
    return load_grid(GRID, catalog)


def cells(grid, section, name, catalog, scale):
    """A table's or figure's runs, chosen rows (B-D13) at their group's first value: what the
    grid names before any selection ran (no test reads a choice file of this checkout)."""
    return grid_cells(grid, section, name, catalog, scale, choices="first")


def all_runs(grid, catalog, scale):
    """Every run of the grid, chosen rows as in `cells`."""
    return grid_runs(grid, catalog, scale, choices="first")


def _spec(catalog, scale, run):
    return resolve_run(
        catalog, scale, run.dataset, run.partition, run.model, run.algorithm, run.seed
    )


def test_the_grid_names_its_tables_and_figures(grid):
    assert list(grid.outputs("tables")) == [
        "table9",
        "table9_select",
        "table9_checks",
        "table1",
        "table1_select",
        "table2",
        "table3",
        "table3_select",
        "table4",
        "table4_select",
        "table5",
        "table5_select",
        "table6",
        "table6_select",
        "table10",
        "table10_select",
        "table11",
        "table11_select",
        "table12",
    ]
    assert list(grid.outputs("figures")) == [
        "figure1_a",
        "figure1_b",
        "figure1_c",
        "figure1_d",
        "figure2",
        "figure3_a",
        "figure3_b",
    ]


# Runs of the paper-scale grid at 5 seeds: Tables 1 and 4 and 6: 9 methods x 2 setups; Table 3:
# 9 x 2 participations; Table 5: 9 x 2 setups (FEMNIST-original, -skewed); Tables 10, 11: 5
# methods; Figure 1 reuses the tables' runs; Figure 3: 7 methods x 2 setups of its own (ρ_t
# logged), one seed.
PAPER_GRID_RUNS = 5 * (18 + 18 + 18 + 18 + 18 + 5 + 5) + 14
# B-D13's selections on seed 0, two setups each: FedAvg + q-FFL 8 + FedMGDA+ 5 + TERM 5 + Ditto 7
# + DQN-Fed 3 (Tables 1 and 3), and FedLF 5 more (Table 4); one setup each: FedAvg + q-FFL 8 +
# Ditto 7 + FedLF 5 + TERM 5 + DQN-Fed 3 (Table 10), FedAvg + q-FFL 8 + FedLF 5 + TERM 5 +
# FedMGDA+ 5 + DQN-Fed 3 (Table 11); Tables 5 and 6 as Table 4 (two setups each, FedLF's grid);
# at the smoke scale each sweep keeps its first value (caps.select_points 1): one run a method
# and setup.
SELECTION_RUNS = 2 * 29 + 2 * 29 + 2 * 34 + 29 + 27 + 2 * 2 * 34
# Table 12 (Clothing1M): FedAvg, FedCorr, DQN-Fed, FedCorr + DQN-Fed x seeds 0-4
TABLE12_RUNS = 4 * 5
SELECTION_SMOKE_RUNS = 2 * (1 + 5) + 2 * (1 + 5) + 2 * (1 + 6) + (1 + 5) * 2 + 2 * 2 * (1 + 6)


def test_run_counts(grid, catalog):
    # Table 9: 6 rows (q-FFL under both selections) x seeds 0-4; the selection: 18 settings on
    # seed 0; the checks: 5 settings of their own x seeds 0-2 (their FedAvg row is Table 9's,
    # and so is their DQN-Fed scale 1 while Table 9's chosen row stands at its first value)
    runs = all_runs(grid, catalog, "paper")
    assert len(runs) == 30 + 18 + 12 + PAPER_GRID_RUNS + SELECTION_RUNS + TABLE12_RUNS
    table = {r for cell in cells(grid, "tables", "table9", catalog, "paper").values() for r in cell}
    assert len(table) == 30 and {r.seed for r in table} == {0, 1, 2, 3, 4}
    # one seed at the smoke scale
    smoke = 6 + 18 + 4 + (PAPER_GRID_RUNS - 14) // 5 + 14 + SELECTION_SMOKE_RUNS + 4
    assert len(all_runs(grid, catalog, "smoke")) == smoke


def test_table9_cells_run_the_papers_settings(grid, catalog):
    got = cells(grid, "tables", "table9", catalog, "paper")
    assert {row for row, _ in got} == set(ROWS)
    assert {col for _, col in got} == {"mean", "std", "shirt", "pullover", "tshirt"}
    for (row, _col), runs in got.items():
        spec = _spec(catalog, "paper", runs[0])
        ds, part, t = spec["dataset"], spec["partition"], spec["training"]
        assert (ds["source"], ds["params"]) == (
            "fashion_mnist",
            {
                "classes": [0, 2, 6],
                "standardise": "train_per_pixel",
                "standardise_arithmetic": "release",
            },
        )
        assert ds["transform"]["pool"] == "merged"
        assert (part["kind"], part["test_split"]) == ("by_label", "official")
        assert spec["model"]["arch"] == "twonn"
        assert spec["model"]["params"] == {"hidden": 200, "hidden_layers": 2}
        assert (t["rounds"], t["local_epochs"], t["lr"], t["participation"]) == (300, 1, 0.1, 1.0)
        assert t["batch_size"] >= 6000  # full batch: a client holds 6,000 training images
        assert t["weight_decay"] == 0.0 and t.get("lr_decay", 1.0) == 1.0
        assert spec["algorithm"]["algorithm"] == ALGORITHMS[row]


def test_table9_columns_read_each_class_client(grid):
    table = grid.output("tables", "table9")
    stats = {c["id"]: c["stat"] for c in table["columns"]}
    # classes [0, 2, 6] -> clients 0 T-shirt/top, 1 pullover, 2 shirt
    assert stats == {
        "mean": "mean",
        "std": "std",
        "shirt": "client2",
        "pullover": "client1",
        "tshirt": "client0",
    }
    assert (table["metric"], table["protocol"], table["round"]) == ("top1", "global", "final")


def test_table9_rows_run_settings_of_the_selection(grid, catalog):
    rows = grid.output("tables", "table9")["rows"]
    # q-FFL, FedMGDA+ and DQN-Fed run table9_select's choice (B-D13: its validation ā column)
    assert {r["id"]: r.get("chosen") for r in rows if "chosen" in r} == {
        "qffl": "qffl",
        "fedmgda": "fedmgda",
        "dqnfed": "dqnfed",
    }
    refs = [c["chosen_by"] for c in grid.output("tables", "table9")["columns"]]
    assert refs == [{"table": "table9_select", "by": "mean"}] * 5
    fixed = {r["algorithm"] for r in rows if "algorithm" in r}
    swept = {r["algorithm"] for r in grid.output("tables", "table9_select")["rows"]}
    assert fixed <= swept
    # the second reading of q-FFL's selection is set beside the paper's q-FFL row
    assert {r["id"]: r.get("paper_ref") for r in rows}["qffl-fair"] == "table9/qffl"
    select = cells(grid, "tables", "table9_select", catalog, "paper")
    for runs in select.values():
        spec = _spec(catalog, "paper", runs[0])
        assert runs[0].seed == 0 and len(runs) == 1
        assert spec["dataset"]["name"] == "dqnfed-fmnist-train"
        assert "transform" not in spec["dataset"]  # official training images only
        assert spec["partition"]["kind"] == "by_label"
        assert spec["partition"]["test_fraction"] == 0.1


def test_the_swept_values_are_appendix_hs(catalog):
    algos = catalog["algorithms"]
    qs = sorted(a["q"] for n, a in algos.items() if n.startswith("dqnfed-qffl-q"))
    assert qs == sorted(Q_GRID)
    eps = sorted(a["eps"] for n, a in algos.items() if n.startswith("dqnfed-fedmgda-e"))
    assert eps == sorted(EPS_GRID)
    scales = [a["server_lr_scale"] for n, a in algos.items() if re.fullmatch(r"dqnfed-s[0-9.]+", n)]
    assert sorted(scales) == sorted(SCALES)
    heal = algos["dqnfed-fedheal"]
    assert (heal["threshold"], heal["beta"], heal["training"]["momentum"]) == (0.5, 0.5, 0.9)


@pytest.mark.workflow
def test_snakemake_dry_run_lists_every_job(grid, catalog):
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--forceall", "--cores", "1", "dqnfed"]
        + ["--config", "scale=paper", "--quiet", "rules"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-3000:]
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", log, re.M))
    assert counts["table"] == "19" and counts["figure"] == "7", log[-2000:]
    # One choice (a checkpoint) per selection whose choice rows run: Tables 1, 3-6, 9-11.
    assert counts["choice"] == "8", log[-2000:]
    assert "checkpoint jobs" in log
    # Before the choices, the DAG holds the runs of the outputs without chosen rows (the
    # selections, Table 9's checks, Table 12); an output with chosen rows names all its runs once
    # its choices are made (fedbench.outputs.chosen).
    early = {
        run
        for section in ("tables", "figures")
        for name in grid.outputs(section)
        if not chosen_tables(grid, section, name)
        for runs in cells(grid, section, name, catalog, "paper").values()
        for run in runs
    }
    assert counts["train"] == str(len(early)), log[-2000:]
    assert counts["prepare"] == str(len({r.dataset for r in early})), log[-2000:]
    partitions = {(r.dataset, r.partition, r.seed) for r in early}
    assert counts["partition"] == str(len(partitions)), log[-2000:]
    # the selections (Table 9's 18 on seed 0), Table 9's checks (6 rows x seeds 0-2), Table 12
    assert len(early) == SELECTION_RUNS + 18 + 6 * 3 + TABLE12_RUNS


def test_checks_change_one_setting_each(grid, catalog):
    got = cells(grid, "tables", "table9_checks", catalog, "paper")
    base = _spec(catalog, "paper", got[("fedavg", "mean")][0])
    raw = _spec(catalog, "paper", got[("fedavg-raw", "mean")][0])
    big = _spec(catalog, "paper", got[("fedavg-32", "mean")][0])
    assert raw["dataset"]["params"] == {"classes": [0, 2, 6]}  # no standardisation
    assert big["dataset"]["params"] == {**base["dataset"]["params"], "resize": 32}
    for spec in (raw, big):
        assert spec["training"] == base["training"] and spec["partition"] == base["partition"]
    early = _spec(catalog, "paper", got[("fedavg-r299", "mean")][0])
    assert early["training"] == {**base["training"], "rounds": 299}
    dqn = _spec(catalog, "paper", got[("dqnfed-s1", "mean")][0])
    assert dqn["algorithm"]["params"]["server_lr_scale"] == 1.0
    refs = {r["id"]: r["paper_ref"] for r in grid.output("tables", "table9_checks")["rows"]}
    assert refs == {
        "fedavg": "table9/fedavg",
        "fedavg-raw": "table9/fedavg",
        "fedavg-32": "table9/fedavg",
        "fedavg-r299": "table9/fedavg",
        "qffl-q2": "table9/qffl",
        "dqnfed-s1": "table9/dqnfed",
    }


# --- The paper-scale grid: Tables 1, 3-6, 11 and Figures 1, 3 (spec B.5-B.8) -----------------

PAPER_GRID_TABLES = ["table1", "table3", "table4", "table5", "table6", "table10", "table11"]
C10S2 = {"rounds": 100, "local_epochs": 1, "batch_size": 64, "lr": 0.01, "participation": 1.0}
# (table, column prefix) -> (source, partition fields, FedAvg's training fields), B.5.1
SETTINGS = {
    ("table1", "s1"): (
        "cifar10",
        {"kind": "shards", "num_clients": 100, "shards_per_client": 2, "assignment": "random"},
        {"rounds": 2000, "local_epochs": 1, "batch_size": 64, "lr": 0.1, "participation": 0.1},
    ),
    ("table1", "s2"): ("cifar10", {"kind": "dirichlet", "num_clients": 10, "alpha": 0.5}, C10S2),
    ("table3", "p10"): (
        "cifar10",
        {"kind": "dirichlet", "num_clients": 10, "alpha": 0.5},
        {**C10S2, "participation": 0.1},
    ),
    ("table3", "p50"): (
        "cifar10",
        {"kind": "dirichlet", "num_clients": 10, "alpha": 0.5},
        {**C10S2, "participation": 0.5},
    ),
    ("table4", "s1"): (
        "cifar100",
        {"kind": "dirichlet", "num_clients": 10, "alpha": 0.5},
        {**C10S2, "rounds": 400},
    ),
    ("table4", "s2"): (
        "cifar100",
        {"kind": "dirichlet", "num_clients": 50, "alpha": 0.05},
        {**C10S2, "rounds": 200},
    ),
    ("table5", "orig"): (
        "femnist",
        {"kind": "natural", "test_split": "leaf", "test_fraction": 0.1},
        {"rounds": 200, "local_epochs": 2, "batch_size": 32, "lr": 0.01, "participation": 0.1},
    ),
    ("table5", "skew"): (
        "emnist",
        {
            "kind": "random_classes",
            "num_clients": 100,
            "classes_per_client": 5,
            "test_split": "stratified",
            "test_fraction": 0.1429,
        },
        {"rounds": 200, "local_epochs": 2, "batch_size": 32, "lr": 0.01, "participation": 1.0},
    ),
    ("table6", "s1"): (
        "leaf_shakespeare",
        {"kind": "natural", "test_split": "leaf", "test_fraction": 0.1},
        {"rounds": 500, "local_epochs": 1, "batch_size": 10, "lr": 0.8, "lr_decay": 0.95},
    ),
    ("table6", "s2"): (
        "leaf_shakespeare",
        {"kind": "natural", "test_split": "leaf", "test_fraction": 0.1},
        {"rounds": 100, "local_epochs": 1, "batch_size": 10, "lr": 2.0, "participation": 1.0},
    ),
    ("table10", ""): (
        "cinic10",
        {"kind": "dirichlet", "num_clients": 50, "alpha": 0.5},
        {**C10S2, "rounds": 200},
    ),
    ("table11", ""): (
        "tinyimagenet",
        {"kind": "dirichlet", "num_clients": 20, "alpha": 0.05},
        {"rounds": 400, "local_epochs": 1, "batch_size": 64, "lr": 0.02, "participation": 1.0},
    ),
}
FAMILIES = {
    "fedavg": "fedavg",
    "qffl": "qfedavg",
    "fedmgda": "fedmgda",
    "fedheal": "fedheal",
    "fedlf": "fedlf",
    "term": "term",
    "ditto": "ditto",
    "fednl": "fednl",
    "fednew": "fednew",
    "dqnfed": "dqnfed",
}
# Each table's methods as the paper lists them (B.7)
METHODS = {
    "table1": [
        "fedavg",
        "qffl",
        "fedmgda",
        "fedheal",
        "term",
        "ditto",
        "fednl",
        "fednew",
        "dqnfed",
    ],
    "table3": [
        "fedavg",
        "qffl",
        "fedmgda",
        "fedheal",
        "term",
        "ditto",
        "fednl",
        "fednew",
        "dqnfed",
    ],
    "table4": ["fedavg", "qffl", "fedmgda", "fedlf", "term", "ditto", "fednl", "fednew", "dqnfed"],
    "table5": ["fedavg", "qffl", "fedmgda", "term", "fedlf", "ditto", "fednl", "fednew", "dqnfed"],
    "table6": ["fedavg", "qffl", "fedmgda", "fedlf", "term", "ditto", "fednl", "fednew", "dqnfed"],
    "table10": ["qffl", "ditto", "fedlf", "term", "dqnfed"],
    "table11": ["qffl", "fedlf", "term", "fedmgda", "dqnfed"],
}


def _setting(table: str, column: str):
    prefix = column.split("-")[0] if "-" in column else ""
    return SETTINGS[(table, prefix)]


@pytest.mark.parametrize("table", PAPER_GRID_TABLES)
def test_paper_grid_cells_run_the_papers_settings(grid, catalog, table):
    got = cells(grid, "tables", table, catalog, "paper")
    rows = [r["id"] for r in grid.output("tables", table)["rows"]]
    assert rows == METHODS[table]
    for (row, col), runs in got.items():
        assert sorted(r.seed for r in runs) == [0, 1, 2, 3, 4]
        spec = _spec(catalog, "paper", runs[0])
        source, partition, training = _setting(table, col)
        assert spec["dataset"]["source"] == source, (row, col)
        assert {k: spec["partition"].get(k) for k in partition} == partition, (row, col)
        assert spec["algorithm"]["algorithm"] == FAMILIES[row], (row, col)
        if row == "fedavg" or table in ("table10", "table11"):  # others may fix lr / steps
            t = spec["training"]
            if row == "fedlf":  # FedLF's η is its lr: a chosen value of Appendix H's grid
                assert t["lr"] in (0.01, 0.05, 0.1, 0.5, 1.0)
                training = {**training, "lr": t["lr"]}
            assert {k: t.get(k) for k in training} == training, (row, col)
            assert t["momentum"] == 0.0 and t["weight_decay"] == 0.0


def test_paper_grid_models(grid, catalog):
    def model(table, row, col):
        run = cells(grid, "tables", table, catalog, "paper")[(row, col)][0]
        return _spec(catalog, "paper", run)["model"]

    mlp = model("table1", "fedavg", "s1-mean")
    assert (mlp["arch"], mlp["params"]) == ("twonn", {"hidden": 200, "hidden_layers": 2})
    cnn = model("table5", "fedavg", "orig-mean")
    assert (cnn["arch"], cnn["params"]) == ("twocnn", {"hidden": 2048})  # LEAF's FEMNIST CNN
    assert model("table5", "dqnfed", "skew-kl") == cnn  # its head 10-way: the dataset's classes
    # ResNet-18 + GroupNorm (B-D23): CIFAR stem at 32 px, the ImageNet stem for TinyImageNet
    for table, col in (
        ("table1", "s2-mean"),
        ("table3", "p10-mean"),
        ("table4", "s1-mean"),
        ("table10", "mean"),
    ):
        net = model(table, "fedavg" if table != "table10" else "qffl", col)
        assert (net["arch"], net["params"]) == ("resnet18_gn", {"groups": 2, "stem": "cifar"})
    tin = model("table11", "qffl", "mean")
    assert (tin["arch"], tin["params"]) == ("resnet18_gn", {"groups": 2, "stem": "imagenet"})
    lstm = {c: model("table6", "fedavg", c)["params"] for c in ("s1-mean", "s2-mean")}
    assert (lstm["s1-mean"]["layers"], lstm["s2-mean"]["layers"]) == (2, 1)
    assert lstm["s1-mean"]["hidden"] == 256 and lstm["s1-mean"]["vocab_size"] == 80
    # FedNL / FedNew's Hessian terms need the unrolled LSTM; the same network otherwise
    for col in ("s1-mean", "s2-best10"):
        nl = model("table6", "fednl", col)["params"]
        assert nl == {**model("table6", "fedavg", col)["params"], "lstm_impl": "unrolled"}


def test_paper_grid_stats_and_protocols(grid):
    stats = {
        t: {c["id"]: c.get("stat") for c in grid.output("tables", t)["columns"]}
        for t in PAPER_GRID_TABLES
    }
    # Table 1 Setup 1 prints Worst / Best 5 %, every other tail is 10 % (q-FFL's count)
    assert (stats["table1"]["s1-worst5"], stats["table1"]["s1-best5"]) == (
        "worst5_qffl",
        "best5_qffl",
    )
    assert stats["table4"]["s2-worst10"] == "worst10_qffl"
    assert (stats["table5"]["orig-angle"], stats["table5"]["orig-kl"]) == ("angle", "kl")
    assert (stats["table5"]["skew-angle"], stats["table5"]["skew-kl"]) == ("angle", "kl")
    used = {s for t in stats.values() for s in t.values()} - {"mean", "std"}
    assert used <= set(VECTOR_STATS)
    for t in PAPER_GRID_TABLES:
        rows = {r["id"]: r for r in grid.output("tables", t)["rows"]}
        assert all(r.get("protocol", "global") == "global" for k, r in rows.items() if k != "ditto")
        if "ditto" in rows:
            assert rows["ditto"]["protocol"] == "personal"  # B.6: Ditto's personalised models


def test_every_paper_value_of_a_built_table_has_its_cell(grid):
    """Every transcribed value of Tables 1-6 and 11 lands on a grid cell, except the columns
    and tables the grid does not build (named in its notes), and every cell has a value."""
    pv = load_paper_values("dqnfed")
    built = {
        (t, r["id"], c["id"])
        for t in PAPER_GRID_TABLES
        for r in grid.output("tables", t)["rows"]
        for c in grid.output("tables", t)["columns"]
    }
    built |= {("table2", r["id"], "seconds") for r in grid.output("tables", "table2")["rows"]}
    values = set(pv.values)
    built |= {
        ("table12", r["id"], c["id"])
        for r in grid.output("tables", "table12")["rows"]
        for c in grid.output("tables", "table12")["columns"]
    }
    unbuilt = {k for k in values if k[0] not in {"table9", "table2", "table12", *PAPER_GRID_TABLES}}
    assert unbuilt == set()
    assert values - unbuilt - {k for k in values if k[0] == "table9"} == built
    skew = {k for k in built if k[0] == "table5" and k[2].startswith("skew-")}
    assert len(skew) == 9 * 4  # FEMNIST-skewed: EMNIST a-j through torchvision
    notes = {t: " ".join(grid.output("tables", t).get("notes", [])) for t in PAPER_GRID_TABLES}
    assert "B-D18" in notes["table1"] and "B-D18" in notes["table5"]
    assert "FEMNIST-skewed" in notes["table5"]


def test_figures_read_the_tables_runs_and_rho(grid, catalog):
    table_runs = {
        r
        for t in PAPER_GRID_TABLES
        for c in cells(grid, "tables", t, catalog, "paper").values()
        for r in c
    } | {r for c in cells(grid, "tables", "table9", catalog, "paper").values() for r in c}
    for fig in ("figure1_a", "figure1_b", "figure1_c", "figure1_d"):
        runs = {r for c in cells(grid, "figures", fig, catalog, "paper").values() for r in c}
        assert runs and runs <= table_runs, fig
    for fig in ("figure3_a", "figure3_b"):
        out = grid.output("figures", fig)
        assert (out["metric"], out["protocol"], out["stat"]) == (
            "improved_clients",
            "train",
            "value",
        )
        for runs in cells(grid, "figures", fig, catalog, "paper").values():
            spec = _spec(catalog, "paper", runs[0])
            assert spec["training"]["improved_clients"] is True and runs[0].seed == 0
            assert spec["training"]["eval_every"] == 1  # one ρ_t point a round
            assert runs[0] not in table_runs  # the ρ_t passes stay out of the tables' runs


def test_table_notes_are_printed_and_checked(grid, catalog, tmp_path, monkeypatch):
    import json

    from fedbench.config import ConfigError
    from fedbench.outputs.chosen import choice_path, group_candidates
    from fedbench.outputs.registry import KINDS

    # a choice file for table5_select as the workflow writes it (each group's first value), in a
    # working folder of the test's own
    monkeypatch.chdir(tmp_path)
    path = tmp_path / choice_path("paper", "dqnfed", "table5_select")
    path.parent.mkdir(parents=True)
    first = {
        g: {"algorithm": names[0], "label": f"{g} first", "by": 50.0}
        for g, names in group_candidates(grid, "table5_select", catalog, "paper").items()
    }
    by = {"orig-mean": first, "skew-mean": first}
    path.write_text(json.dumps({"paper": "dqnfed", "choices": by, "rules": {}}))
    kind = KINDS["table"]
    spec = kind.spec(grid, "table5", catalog, "paper")
    assert any(n.startswith("B-D18") for n in spec.notes)
    chosen = [n for n in spec.notes if n.startswith("Chosen rows (orig ā")]
    assert len(chosen) == 1 and "qffl first (50.00)" in chosen[0]
    out = dict(grid.output("tables", "table5"))
    with pytest.raises(ConfigError, match="notes"):
        kind.check_own("dqnfed.yaml.tables.table5", {**out, "notes": "one string"}, catalog)


def test_table2_and_figure2_read_the_tables_runs(grid, catalog):
    t1 = cells(grid, "tables", "table1", catalog, "paper")
    t2 = cells(grid, "tables", "table2", catalog, "paper")
    for (row, col), runs in t2.items():
        assert col == "seconds" and runs == t1[(row, "s1-mean")], row  # Setup 1's own runs
    out = grid.output("tables", "table2")
    assert (out["metric"], out["protocol"], out["stat"]) == ("train_seconds", "run", "value")
    assert out["summaries"] == [
        {
            "id": "ratio",
            "label": "× FedAvg",
            "stat": "ratio",
            "columns": ["seconds"],
            "reference": "fedavg",
        }
    ]
    assert [r["id"] for r in out["rows"]] == [
        "fedavg", "qffl", "fedmgda", "term", "ditto", "fednl", "fednew", "dqnfed"
    ]  # fmt: skip
    t5 = cells(grid, "tables", "table5", catalog, "paper")
    for (row, _col), runs in cells(grid, "figures", "figure2", catalog, "paper").items():
        assert runs == t5[(row, "orig-mean")], row


# Appendix H's grid sizes (004:L896-904) and B-D14's DQN-Fed step scales; FedHEAL (fixed values),
# FedNL and FedNew (no grid, B-D9) are not swept
SWEEP_SIZES = {"qffl": 8, "fedmgda": 5, "term": 5, "ditto": 7, "fedlf": 5, "dqnfed": 3}
UNSWEPT = {"fedheal", "fednl", "fednew"}


@pytest.mark.parametrize(
    ("table", "setups"),
    [
        ("table1_select", {"s1": ("table1", "s1-mean"), "s2": ("table1", "s2-mean")}),
        ("table3_select", {"p10": ("table3", "p10-mean"), "p50": ("table3", "p50-mean")}),
        ("table4_select", {"s1": ("table4", "s1-mean"), "s2": ("table4", "s2-mean")}),
        ("table5_select", {"orig": ("table5", "orig-mean"), "skew": ("table5", "skew-mean")}),
        ("table6_select", {"s1": ("table6", "s1-mean"), "s2": ("table6", "s2-mean")}),
        ("table10_select", {"": ("table10", "mean")}),
        ("table11_select", {"": ("table11", "mean")}),
    ],
)
def test_selections_hold_out_a_tenth_of_each_clients_training_split(grid, catalog, table, setups):
    """B-D13: every Appendix H grid on seed 0, on each setup's own partition with 10 % of each
    client's training split read as its test split (test_is_val): the very clients, model and
    training of the table's seed-0 runs less that tenth, the test samples unseen; the table's
    chosen rows run the choice setup by setup."""
    got = cells(grid, "tables", table, catalog, "paper")
    swept: dict[str, set] = {}
    for (row, col), runs in got.items():
        assert [r.seed for r in runs] == [0]
        spec = _spec(catalog, "paper", runs[0])
        ref_table, ref_col = setups[col.rpartition("-")[0]]
        ref_cells = cells(grid, "tables", ref_table, catalog, "paper")
        ref_run = next(ks[0] for (_r, c), ks in ref_cells.items() if c == ref_col)
        ref = _spec(catalog, "paper", ref_run)
        assert runs[0].dataset == ref_run.dataset and spec["dataset"] == ref["dataset"]
        assert spec["model"] == ref["model"]
        left = ("val_fraction", "test_is_val", "name", "description")
        own = {k: v for k, v in spec["partition"].items() if k not in left}
        assert own == {k: v for k, v in ref["partition"].items() if k not in left}
        assert (spec["partition"]["val_fraction"], spec["partition"]["test_is_val"]) == (0.1, True)
        # a value the table's rows run: the same training, all of it
        same = [
            _spec(catalog, "paper", ks[0])
            for (_r, c), ks in ref_cells.items()
            if c == ref_col and ks[0].algorithm == runs[0].algorithm
        ]
        for other in same:
            assert spec["training"] == other["training"], (row, col)
        swept.setdefault(row.rsplit("-", 1)[0], set()).add(spec["algorithm"]["name"])
    # every method the table prints is swept over its whole grid, FedAvg beside them
    ref_table = next(iter(setups.values()))[0]
    printed = {r["id"] for r in grid.output("tables", ref_table)["rows"]} - UNSWEPT
    assert set(swept) == printed | {"fedavg"}
    assert {g: len(v) for g, v in swept.items()} == {
        g: SWEEP_SIZES.get(g, 1) for g in printed | {"fedavg"}
    }
    out = grid.output("tables", table)
    assert out["select"] == [
        {"by": f"{k}-mean" if k else "mean", "tie": f"{k}-std" if k else "std"} for k in setups
    ]
    # the table's columns run this selection's choice, setup by setup
    for col in grid.output("tables", ref_table)["columns"]:
        setup = col["id"].split("-")[0] if "-" in col["id"] else ""
        by = f"{setup}-mean" if setup in setups and setup else "mean"
        assert col["chosen_by"] == {"table": table, "by": by}, col["id"]
    # at the smoke scale each sweep keeps its first value (caps.select_points 1)
    smoke = cells(grid, "tables", table, catalog, "smoke")
    groups: dict[str, set] = {}
    for row, _col in smoke:
        groups.setdefault(row.rsplit("-", 1)[0], set()).add(row)
    assert {g: len(v) for g, v in groups.items()} == dict.fromkeys(printed | {"fedavg"}, 1)
