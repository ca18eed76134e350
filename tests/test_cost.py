"""fedbench.cost: grouping runs into cells, the estimate's arithmetic, nominal sizes, the CLI."""

from __future__ import annotations

import copy
import csv
from pathlib import Path

import numpy as np
import pytest
import torch

from fedbench import cost
from fedbench.algorithms import build_algorithm
from fedbench.config import resolve_run
from fedbench.grid import all_runs, load_grid

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "config" / "config.yaml"


def _keys(spec):
    template = cost._template(spec["dataset"]["source"], cost._freeze(spec["dataset"]["params"]))
    key, timing, profile, m, phases = cost.cost_keys(
        spec, cost.run_sizes(spec, template.num_classes)
    )
    return key, profile


def _spec(catalog, partition="superfed-patho-k50", algorithm="fedavg", seed=0):
    return resolve_run(catalog, "paper", "mnist", partition, "superfed-twonn", algorithm, seed)


def test_seeds_and_scalar_hyperparameters_share_a_cell(catalog):
    base = _keys(_spec(catalog))
    assert _keys(_spec(catalog, seed=2)) == base
    # FedProx's mu only scales a term it computes anyway; its lr-only variant is the same work.
    prox = _keys(_spec(catalog, algorithm="fedprox-sf"))
    assert _keys(_spec(catalog, algorithm="fedprox-sf-lr0.01")) == prox
    assert prox[0] != base[0]


def test_a_different_e_k_or_tau_is_a_different_cell(catalog):
    spec = _spec(catalog)
    base = _keys(spec)
    other_e = copy.deepcopy(spec)
    other_e["training"]["local_epochs"] = 5
    assert _keys(other_e)[0] != base[0]
    k100 = _keys(_spec(catalog, partition="superfed-patho-k100"))
    assert k100[0] != base[0]
    assert not cost.similar(k100[1], base[1])  # and the clients are half the size
    ditto = _spec(catalog, algorithm="ditto")
    tau = copy.deepcopy(ditto)
    tau["algorithm"]["params"]["tau"] = 1
    assert _keys(tau)[0] != _keys(ditto)[0]


def test_grouping_of_the_quick_grid(catalog):
    grid = load_grid(ROOT / "config" / "papers" / "quick.yaml", catalog)
    cells = cost.group_cells(catalog, grid, "quick")
    runs = all_runs(grid, catalog, "quick")
    assert sum(len(c.runs) for c in cells) == len(runs)
    for c in cells:
        # seeds are copies: each (dataset, partition, model, algorithm) keeps all its seeds together
        names = {(r.dataset, r.partition, r.model, r.algorithm) for r in c.runs}
        assert len(c.runs) == 3 * len(names)
        assert len({r.algorithm for r in c.runs}) == 1
    # SuPerFed's L splits the rounds, not the timing: same timing key, different cells
    sf = load_grid(ROOT / "config" / "papers" / "superfed.yaml", catalog)
    l_cells = [c for c in cost.group_cells(catalog, sf, "paper") if "t300" in c.label]
    assert len({c.timing_key for c in l_cells}) == 2  # MM and LM
    assert len({c.key for c in l_cells}) == len(l_cells) == 10


def test_phases_and_evaluations():
    sf = build_algorithm("superfed", start=0.4)
    split = cost.phase_split(sf, 500)
    assert [(p, n) for p, n, _ in split] == [("pre", 200), ("mix", 300)]
    pre, mix = split[0][2], split[1][2]
    assert pre.start == 1.0 and mix.start == 0.0 and pre.nu == sf.nu
    assert [(p, n) for p, n, _ in cost.phase_split(build_algorithm("fedavg"), 40)] == [("all", 40)]
    assert cost.n_evals(500, 50) == 10
    assert cost.n_evals(390, 50) == 8  # 7 on the cadence and the last round
    assert cost.n_evals(3, 5) == 1


def test_run_seconds_on_hand_timings():
    # FedAvg: 500 rounds of 2 s + 10 evaluations of 30 s
    assert cost.run_seconds(500, 50, {"all": 500}, {"all": 2.0}, 30.0) == 1300.0
    # SuPerFed, L = 0.4 T: 200 rounds at 1 s, 300 at 3 s, 10 evaluations of 10 s
    secs = cost.run_seconds(500, 50, {"pre": 200, "mix": 300}, {"pre": 1.0, "mix": 3.0}, 10.0)
    assert secs == 200 + 900 + 100
    # a phase with no rounds needs no timing
    assert cost.run_seconds(300, 50, {"pre": 0, "mix": 300}, {"mix": 1.0}, 0.0) == 300.0
    with pytest.raises(ValueError, match="add up"):
        cost.run_seconds(500, 50, {"all": 400}, {"all": 1.0}, 0.0)


