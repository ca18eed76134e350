"""Claims from committed records: `fedbench record --cells-out` writes each cell's value per seed
as the table reads it, and a claims page reads that file where none of the table's runs is here
(a fresh clone's paper-scale verdicts)."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest

from fedbench import record
from fedbench.claims import load_claims
from fedbench.claims.evaluate import (
    CELLS_COLUMNS,
    read_grid,
    read_runs,
    read_table,
    recorded_cells,
)

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "config" / "config.yaml"


def _record(tmp_path: Path) -> Path:
    """The quick grid's table1 recorded by the CLI from the fake runs under the working dir."""
    folder = tmp_path / "records"
    folder.mkdir()
    cells = folder / "quick_table1_cells.csv"
    argv = ["quick", "table1", "--scale", "quick", "--config", str(CONFIG)]
    assert record.main([*argv, "--out", str(tmp_path / "runs.csv"), "--cells-out", str(cells)]) == 0
    return cells


def test_the_cells_file_holds_each_finished_runs_value_as_the_table_reads_it(
    quick_runs, catalog, tmp_path
):
    cells = _record(tmp_path)
    with open(cells, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert tuple(rows[0]) == CELLS_COLUMNS
    by_key = {(r["row"], r["column"], r["seed"]): float(r["value"]) for r in rows}
    # conftest: every client of a run scores TOP1[row] (+0.05 for SCAFFOLD on 2 shards) + 0.01
    # per seed; the table prints percent; SCAFFOLD's seed 2 on Synthetic never finished.
    assert by_key[("fedavg", "synthetic", "1")] == pytest.approx(61.0)
    assert by_key[("scaffold", "image-shards", "2")] == pytest.approx(77.0)
    assert ("scaffold", "synthetic", "2") not in by_key
    assert {r["grid"] for r in rows} == {"quick"} and {r["scale"] for r in rows} == {"quick"}
    live = read_table(quick_runs, "table1", catalog, "quick")
    assert sum(len(v) for v in live.values.values()) == len(rows)


def test_without_the_runs_a_claim_reads_the_record_and_says_so(quick_runs, catalog, tmp_path):
    cells = _record(tmp_path)
    cf = load_claims("quick", catalog, CONFIG)
    tests = [t for c in cf.claims for t in c.quick]
    live = read_grid(quick_runs, tests, catalog, "quick", records=cells.parent)
    assert not live["table1"].record  # the runs are here: they are read, not the record
    shutil.rmtree(Path("results"))  # a fresh clone: no runs, the committed record only
    kept = read_grid(quick_runs, tests, catalog, "quick", records=cells.parent)
    assert kept["table1"].record.endswith("quick_table1_cells.csv")
    assert kept["table1"].values == live["table1"].values  # every digit kept
    for claim in cf.claims:
        was, now = read_runs(claim.quick, live), read_runs(claim.quick, kept)
        assert now.verdict == was.verdict == "supported"
        assert [r.interval for r in now.results] == [r.interval for r in was.results]
        assert "from the committed record" in now.why
    gone = read_grid(quick_runs, tests, catalog, "quick", records=tmp_path / "nowhere")
    assert read_runs(cf.claims[0].quick, gone).verdict == "not run"


def test_a_record_of_another_grid_table_or_scale_is_not_read(quick_runs, catalog, tmp_path):
    cells = _record(tmp_path)
    assert recorded_cells(cells.parent, "quick", "table1", "quick") is not None
    assert recorded_cells(cells.parent, "quick", "table1", "paper") is None
    assert recorded_cells(cells.parent, "quick", "table2", "quick") is None
    assert recorded_cells(cells.parent, "superfed", "table1", "quick") is None


def test_a_malformed_cells_file_names_itself_and_the_fix(tmp_path):
    bad = tmp_path / "x_cells.csv"
    bad.write_text("table,row,value\ntable1,fedavg,1.0\n")
    with pytest.raises(ValueError, match=r"x_cells\.csv: not a cells record.*--cells-out"):
        recorded_cells(tmp_path, "quick", "table1", "quick")


def test_a_tables_cells_carry_over_sittings_through_the_run_record(quick_runs, catalog, tmp_path):
    """Runs made in two sittings: the second has only the first's run record, yet its cells file
    equals the one written where every run is (`--record` runs enter `--cells-out`)."""
    argv = ["quick", "table1", "--scale", "quick", "--config", str(CONFIG)]
    whole = _record(tmp_path)
    assert record.main([*argv, "--out", "first.csv"]) == 0
    shutil.rmtree(
        "results/quick/runs/synthetic-1-1"
    )  # the second sitting: those runs' folders gone
    again = tmp_path / "again.csv"
    assert (
        record.main(
            [*argv, "--out", "second.csv", "--record", "first.csv", "--cells-out", str(again)]
        )
        == 0
    )
    assert again.read_text() == whole.read_text()
    without = tmp_path / "without.csv"
    assert record.main([*argv, "--out", "third.csv", "--cells-out", str(without)]) == 0
    assert len(without.read_text().splitlines()) < len(whole.read_text().splitlines())


def test_a_curve_figure_reads_as_each_runs_curve_mean_and_records_like_a_table(
    quick_runs, catalog, tmp_path
):
    """Figure-based claims: the quick grid's figure1 (the same runs as table1) read per run as
    its curve's mean over the evaluated rounds; `--cells-out` records it under the figure's
    name, and without the runs the claims read that record."""
    from fedbench.claims.evaluate import read_figure
    from fedbench.claims.load import table_ids

    read = read_figure(quick_runs, "figure1", catalog, "quick")
    # conftest: one evaluated round (40), every client at TOP1[row] + 0.01 per seed, in percent
    assert read.values[("fedavg", "synthetic")][1] == pytest.approx(61.0)
    assert read.values[("scaffold", "image-shards")][2] == pytest.approx(77.0)
    assert ("scaffold", "synthetic") in read.values and 2 not in read.values[
        ("scaffold", "synthetic")
    ]
    assert table_ids(quick_runs, "figure1").rows == ("fedavg", "fedprox", "scaffold")
    folder = tmp_path / "records"
    folder.mkdir()
    cells = folder / "quick_figure1_cells.csv"
    argv = ["quick", "figure1", "--scale", "quick", "--config", str(CONFIG), "--out", "f.csv"]
    assert record.main([*argv, "--cells-out", str(cells)]) == 0
    with pytest.raises(SystemExit, match="is a figure; record it with --cells-out"):
        record.main([*argv, "--table-out", "t"])
    shutil.rmtree("results")  # a fresh clone: the record only
    again = read_table(quick_runs, "figure1", catalog, "quick", records=folder)
    assert again.record and again.values == read.values


def test_a_record_of_another_table_gives_the_runs_the_two_share_with_shared(
    quick_runs, catalog, tmp_path
):
    """pFedBreD's Table 1 cells from its Fashion-MNIST table's record: `--shared` reads the
    record's runs that this table has and skips its others; without it they are an error."""
    argv = ["quick", "table1", "--scale", "quick", "--config", str(CONFIG)]
    whole = _record(tmp_path)
    assert record.main([*argv, "--out", "first.csv"]) == 0
    with open("first.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    other = {**rows[0], "algorithm": "fedprox-mu1"}  # a run of no cell of table1
    with open("other.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows([*rows, other])
    shutil.rmtree("results/quick/runs")  # no run here: every cell from the record
    with pytest.raises(SystemExit, match="fedprox-mu1/0 is not a run of this table"):
        record.main([*argv, "--out", "x.csv", "--record", "other.csv"])
    shared = tmp_path / "shared.csv"
    assert (
        record.main(
            [
                *argv,
                "--out",
                "x.csv",
                "--record",
                "other.csv",
                "--shared",
                "--cells-out",
                str(shared),
            ]
        )
        == 0
    )
    assert shared.read_text() == whole.read_text()
