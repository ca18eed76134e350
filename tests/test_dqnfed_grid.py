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
from fedbench.grid import all_runs, cells, load_grid

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


def _spec(catalog, scale, run):
    return resolve_run(
        catalog, scale, run.dataset, run.partition, run.model, run.algorithm, run.seed
    )


def test_the_grid_names_table9_its_selection_and_checks(grid):
    assert list(grid.outputs("tables")) == ["table9", "table9_select", "table9_checks"]
    assert not grid.outputs("figures")


def test_run_counts(grid, catalog):
    # Table 9: 6 rows (q-FFL under both selections) x seeds 0-4; the selection: 18 settings on
    # seed 0; the checks: 5 settings of their own x seeds 0-2 (their FedAvg row is Table 9's)
    runs = all_runs(grid, catalog, "paper")
    assert len(runs) == 30 + 18 + 15
    table = {r for cell in cells(grid, "tables", "table9", catalog, "paper").values() for r in cell}
    assert len(table) == 30 and {r.seed for r in table} == {0, 1, 2, 3, 4}
    assert len(all_runs(grid, catalog, "smoke")) == 6 + 18 + 5  # one seed at the smoke scale


def test_table9_cells_run_the_papers_settings(grid, catalog):
    got = cells(grid, "tables", "table9", catalog, "paper")
    assert {row for row, _ in got} == set(ROWS)
    assert {col for _, col in got} == {"mean", "std", "shirt", "pullover", "tshirt"}
    for (row, _col), runs in got.items():
        spec = _spec(catalog, "paper", runs[0])
        ds, part, t = spec["dataset"], spec["partition"], spec["training"]
        assert (ds["source"], ds["params"]) == (
            "fashion_mnist",
            {"classes": [0, 2, 6], "standardise": "train_per_pixel"},
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
    chosen = {r["id"]: r["algorithm"] for r in rows}
    swept = {r["algorithm"] for r in grid.output("tables", "table9_select")["rows"]}
    assert set(chosen.values()) <= swept
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
    scales = [a["server_lr_scale"] for n, a in algos.items() if re.fullmatch(r"dqnfed-s.*", n)]
    assert sorted(scales) == sorted(SCALES)
    heal = algos["dqnfed-fedheal"]
    assert (heal["threshold"], heal["beta"], heal["training"]["momentum"]) == (0.5, 0.5, 0.9)


@pytest.mark.workflow
def test_snakemake_dry_run_lists_every_job():
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
    assert counts["train"] == "63" and counts["table"] == "3", log[-2000:]
    assert counts["prepare"] == "4" and counts["partition"] == "12", log[-2000:]


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
