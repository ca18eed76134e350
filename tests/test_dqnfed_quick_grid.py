"""The DQN-Fed quick grid (config/papers/dqnfed_quick.yaml): Table 9's protocol (Fashion-MNIST,
three class-clients, specs/qffl-dqnfed.md B.5.2 item 6) cut to 100 rounds, and Synthetic(1, 1)'s
natural devices with every method of Table 9 plus TERM, Ditto and FedLF, on offline data only,
with no paper values beside its cells."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from fedbench.config import resolve_run
from fedbench.data import SOURCES
from fedbench.data.base import Source
from fedbench.grid import all_runs, cells, load_grid, output_files
from fedbench.outputs.chosen import group_candidates
from fedbench.papers import PAPERS_DIR

ROOT = Path(__file__).resolve().parents[1]
GRID = ROOT / "config" / "papers" / "dqnfed_quick.yaml"
PAPER_GRID = ROOT / "config" / "papers" / "dqnfed.yaml"
TABLE9_ROWS = ["fedavg", "qffl", "fedmgda", "fedheal", "dqnfed"]
EXTRA_ROWS = ["dqnfed-clip", "term", "fedlf", "ditto"]
ALGORITHMS = {
    "fedavg": "fedavg",
    "qffl": "qfedavg",
    "fedmgda": "fedmgda",
    "fedheal": "fedheal",
    "dqnfed": "dqnfed",
    "dqnfed-clip": "dqnfed",
    "term": "term",
    "fedlf": "fedlf",
    "ditto": "ditto",
}


@pytest.fixture(scope="module")
def grid(catalog):
    return load_grid(GRID, catalog)


def _spec(catalog, scale, run):
    return resolve_run(
        catalog, scale, run.dataset, run.partition, run.model, run.algorithm, run.seed
    )


def test_the_grid_lists_its_outputs(grid):
    assert grid.default_scale == "quick"
    assert list(grid.outputs("tables")) == ["table9", "table5_synthetic"]
    assert list(grid.outputs("figures")) == ["figure1_d", "figure3_synthetic"]
    files = output_files(grid, "quick")
    for name in ("table9.md", "table5_synthetic.csv", "figure1_d.png", "figure3_synthetic.pdf"):
        assert f"results/quick/papers/dqnfed_quick/{name}" in files


def test_run_counts(grid, catalog):
    # Fashion-MNIST: 5 methods x 3 seeds; Synthetic: 8 methods x 3 seeds; the figures reuse them
    runs = all_runs(grid, catalog, "quick")
    assert len(runs) == 5 * 3 + 8 * 3
    assert {r.seed for r in runs} == {0, 1, 2}
    assert len(all_runs(grid, catalog, "smoke")) == 5 + 8  # one seed at the smoke scale


def test_only_offline_sources_at_quick_scale(grid, catalog):
    # Fashion-MNIST from Debian's package (a source with an offline folder), Synthetic generated
    sources = {
        _spec(catalog, "quick", r)["dataset"]["source"] for r in all_runs(grid, catalog, "quick")
    }
    assert sources == {"fashion_mnist", "synthetic"}
    assert type(SOURCES["fashion_mnist"]).offline_dir is not Source.offline_dir
    assert SOURCES["synthetic"].files == []
    assert catalog["scales"]["quick"]["data"] == "real"


def test_table9_is_table9s_protocol_at_fewer_rounds(grid, catalog):
    paper = load_grid(PAPER_GRID, catalog)
    # the paper grid's chosen rows (B-D13) at their group's first value: any value of the group
    # has the same dataset, model and training as the one the quick grid runs
    paper_cells = cells(paper, "tables", "table9", catalog, "paper", choices="first")
    chosen = {
        r["id"]: r["chosen"] for r in paper.output("tables", "table9")["rows"] if "chosen" in r
    }
    swept = group_candidates(paper, "table9_select", catalog, None)
    got = cells(grid, "tables", "table9", catalog, "quick")
    assert {row for row, _ in got} == set(TABLE9_ROWS)
    assert {col for _, col in got} == {"mean", "std", "shirt", "pullover", "tshirt"}
    for (row, col), runs in got.items():
        assert len(runs) == 3
        spec = _spec(catalog, "quick", runs[0])
        # each row runs Table 9's selected variant on Table 9's data, model and split
        paper_spec = _spec(catalog, "paper", paper_cells[(row, col)][0])
        for key in ("dataset", "model") + (() if row in chosen else ("algorithm",)):
            assert spec[key] == paper_spec[key]
        if row in chosen:  # a value Table 9's selection sweeps for the row
            assert runs[0].algorithm in swept[chosen[row]]
        assert spec["partition"]["kind"] == "by_label"
        assert spec["partition"]["test_split"] == "official"
        assert spec["training"] == {**paper_spec["training"], "rounds": 100}
        assert spec["algorithm"]["algorithm"] == ALGORITHMS[row]


def test_synthetic_table_every_device_every_round(grid, catalog):
    got = cells(grid, "tables", "table5_synthetic", catalog, "quick")
    # Table 9's methods, DQN-Fed with its update clipped (the literal step diverges here)
    assert {row for row, _ in got} == set(TABLE9_ROWS[:-1] + EXTRA_ROWS)
    clipped = _spec(catalog, "quick", got[("dqnfed-clip", "mean")][0])["algorithm"]["params"]
    assert (clipped["server_lr_scale"], clipped["max_update_norm"]) == (0.1, 1.0)
    stats = {c["id"]: c["stat"] for c in grid.output("tables", "table5_synthetic")["columns"]}
    assert stats == {"mean": "mean", "std": "std", "worst10": "worst10", "best10": "best10"}
    for (row, _col), runs in got.items():
        spec = _spec(catalog, "quick", runs[0])
        assert spec["dataset"]["name"] == "synthetic-1-1"
        assert spec["dataset"]["params"]["num_clients"] == 30
        assert spec["partition"]["kind"] == "natural"
        t = spec["training"]
        assert (t["participation"], t["rounds"], t["local_epochs"]) == (1.0, 100, 1)
        assert t["improved_clients"] is True  # ρ_t for figure3_synthetic
        assert spec["algorithm"]["algorithm"] == ALGORITHMS[row]
    # Ditto is read on its personal models (B.6), every other row on the global model
    protocols = {
        r["id"]: r.get("protocol") for r in grid.output("tables", "table5_synthetic")["rows"]
    }
    assert protocols.pop("ditto") == "personal" and set(protocols.values()) == {None}


def test_figure3_reads_rho_t_of_the_tables_runs(grid, catalog):
    fig = grid.output("figures", "figure3_synthetic")
    assert (fig["metric"], fig["protocol"], fig["stat"]) == ("improved_clients", "train", "value")
    figure_runs = {
        r for v in cells(grid, "figures", "figure3_synthetic", catalog, "quick").values() for r in v
    }
    table_runs = {
        r for v in cells(grid, "tables", "table5_synthetic", catalog, "quick").values() for r in v
    }
    assert figure_runs == table_runs


def test_no_paper_values_beside_quick_cells():
    # a different setting: the paper's numbers are not printed beside these cells
    assert not (PAPERS_DIR / "dqnfed_quick.yaml").exists()


@pytest.mark.workflow
def test_snakemake_dry_run_lists_every_job():
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--forceall", "--nolock", "--cores", "1"]
        + ["dqnfed_quick", "--quiet", "rules"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-3000:]
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", log, re.M))
    assert counts["train"] == "39" and counts["table"] == "2", log[-2000:]
    assert counts["figure"] == "2", log[-2000:]
