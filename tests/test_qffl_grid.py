"""The q-FFL preprint's grids (config/papers/qffl.yaml, qffl_quick.yaml; specs/qffl-dqnfed.md
A.9): the incentive game's figures and table, Theorem 1's bound, and QF-6 (the reconstructed
Algorithm 1 beside q-FedAvg at the same q on Synthetic(1, 1) and Fashion-MNIST's class-clients).
The paper has no numbers, so every output says it is illustrative."""

from __future__ import annotations

import copy
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fedbench.config import ConfigError, resolve_run
from fedbench.grid import all_runs, cells, load_grid, output_files, output_inputs
from fedbench.outputs.incentive import game_file, settings_of

ROOT = Path(__file__).resolve().parents[1]
PAPERS = ROOT / "config" / "papers"
QS = [0, 0.5, 1, 2, 5]
ILLUSTRATIVE = "illustrative: the paper gives no numbers"
GAME_OUTPUTS = {
    "table2": "equilibrium",
    "figure1": "follower_ne",
    "figure3": "leader_utility",
    "figure4": "fairness",
    "figure5": "bound",
}


@pytest.fixture(scope="module")
def grid(catalog):
    return load_grid(PAPERS / "qffl.yaml", catalog)


@pytest.fixture(scope="module")
def quick(catalog):
    return load_grid(PAPERS / "qffl_quick.yaml", catalog)


def _spec(catalog, scale, run):
    return resolve_run(
        catalog, scale, run.dataset, run.partition, run.model, run.algorithm, run.seed
    )


def test_the_grid_names_every_output_and_says_it_is_illustrative(grid, quick):
    assert list(grid.outputs("tables")) == ["table2", "table6"]
    assert list(grid.outputs("figures")) == ["figure1", "figure3", "figure4", "figure5", "figure6"]
    assert list(quick.outputs("tables")) == ["table6"]
    assert list(quick.outputs("figures")) == ["figure6"]
    for g in (grid, quick):
        for section in ("tables", "figures"):
            for name, out in g.outputs(section).items():
                assert ILLUSTRATIVE in out["caption"], (g.name, name)
    assert quick.default_scale == "quick" and grid.default_scale == "paper"


def test_game_outputs_read_their_computed_file_and_no_run(grid, catalog):
    for name, show in GAME_OUTPUTS.items():
        section = "tables" if name.startswith("table") else "figures"
        assert grid.output(section, name)["show"] == show
        assert cells(grid, section, name, catalog, "paper") == {}
        assert output_inputs(grid, section, name, catalog, "smoke") == [
            game_file("smoke", "qffl", name)
        ]
        assert settings_of(grid, name)["show"] == show


def test_game_parameters_are_the_specs_illustration(grid):
    s = settings_of(grid, "table2")
    assert len(s["costs"]) == len(s["gaps"]) == 6  # A.9: M = 5-10
    assert all(0.5 <= c <= 1.5 for c in s["costs"])  # C_n ~ U[0.5, 1.5]
    assert all(0.0 <= g <= 0.3 for g in s["gaps"])  # |F_n - F_global| ~ U[0, 0.3]
    assert s["caps"] is None and s["betas"] == [0.0, 1.0, 5.0]  # QF-1's β
    assert (s["lam"], s["g"], s["fairness_sign"]) == (50.0, "log1p", -1)  # A-Q5, A-Q6
    for name in ("figure1", "figure3", "figure4"):
        other = settings_of(grid, name)
        assert (other["costs"], other["gaps"]) == (s["costs"], s["gaps"])
    assert settings_of(grid, "figure4")["beta_range"] == [0.0, 10.0]  # QF-4's sweep
    assert settings_of(grid, "figure3")["tau_max"] == 1.5 * s["lam"]  # QF-3: τ ∈ (0, 1.5λ]
    assert settings_of(grid, "figure5")["qs"] == [0.0, 0.5, 1.0, 2.0]  # QF-5