def test_extrapolation():
    # a round costs 1 s + 0.01 s per step-unit: probe (10 units), timed (100), true (1000)
    assert cost.extrapolate(10, 1.1, 100, 2.0, 1000) == pytest.approx(11.0)
    assert cost.extrapolate(10, 1.1, 100, 2.0, 100) == 2.0  # timed at the true size
    # noisy or flat: proportional from the timed round (an upper bound)
    assert cost.extrapolate(10, 3.0, 100, 2.0, 1000) == pytest.approx(20.0)


def test_row_and_table_from_hand_timings(catalog):
    grid = load_grid(ROOT / "config" / "papers" / "quick.yaml", catalog)
    cell = cost.group_cells(catalog, grid, "quick")[0]
    timing = cost.Timing({"all": 0.5}, 2.0, "vectorised")
    row = cost.cell_row(cell, timing)
    secs = cell.rounds * 0.5 + cost.n_evals(cell.rounds, cell.eval_every) * 2.0
    assert row["hours_per_run"] == round(secs / 3600, 4)
    assert row["total_hours"] == round(secs * 3 / 3600, 4)
    failed = cost.cell_row(cell, None, "OutOfMemoryError: CUDA out of memory")
    assert failed["status"] == "error"
    text = cost.format_table([row, failed])
    assert "error" in text and cell.label in text
    parsed = list(csv.DictReader(cost.to_csv([row, failed]).splitlines()))
    assert parsed[1]["error"].startswith("OutOfMemoryError")


def test_strata_means():
    sizes = [1, 2, 3, 4, 100, 200]
    assert cost.strata_means(sizes, 3) == [2, 4, 150]
    assert sum(cost.strata_means(list(range(100)), 5)) == pytest.approx(5 * 49.5, abs=3)
    assert cost.strata_means([0, 0], 1, floor=1) == [1]


def test_nominal_sizes_cover_the_superfed_grid(catalog):
    grid = load_grid(ROOT / "config" / "papers" / "superfed.yaml", catalog)
    sources = {catalog["datasets"][r.dataset]["source"] for r in all_runs(grid, catalog, "paper")}
    assert {
        "mnist",
        "cifar10",
        "cifar100",
        "tinyimagenet",
        "femnist",
        "leaf_shakespeare",
    } <= sources
    for source in sources:
        nom = cost.nominal(source)
        assert nom.n_train > 0 and nom.origin
    for source, per_client in (("femnist", 226.83), ("leaf_shakespeare", 3743.28)):
        sizes = cost.natural_sizes(source)
        assert len(sizes) == cost.nominal(source).clients
        assert sizes.mean() == pytest.approx(per_client, rel=0.01)
    with pytest.raises(ValueError, match="NOMINAL"):
        cost.nominal("no-such-source")


def test_every_catalog_source_has_nominal_sizes(catalog):
    # `python -m fedbench.cost <paper>` needs every dataset's sizes at its own parameters.
    for name, d in catalog["datasets"].items():
        nom = cost.nominal(d["source"], d.get("params"))
        assert nom.n_train > 0 and nom.origin, name
        if d["source"] not in cost.GENERATED and nom.clients is not None:
            assert cost.natural_sizes(d["source"], d.get("params")).sum() > 0, name


def test_natural_clients_from_a_table_or_the_papers_statistics():
    # a published table is used as it is: FLamby's ISIC centres, UCI's heart hospitals
    assert tuple(cost.natural_sizes("isic2019")) == (12_413, 3_954, 3_363, 2_259, 819, 439)
    assert cost.nominal("heart").n_train == 920 == cost.natural_sizes("heart").sum()
    mqp = cost.natural_sizes("mqp")  # AAggFF's Table 3.5: 11 doctors, 277.09 +- 63.25
    assert (len(mqp), mqp.sum()) == (11, 3_048)
    assert (mqp.mean(), mqp.std()) == pytest.approx((277.09, 63.25), abs=0.01)
    sent140 = cost.natural_sizes("sent140", {"clients": 10})
    assert len(sent140) == 10 and sent140.sum() == cost.nominal("sent140").n_train
    for source, k, mean in (("leaf_celeba", 9_343, 21.44), ("speechcommands", 2_005, 42.24)):
        sizes = cost.natural_sizes(source)
        assert len(sizes) == k and sizes.mean() == pytest.approx(mean, rel=0.01)
    # an entry holds for the parameters it names: another user sample or regrouping fails
    assert cost.nominal("femnist", {"sample": "leaf_niid", "fraction": 0.05}).clients == 198
    assert cost.nominal("femnist").clients == 3_550
    with pytest.raises(ValueError, match="NOMINAL"):
        cost.nominal("sent140", {"clients": None})
    with pytest.raises(ValueError, match="NOMINAL"):
        cost.nominal("shakespeare_plays", {"stride": 1})


