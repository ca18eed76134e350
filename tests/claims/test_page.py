"""The claims pages (fedbench.claims.page, fedbench.jobs.claims_page / claims_index): a work's
page from fake runs of the quick grid, the page across works from the pages' CSVs, and the inputs
a page waits for (only files that exist)."""

from __future__ import annotations

import csv
from pathlib import Path

from fedbench import jobs
from fedbench.claims import load_claims
from fedbench.claims.evaluate import RECORDS, existing_inputs, record_files
from fedbench.claims.page import (
    TEST_SENTENCE,
    evaluate_work,
    page_inputs,
    page_targets,
    read_page_csv,
    small_scale,
    summary_row,
)

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "config" / "config.yaml"


def test_small_scale_reads_quick_beside_paper_and_its_own_scale_otherwise():
    assert small_scale("paper") == "quick"
    assert small_scale("smoke") == "smoke"
    assert small_scale("quick-bf16") == "quick-bf16"


def test_a_works_page_gives_each_claim_three_readings(quick_runs, catalog, tmp_path):
    cf = load_claims("quick", catalog, CONFIG)
    page = evaluate_work(cf, catalog, "quick")
    assert [r.small.verdict for r in page.rows] == ["supported", "supported"]
    assert all(r.printed is None and r.ours is None for r in page.rows)  # no paper, no paper grid
    assert summary_row(page) == [
        "quick",
        "2 (0 untestable)",
        "— (no printed values)",
        "2 / 0 / 0 / 0",
    ]
    paths = jobs.claims_page(
        "quick", catalog, "quick", tmp_path / "out" / "quick.md", config_dir=ROOT / "config"
    )
    assert [p.suffix for p in paths] == [".md", ".html", ".csv", ".json"]
    md = paths[0].read_text()
    assert TEST_SENTENCE in md and "> SCAFFOLD's correction helps most" in md
    assert "95 % CI [" in md and "n = 3, paired over 3 seeds" in md  # the numbers behind a verdict
    rows = list(csv.DictReader(paths[2].open()))
    assert [r["id"] for r in rows] == ["scaffold-helps", "fedprox-within-noise"]
    assert rows[1]["line"] == "L30-31" and rows[1]["small"] == "supported"
    assert read_page_csv(paths[2]) == summary_row(page)
    index = jobs.claims_index([paths[2]], "quick", tmp_path / "out" / "index.md")
    assert (
        "| quick | 2 (0 untestable) | — (no printed values) | 2 / 0 / 0 / 0 |"
        in index[0].read_text()
    )


def test_a_paper_work_page_reads_the_printed_values_without_runs(tmp_path, monkeypatch, catalog):
    monkeypatch.chdir(tmp_path)  # no results here: every run is missing
    cf = load_claims("fedevg", catalog, CONFIG)
    page = evaluate_work(cf, catalog, "paper")
    by_id = {r.claim.id: r for r in page.rows}
    assert by_id["summary-accuracy-natural"].printed.verdict == "fails"
    assert by_id["summary-accuracy-natural"].ours.verdict == "not run"
    assert by_id["samples-representative"].printed is None  # untestable
    assert summary_row(page) == ["fedevg", "13 (7 untestable)", "4 / 6", "0 / 0 / 0 / 6"]


def test_a_page_waits_only_for_files_that_exist(quick_runs, catalog):
    cf = load_claims("quick", catalog, CONFIG)
    tests = [t for c in cf.claims for t in c.quick]
    files = existing_inputs(cf.quick_grid, tests, catalog, "quick")
    assert files and all(Path(f).exists() for f in files)
    assert len(files) == 2 * (27 - 1)  # run.yaml and metrics.jsonl of 26 finished runs
    inputs = page_inputs("quick", catalog, "quick", config_dir=ROOT / "config")
    records = [str(p) for p in record_files(RECORDS)]  # a committed record changes every page
    assert inputs == [str(cf.path), *records, *files]
    # at paper scale the quick work reads the quick grid at scale quick; nothing else exists
    assert page_inputs("quick", catalog, "paper", config_dir=ROOT / "config") == inputs
    targets = page_targets("smoke")
    assert "results/smoke/claims/index.html" in targets and len(targets) == 4 * 7 + 3
