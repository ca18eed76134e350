"""The per-run summary CSV: final and best-round values by hand, missing runs listed."""

from __future__ import annotations

import pytest

from fedbench.report.collect import load_run, run_series
from fedbench.report.runs import main, summarise_runs


def test_final_and_best_round_per_protocol(runs, tmp_path):
    missing = runs["avg0"].parent.parent / "fedopt" / "seed0"
    frame = summarise_runs([runs["avg0"], runs["avg1"], runs["avg0"], missing], "top1", "mean")
    assert len(frame) == 3  # a directory given twice is one run
    first = frame.iloc[0]
    series = run_series(load_run(runs["avg0"]), "global", "top1", "mean")
    # seed 0's client-mean curve peaks at round 10 and ends at round 20 (conftest CURVES)
    assert first["global_best_round"] == 10
    assert first["global_top1_mean_best"] == pytest.approx(series[10])
    assert first["global_top1_mean_final"] == pytest.approx(series[20])
    assert series[10] > series[20]
    assert (first["dataset"], first["algorithm"], first["seed"]) == ("mnist", "fedavg", 0)
    assert frame.iloc[1]["seed"] == 1 and frame.iloc[1]["status"] == "ok"
    assert frame.iloc[2]["status"] == "missing" and frame.iloc[2]["algorithm"] == "fedopt"


def test_cli_writes_one_row_per_run_of_a_table(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no runs exist here: every run of the table is listed missing
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "runs.csv"
    main(["quick", "table1", "--config", str(root / "config" / "config.yaml"), "--out", str(out)])
    lines = out.read_text().splitlines()
    assert lines[0].startswith("dataset,partition,model,algorithm,seed,status")
    assert len(lines) == 1 + 27 and all(line.endswith(",missing") for line in lines[1:])
    with pytest.raises(SystemExit, match="no table"):
        main(["quick", "table9", "--config", str(root / "config" / "config.yaml"), "--out", "x"])


def test_cli_table_out_builds_the_table_from_the_finished_runs(tmp_path, monkeypatch, make):
    import shutil
    from pathlib import Path

    from fedbench.report.runs import table_run_dirs

    root = Path(__file__).resolve().parents[2]
    config = str(root / "config" / "config.yaml")
    monkeypatch.chdir(tmp_path)
    dirs, _ = table_run_dirs("quick", "table1", None, config)
    first = dirs[0]  # the first cell's seeds 0 and 1 finished, nothing else
    for seed in (0, 1):
        shutil.copytree(make(seed=seed), first.parent / f"seed{seed}")
    prefix = tmp_path / "partial"
    main(["quick", "table1", "--config", config, "--out", "r.csv", "--table-out", str(prefix)])
    md = (tmp_path / "partial.md").read_text()
    assert "PARTIAL: built from the 2 of 27 runs that have finished" in md
    # seed 0 ends at 0.68, seed 1 at 0.74 (conftest CURVES; sample-weighted clients around them)
    body = [line for line in md.splitlines() if line.startswith("| ")]
    assert "(n=2)" in body[1] and body[1].count("—") >= 2
    assert all("(n=" not in line for line in body[2:])
    assert {p.suffix for p in tmp_path.glob("partial.*")} == {".md", ".tex", ".csv"}


def test_partial_table_counts_a_run_shared_by_two_rows_once(tmp_path, monkeypatch):
    """pFedBreD's Fashion-MNIST table reads pfb-perfedavg in two rows (the release's +FT and the
    paper's 2-step P): 13 + 3 rows x 2 columns x 5 seeds = 160 cells' runs, 150 distinct."""
    from pathlib import Path

    from fedbench.report.runs import table_run_dirs, write_partial_table

    config = str(Path(__file__).resolve().parents[2] / "config" / "config.yaml")
    monkeypatch.chdir(tmp_path)  # no runs here
    dirs, _ = table_run_dirs("pfedbred", "table1_2_fmnist", None, config)
    assert len(dirs) == 160 and len(set(map(str, dirs))) == 150
    assert write_partial_table("pfedbred", "table1_2_fmnist", None, config, "t") == (0, 150)
    assert "PARTIAL: built from the 0 of 150 runs" in Path("t.md").read_text()