def test_qf6_pairs_each_q_of_algorithm_1_with_q_fedavg(grid, quick, catalog):
    for g, scale, rounds in ((grid, "paper", (200, 100)), (quick, "quick", (60, 30))):
        got = cells(g, "tables", "table6", catalog, scale)
        specs = {row: _spec(catalog, scale, runs[0]) for (row, col), runs in got.items()}
        for q in QS:
            local = specs[f"localpow-q{q:g}"]["algorithm"]
            qfedavg = specs[f"qfedavg-q{q:g}"]["algorithm"]
            assert (local["algorithm"], local["params"]["q"]) == ("qffl_localpow", q)
            assert local["params"]["power"] == "per_example"  # A-Q3
            assert local["params"]["weighting"] == "equal"  # A-Q1
            assert (qfedavg["algorithm"], qfedavg["params"]["q"]) == ("qfedavg", q)
        for (_row, col), runs in got.items():
            spec = _spec(catalog, scale, runs[0])
            t = spec["training"]
            assert t["participation"] == 1.0 and t["local_steps"] == 20  # A.5, A-Q2
            if col.startswith("syn"):
                assert spec["dataset"]["name"] == "synthetic-1-1"
                assert spec["partition"]["kind"] == "natural" and t["rounds"] == rounds[0]
            else:
                assert spec["dataset"]["name"] == "dqnfed-fmnist"
                assert spec["dataset"]["params"]["classes"] == [0, 2, 6]
                assert (spec["partition"]["kind"], spec["partition"]["test_split"]) == (
                    "by_label",
                    "official",
                )
                assert t["rounds"] == rounds[1]


def test_qf6_figure_reads_the_tables_runs(grid, quick, catalog):
    for g, scale in ((grid, "paper"), (quick, "quick"), (grid, "smoke")):
        table = set(all_runs(g, catalog, scale))
        figure = {k for ks in cells(g, "figures", "figure6", catalog, scale).values() for k in ks}
        assert figure == {k for k in table if k.algorithm.startswith("qffl-")}
    assert len(all_runs(grid, catalog, "paper")) == 2 * 2 * len(QS) * 3  # 3 seeds
    assert len(all_runs(grid, catalog, "smoke")) == 2 * 2 * len(QS)
    assert len(all_runs(quick, catalog, "quick")) == 2 * 2 * len(QS)


def test_output_files_cover_every_extension(grid):
    files = output_files(grid, "paper")
    assert "results/paper/papers/qffl/table2.html" in files
    assert "results/paper/papers/qffl/figure5.pdf" in files
    assert "results/paper/papers/qffl/table2.json" in files  # the .csv's notes
    assert len(files) == 2 * 5 + 5 * 2


def _write(tmp_path: Path, name: str, raw: dict) -> Path:
    import yaml

    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({**raw, "paper": name}, allow_unicode=True))
    return path


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda f: f["figure1"].update(show="nash"), "figure1.show: 'nash' is not one of"),
        (lambda f: f["figure1"]["game"].update(lamda=3), r"unknown key\(s\) \['lamda'\]"),
        (lambda f: f["figure1"]["game"].update(gaps=[0.1]), "gaps must have one entry per player"),
        (lambda f: f["figure1"]["game"].update(fairness_sign=2), "fairness_sign must be one of"),
        (lambda f: f["figure4"]["game"].update(betas=[1]), "sweeps `beta_range` instead"),
        (lambda f: f["figure5"]["bound"].update(T_range=[1, 100]), "needs T >= N = 10"),
        (
            lambda f: f["figure6"]["rows"][0].update(algorithm="qffl-localpow-x{q}"),
            "'qffl-localpow-x0' is not in the catalog",
        ),
        (lambda f: f["figure6"].update(values=[0, 0.5, 3]), "'qffl-localpow-q3' is not in"),
    ],
)
def test_bad_entries_fail_naming_the_key(tmp_path, grid, catalog, change, message):
    raw = copy.deepcopy(grid.raw)
    change(raw["figures"])
    with pytest.raises(ConfigError, match=message):
        load_grid(_write(tmp_path, "qffl", raw), catalog)


@pytest.mark.workflow
def test_snakemake_dry_run_lists_every_output():
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--forceall", "--cores", "1", "qffl"]
        + ["--config", "scale=paper", "--quiet", "rules"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-3000:]
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", log, re.M))
    assert counts["incentive"] == "5" and counts["train"] == "60", log[-2000:]
    assert counts["table"] == "2" and counts["figure"] == "5", log[-2000:]
