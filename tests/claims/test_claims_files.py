"""Every work's claims file (`fedbench/papers/claims/*.yaml`): it validates against the grids and
the printed values, each quote is on its line of the work's text, the papers' own tables give the
verdicts recorded here, a bad claim is an error naming the claim and the key, and our reading
goes through the tables' own spec (`read_table` on fake runs of the quick grid)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from fedbench.claims import WORKS, ClaimError, load_claims, read_claims
from fedbench.claims.evaluate import read_grid, read_printed, read_runs, read_table
from fedbench.claims.load import quote_found
from fedbench.claims.stats import FAILS, HOLDS, NO_VALUES, SUPPORTED
from fedbench.grid import load_grid, output_spec
from fedbench.io import write_yaml
from fedbench.papers import load_paper_values
from fedbench.report.tables import build_table

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "config" / "config.yaml"
GRIDS = ROOT / "config" / "papers"

# The claims each paper's own printed tables contradict (fedbench/papers/claims/*.yaml, the
# printed reading); every other claim with a check holds on them. qffl and quick print nothing.
FAIL_ON_PRINTED = {
    "quick": set(),
    "superfed": {"dirichlet-less-affected", "realistic-consistent-gain", "conclusion-outperforms"},
    "aaggff": set(),
    "fedevg": {"summary-accuracy-natural", "summary-fid-medical"},
    "pfedbred": {"consistently-state-of-the-art"},
    "qffl": set(),
    "dqnfed": {
        "abstract-fairness-accuracy",
        "contribution-fairness",
        "second-order-unfair",
        "fairest-tables-1-4-5-6",
        "highest-accuracy-tables-1-4-5-6",
        "mean-column-is-mean",
        "std-column-is-pstd",
    },
}


@pytest.fixture(scope="module")
def claims(catalog):
    return {w: load_claims(w, catalog, CONFIG) for w in WORKS}


@pytest.mark.parametrize("work", WORKS)
def test_every_work_has_claims_each_citing_its_line(claims, work):
    cf = claims[work]
    assert len(cf.claims) >= 2
    for c in cf.claims:
        assert c.line[0] >= 1 and c.quote.strip()
        assert c.checks or c.quick or c.untestable, c.id
        if c.untestable:
            assert not c.checks and len(c.untestable) > 20, c.id  # a reason, not a flag


@pytest.mark.parametrize("work", WORKS)
def test_each_quote_is_on_its_line(claims, work):
    path = claims[work].text_path()
    if not path.exists():
        pytest.skip(f"{path} is only in the shared workspace, not in CI")
    lines = path.read_text(encoding="utf-8").splitlines()
    missing = [f"{c.id} ({c.lines})" for c in claims[work].claims if not quote_found(lines, c)]
    assert not missing, f"quotes not on their lines of {path.name}: {missing}"


@pytest.mark.parametrize("work", WORKS)
def test_the_papers_own_tables_contradict_these_claims(claims, work):
    cf = claims[work]
    verdicts = {
        c.id: read_printed(c.checks, cf.paper_grid, cf.printed).verdict
        for c in cf.claims
        if c.checks
    }
    expected_values = HOLDS if len(cf.printed) else NO_VALUES
    assert {i for i, v in verdicts.items() if v == FAILS} == FAIL_ON_PRINTED[work]
    # a claim checked on a figure's curves only (DQN-Fed's converges-faster): no printed number
    tables = cf.paper_grid.outputs("tables") if cf.paper_grid is not None else {}
    on_figures = {
        c.id
        for c in cf.claims
        if c.checks and all(cell.table not in tables for t in c.checks for cell in t.cells)
    }
    assert all(
        v in (FAILS, expected_values) or (i in on_figures and v == NO_VALUES)
        for i, v in verdicts.items()
    ), verdicts


def test_dqnfed_table9_mean_fails_for_dqnfed_alone(claims):
    cf = claims["dqnfed"]
    claim = next(c for c in cf.claims if c.id == "mean-column-is-mean")
    reading = read_printed(claim.checks, cf.paper_grid, cf.printed)
    failing = {r.label.split(": ")[1] for r in reading.results if r.verdict == FAILS}
    assert failing == {"dqnfed"}  # 81.27 printed, (72.57 + 88.21 + 90.99) / 3 = 83.92


def test_fedevg_summary_fails_in_the_two_cells_of_the_spec(claims):
    cf = claims["fedevg"]
    fails = set()
    for c in cf.claims:
        if c.id.startswith("summary-"):
            r = read_printed(c.checks, cf.paper_grid, cf.printed)
            fails |= {x.label.split(" in ")[1] for x in r.results if x.verdict == FAILS}
    assert fails == {"mnist-k10-a0.01", "dermamnist-k10-a1"}


# --- a bad claim is an error naming the claim and the key --------------------------------------


def _write(tmp_path: Path, claims: list[dict], work: str = "pfedbred", **top) -> Path:
    doc = {"work": work, "text": "002_59e51939e752d3f8.txt", "grids": {"paper": work}} | top
    path = tmp_path / f"{work}.yaml"
    write_yaml(path, {**doc, "claims": claims})
    return path


GOOD = {"id": "demo", "line": 10, "section": "abstract", "quote": "q"}
CHECK = {"form": "order", "table": "table1", "row": "mh-am", "over": ["fedamp"], "columns": ["avg"]}


NO_OVER = {k: v for k, v in CHECK.items() if k != "over"}
NO_LINE = {k: v for k, v in GOOD.items() if k != "line"}
BAD_CLAIMS = [
    ({**GOOD, "check": {**CHECK, "table": "table9"}},
     "(demo).check.table: the grid has no table 'table9'"),
    ({**GOOD, "check": {**CHECK, "row": "mh-xx"}}, "(demo).check.row: 'mh-xx' is not a row"),
    ({**GOOD, "check": {**CHECK, "over": ["nobody"]}},
     "(demo).check.over: ['nobody'] not row(s)"),
    ({**GOOD, "check": {**CHECK, "columns": ["avg", "zz"]}},
     "(demo).check.columns: ['zz'] not"),
    ({**GOOD, "check": NO_OVER}, "(demo).check: missing key 'over'"),
    ({**GOOD, "check": {**CHECK, "form": "beats"}},
     "(demo).check.form: 'beats' is not a claim form"),
    ({**GOOD, "check": [CHECK, {**CHECK, "of": "all"}]},
     "(demo).check[1].of: 'all' is not one of"),
    ({**GOOD, "check": {**CHECK, "over": ["pfedbayes"], "columns": ["femnist-dnn"]}},
     "(demo).check[0]: the paper prints no value for table1[pfedbayes, femnist-dnn]"),
    ({**NO_LINE, "check": CHECK}, "(demo): missing key 'line'"),
    (GOOD, "(demo): needs a 'check', a 'quick' check or an 'untestable' reason"),
    ({**GOOD, "check": CHECK, "chek": 1}, "(demo): unknown key(s) ['chek']"),
    ({**GOOD, "check": CHECK, "quick": CHECK}, "(demo).quick: the file names no quick grid"),
    ({**GOOD, "check": CHECK, "runs": {**CHECK, "columns": ["fmnist-dnn"]}},
     "(demo): 'runs' and 'runs_note' go together"),
    ({**GOOD, "untestable": "no table reads it at all", "runs": CHECK, "runs_note": "n"},
     "(demo).runs: a part of the claim's 'check', which it lacks"),
    ({**GOOD, "check": CHECK, "runs": {**CHECK, "row": "zz"}, "runs_note": "n"},
     "(demo).runs.row: 'zz' is not a row"),
]  # fmt: skip


@pytest.mark.parametrize(("claim", "says"), BAD_CLAIMS)
def test_a_bad_claim_is_an_error_naming_the_claim_and_the_key(tmp_path, catalog, claim, says):
    with pytest.raises(ClaimError) as err:
        read_claims(_write(tmp_path, [claim]), catalog, GRIDS)
    assert says in str(err.value)
    assert "pfedbred.yaml: claims[0]" in str(err.value)


def test_a_good_claim_reads_and_the_work_must_match_the_file(tmp_path, catalog):
    cf = read_claims(_write(tmp_path, [{**GOOD, "check": CHECK}]), catalog, GRIDS)
    assert cf.claims[0].checks[0].cells[0].row == "mh-am"
    with pytest.raises(ClaimError, match="work: must equal the file name"):
        path = tmp_path / "pfedbred.yaml"
        write_yaml(path, {**yaml.safe_load(path.read_text()), "work": "superfed"})
        read_claims(path, catalog, GRIDS)


# --- our runs, read through the table's own spec ------------------------------------------------


def test_our_reading_goes_through_the_table_spec(quick_runs, catalog):
    grid = quick_runs
    read = read_table(grid, "table1", catalog, "quick")
    assert read.values[("scaffold", "image-shards")] == pytest.approx({0: 75.0, 1: 76.0, 2: 77.0})
    assert read.values[("scaffold", "synthetic")] == pytest.approx({0: 70.0, 1: 71.0})
    assert len(read.missing) == 1 and read.missing[0].endswith("seed2")
    # the table prints the same numbers: build_table's means are the seeds' means
    spec = output_spec(grid, "tables", "table1", catalog, "quick")
    done = {c: [d for d in ds if (d / "run.yaml").exists()] for c, ds in spec.cells.items()}
    table = build_table(type(spec)(**{**spec.__dict__, "cells": done}), load_paper_values("quick"))
    for _, r in table.iterrows():
        got = read.values[(r["row"], r["column"])]
        assert sum(got.values()) / len(got) == pytest.approx(r["ours_mean"])
    cf = load_claims("quick", catalog, CONFIG)
    for claim in cf.claims:
        reading = read_runs(
            claim.quick, read_grid(cf.quick_grid, list(claim.quick), catalog, "quick")
        )
        assert reading.verdict == SUPPORTED, (claim.id, reading)
        assert "1 run(s) not finished" in reading.why


def test_a_table_waiting_for_a_choice_is_not_run_saying_so(tmp_path, monkeypatch, catalog):
    monkeypatch.chdir(tmp_path)
    grid = load_grid(GRIDS / "dqnfed.yaml", catalog)
    read = read_table(grid, "table1", catalog, "paper")
    assert read.error and "choice" in read.error.lower()


def test_claims_files_are_yaml_mappings_with_the_documented_keys():
    for work in WORKS:
        doc = yaml.safe_load((ROOT / "fedbench" / "papers" / "claims" / f"{work}.yaml").read_text())
        assert doc["work"] == work and doc["claims"]


def test_runs_narrow_the_check_to_what_our_runs_cover_and_the_page_says_so(quick_runs, catalog):
    from fedbench.claims.page import csv_rows, evaluate_work, to_markdown

    check = {"form": "order", "table": "table1", "row": "scaffold", "over": ["fedavg"]}
    claim = {**GOOD, "check": {**check, "columns": ["image-shards", "synthetic"]}}
    claim |= {"runs": {**check, "columns": ["image-shards"]}, "runs_note": "Synthetic not run"}
    doc = {"work": "quick", "text": "x.txt", "grids": {"paper": "quick"}, "claims": [claim]}
    path = Path("quick.yaml")
    write_yaml(path, doc)
    cf = read_claims(path, catalog, GRIDS)
    (row,) = evaluate_work(cf, catalog, "quick").rows
    assert [r.label for r in row.ours.results] == ["table1: scaffold above fedavg in image-shards"]
    assert row.ours.verdict == SUPPORTED and row.printed.verdict == NO_VALUES
    page = evaluate_work(cf, catalog, "quick")
    md = to_markdown(page)
    assert "| supported (part) |" in md and "- Left out of our reading: Synthetic not run" in md
    (out,) = csv_rows(page)
    assert out["ours"] == SUPPORTED and out["ours_detail"].startswith("part: Synthetic not run; ")
    # without `runs`, the same claim is read on both columns
    del claim["runs"], claim["runs_note"]
    write_yaml(path, doc | {"claims": [claim]})
    (row,) = evaluate_work(read_claims(path, catalog, GRIDS), catalog, "quick").rows
    assert len(row.ours.results) == 2