def test_a_cell_of_another_objective_is_timed(catalog):
    # Heart: one logit + BCE (bce_logit); the evaluation passes are timed as run_rounds runs them.
    spec = resolve_run(
        catalog,
        "paper",
        "aaggff-heart",
        "aaggff-natural-silo",
        "aaggff-logreg",
        "fedavg-release",
        0,
    )
    assert spec["training"]["objective"] == "bce_logit"
    sizes = cost.run_sizes(spec, 2)
    assert sizes.num_clients == 4 and sum(sizes.train) + sum(sizes.test) == 920
    key, timing_key, _, m, phases = cost.cost_keys(spec, sizes)
    cell = cost.Cell(key, timing_key, spec, sizes, m, phases)
    timing = cost.time_cell(cell, ["all"], 1, torch.device("cpu"), 4, 0.2)
    assert timing.round_s["all"] > 0 and timing.eval_s > 0


def test_partition_sizes_are_nominal(catalog):
    spec = _spec(catalog, partition="superfed-patho-k50")
    sizes = cost.run_sizes(spec, 10)
    assert sizes.num_clients == 50 and sizes.n_global == 10_000
    assert set(sizes.train) == {960} and set(sizes.test) == {240}  # 60,000 / 50, 80/20
    femnist = resolve_run(catalog, "paper", "femnist", "superfed-femnist-k730", "vgg9", "fedavg", 0)
    fs = cost.run_sizes(femnist, 62)
    assert fs.num_clients == 730 and fs.n_global == 0
    assert np.mean(np.add(fs.train, fs.test)) == pytest.approx(226.83, rel=0.1)


def test_untimed_cells_are_listed_with_their_error(tmp_path, monkeypatch, capsys):
    def boom(*args, **kwargs):
        raise MemoryError("out of memory")

    monkeypatch.setattr(cost, "time_cell", boom)
    out = tmp_path / "cost.csv"
    cost.main(["quick", "--limit", "1", "--config", str(CONFIG), "--out", str(out)])
    printed = capsys.readouterr().out
    assert "NOT TIMED" in printed and "MemoryError: out of memory" in printed
    assert "TOTAL (PARTIAL)" in printed
    rows = list(csv.DictReader(out.open()))
    assert rows[0]["status"] == "error" and rows[1]["status"] == "not timed"


def test_a_stopped_estimate_keeps_the_cells_it_timed(tmp_path, monkeypatch, catalog):
    grid = load_grid(ROOT / "config" / "papers" / "quick.yaml", catalog)
    first = cost.group_cells(catalog, grid, "quick")[0]
    calls = []

    def once_then_stop(cell, *args, **kwargs):
        calls.append(cell.label)
        if len(calls) > 1:
            raise KeyboardInterrupt  # the user stops a long estimate
        return cost.Timing({p: 1.0 for p in cell.phase_rounds}, 0.5, "sequential")

    monkeypatch.setattr(cost, "time_cell", once_then_stop)
    out = tmp_path / "cost.csv"
    with pytest.raises(KeyboardInterrupt):
        cost.main(["quick", "--limit", "3", "--config", str(CONFIG), "--out", str(out)])
    rows = list(csv.DictReader(out.open()))
    assert rows[0]["cell"] == first.label and rows[0]["status"] == "timed"
    assert {r["status"] for r in rows[1:]} == {"not timed"}
    assert len(rows) == len(cost.group_cells(catalog, grid, "quick"))


def test_end_to_end_on_the_quick_grid(tmp_path, capsys):
    out = tmp_path / "cost.csv"
    cost.main(
        ["quick", "--limit", "1", "--rounds", "1", "--budget", "0.2", "--eval-clients", "5"]
        + ["--config", str(CONFIG), "--out", str(out)]
    )
    printed = capsys.readouterr().out
    assert "TOTAL (PARTIAL)" in printed and "torch thread" in printed and "CPU" in printed
    rows = list(csv.DictReader(out.open()))
    timed = [r for r in rows if r["status"] == "timed"]
    assert len(timed) == 1 and float(timed[0]["round_s"]) > 0 and float(timed[0]["eval_s"]) > 0
    assert float(timed[0]["total_hours"]) == pytest.approx(
        3 * float(timed[0]["hours_per_run"]), rel=1e-2, abs=5e-4
    )


def test_precision_replaces_every_runs_own_and_is_named(tmp_path, monkeypatch, capsys, catalog):
    grid = load_grid(ROOT / "config" / "papers" / "quick.yaml", catalog)
    fp32 = cost.group_cells(catalog, grid, "quick")
    bf16 = cost.group_cells(catalog, grid, "quick", "bf16")
    assert {c.spec["training"].get("precision", "fp32") for c in fp32} == {"fp32"}
    assert {c.spec["training"]["precision"] for c in bf16} == {"bf16"}
    assert fp32[0].timing_key != bf16[0].timing_key  # a timing is never shared across them
    seen = []

    def record(cell, *args, **kwargs):
        seen.append(cell.spec["training"]["precision"])
        raise MemoryError("stop here")

    monkeypatch.setattr(cost, "time_cell", record)
    out = tmp_path / "cost.csv"
    cost.main(
        ["quick", "--limit", "1", "--precision", "bf16", "--config", str(CONFIG)]
        + ["--out", str(out)]
    )
    assert seen == ["bf16"] and "precision bf16" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        cost.main(["quick", "--precision", "fp16", "--config", str(CONFIG), "--out", str(out)])
