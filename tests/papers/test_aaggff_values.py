"""Table 3.3 of the AAggFF chapter: transcription against the thesis text, and our computation."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest
import yaml

from fedbench.outputs.cdf_table import TABLE3_3_ROWS, transformed_responses
from fedbench.papers import PAPERS_DIR, load_paper_values

REPO = Path(__file__).resolve().parents[2]
THESIS = REPO.parent / "shared" / "seeds" / "000_76dd62e74d7460bb.txt"
COLUMNS = ("f1", "f2", "f3")


def test_table3_3_ids_and_count():
    pv = load_paper_values("aaggff")
    cells = [v for v in pv.values.values() if v.table == "table3_3"]
    assert len(cells) == 18
    assert {v.row for v in cells} == set(TABLE3_3_ROWS)
    assert {v.column for v in cells} == set(COLUMNS)
    assert (PAPERS_DIR / "aaggff.yaml").exists()


@pytest.mark.skipif(not THESIS.exists(), reason="thesis text file not in the workspace")
def test_table3_3_matches_the_thesis_text():
    # Re-read each row's "a / b / c" line, at the line its `where` names.
    lines = THESIS.read_text(encoding="utf-8").splitlines()
    pv = load_paper_values("aaggff")
    for row in TABLE3_3_ROWS:
        cells = [pv.get("table3_3", row, c) for c in COLUMNS]
        line = int(re.search(r"line (\d+)", cells[0].where).group(1))
        printed = [float(t) for t in lines[line - 1].split(" / ")]
        assert printed == [c.value for c in cells], row


def test_table3_3_computation_equals_the_thesis():
    pv = load_paper_values("aaggff")
    got = table3_3()
    for row in TABLE3_3_ROWS:
        assert got[row] == [pv.get("table3_3", row, c).value for c in COLUMNS], row


def table3_3(input_decimals: int | None = 2) -> dict[str, list[float]]:
    """The computed responses rounded as the thesis prints them (two decimals)."""
    got = transformed_responses(input_decimals=input_decimals)
    return {row: [round(v, 2) for v in values] for row, values in got.items()}


def test_table3_3_with_exact_inputs_differs_only_in_the_normal_row():
    # Spec aaggff.md §7: unrounded inputs (0.2308, 2.3077, 0.4615) change Normal's F3 to 0.30.
    exact, printed = table3_3(input_decimals=None), table3_3()
    assert exact["normal"][2] == 0.30 and printed["normal"][2] == 0.29
    assert {r for r in TABLE3_3_ROWS if exact[r] != printed[r]} == {"normal"}


# ---------------------------------------------------------------------------------------------
# Tables 3.6-3.10 (thesis Section 6; spec aaggff.md §10): transcription checks, not our code.

SPEC = REPO.parent / "shared" / "specs" / "aaggff.md"
GRID = REPO / "config" / "papers" / "aaggff.yaml"
RESULT_TABLES = {"table3_6": 84, "table3_7": 72, "table3_8": 21, "table3_9": 18, "table3_10": 40}
# Method names as the thesis / spec print them -> our row ids.
ROW_IDS = {
    "FedAvg": "fedavg",
    "AFL": "afl",
    "q-FedAvg": "qfedavg",
    "TERM": "term",
    "FedMGDA": "fedmgda",
    "PropFair": "propfair",
    "AAggFF-S": "aaggff-s",
    "AAggFF-D": "aaggff-d",
    "FedProx": "fedprox",
    "FedAdam": "fedadam",
    "FedYogi": "fedyogi",
    "FedAdagrad": "fedadagrad",
}
SPEC_COLUMNS = {
    "table3_6": [
        f"{d}-{s}" for d in ("berka", "mqp", "isic") for s in ("avg", "worst", "best", "gini")
    ],
    "table3_7": [
        f"{d}-{s}" for d in ("celeba", "reddit", "sc") for s in ("avg", "worst10", "best10", "gini")
    ],
    "table3_8": ["berka", "mqp", "isic"],
    "table3_9": ["celeba", "reddit", "sc"],
    "table3_10": ["heart-avg", "heart-worst", "tin-avg", "tin-worst10"],
}


@functools.cache
def _pv():
    return load_paper_values("aaggff")


def _cells(table: str) -> list:
    return [v for v in _pv().values.values() if v.table == table]


def test_result_tables_counts_and_stds():
    for table, n in RESULT_TABLES.items():
        cells = _cells(table)
        assert len(cells) == n, table
        assert all(c.std is not None and c.std >= 0 for c in cells), table


def test_result_table_ids_match_the_grid():
    # Every paper value sits in a cell (row id, column id) or summary column of the grid's table,
    # and every grid row of these tables has paper values (read as YAML: no catalog needed).
    grid = yaml.safe_load(GRID.read_text(encoding="utf-8"))
    for table in RESULT_TABLES:
        out = grid["tables"][table]
        rows = {r["id"] for r in out["rows"]}
        cols = {c["id"] for c in out["columns"]} | {s["id"] for s in out.get("summaries", [])}
        cells = _cells(table)
        assert {c.row for c in cells} == rows, table
        assert {(c.row, c.column) for c in cells} <= {(r, k) for r in rows for k in cols}, table
        assert {c.column for c in cells} == set(SPEC_COLUMNS[table]), table


def test_result_cells_copied_by_hand_from_the_spec():
    # Read by eye from shared/specs/aaggff.md (line in the comment).
    pv = _pv()
    hand = [
        ("table3_6", "aaggff-s", "isic-worst", 85.17, 3.87),  # spec line 703
        ("table3_6", "aaggff-s", "berka-gini", 10.16, 3.80),  # spec line 703
        ("table3_7", "propfair", "celeba-worst10", 48.11, 10.03),  # spec line 719
        ("table3_7", "propfair", "sc-gini", 24.97, 1.09),  # spec line 719
        ("table3_8", "qfedavg", "isic", 37.69, 5.52),  # spec line 740
        ("table3_8", "aaggff-s", "berka", 44.03, 17.55),  # spec line 744
        ("table3_9", "propfair", "celeba", 51.90, 10.03),  # spec line 754
        ("table3_10", "fedprox", "tin-avg", 86.49, 0.72),  # spec line 770
        ("table3_10", "fedprox-aaggff", "tin-avg", 86.11, 0.72),  # spec line 771
        ("table3_10", "fedadagrad-aaggff", "heart-worst", 66.67, 10.37),  # spec line 777
    ]
    for table, row, col, value, std in hand:
        cell = pv.get(table, row, col)
        assert (cell.value, cell.std) == (value, std), (table, row, col)


def _spec_rows(start: str) -> dict[str, list[tuple[float, float]]]:
    """The spec's markdown table after heading `start`: row id -> [(value, std), ...]; Table
    3.10's second line of each method ("| | +AAggFF |") becomes `<method>-aaggff`."""
    lines = SPEC.read_text(encoding="utf-8").splitlines()
    i = next(k for k, line in enumerate(lines) if line.startswith(start))
    out, last = {}, None
    for line in lines[i + 1 :]:
        if line.startswith("#"):
            break
        if not line.startswith("|") or line.startswith(("| Method", "|---")):
            if out and not line.startswith("|") and line.strip():
                break
            continue
        first = line.split("|")[1].strip().strip("*")
        name = re.sub(r"\s*(\[\d+\]|\(Proposed\))", "", first).strip()
        if name:
            last = ROW_IDS[name]
            rid = last
        else:
            rid = f"{last}-aaggff"
        pairs = re.findall(r"(\d+\.\d\d) \((\d+\.\d\d)\)", line)
        out[rid] = [(float(v), float(s)) for v, s in pairs]
    return out


@pytest.mark.skipif(not SPEC.exists(), reason="workspace spec not available")
@pytest.mark.parametrize(
    "table, heading",
    [
        ("table3_6", "### 10.1 Table 3.6"),
        ("table3_7", "### 10.2 Table 3.7"),
        ("table3_8", 'Table 3.8 "Accuracy parity gap'),
        ("table3_9", 'Table 3.9 "Accuracy parity gap'),
        ("table3_10", "### 10.4 Table 3.10"),
    ],
)
def test_result_tables_equal_the_spec_transcription(table, heading):
    # The spec's tables are an independent transcription (from the thesis LaTeX) of the same cells.
    pv = _pv()
    spec = _spec_rows(heading)
    cells = _cells(table)
    assert set(spec) == {c.row for c in cells}
    for rid, pairs in spec.items():
        if table == "table3_10":  # the spec's Variant column: plain rows, then +AAggFF rows
            pairs = pairs[-4:]
        assert len(pairs) == len(SPEC_COLUMNS[table]), (table, rid)
        for col, (value, std) in zip(SPEC_COLUMNS[table], pairs):
            cell = pv.get(table, rid, col)
            assert (cell.value, cell.std) == (value, std), (table, rid, col)


@pytest.mark.skipif(not THESIS.exists(), reason="thesis text file not in the workspace")
def test_result_values_are_at_their_thesis_lines():
    # Re-read each value at the line its `where` names: Tables 3.6-3.9 print the mean on that line
    # and "(std)" on the next; Table 3.10 prints "mean (std)" pairs on one line per variant.
    lines = THESIS.read_text(encoding="utf-8").splitlines()
    for table in RESULT_TABLES:
        for c in _cells(table):
            n = int(re.search(r"line (\d+)", c.where).group(1))
            if table == "table3_10":
                text = lines[n - 1].replace("\\cellcolor[HTML]FFF5E6", " ")
                assert re.search(rf"(^|\s){c.value:.2f}\s*\({c.std:.2f}\)", text), c.where
            else:
                assert lines[n - 1].strip() == f"{c.value:.2f}", c.where
                assert lines[n].strip() == f"({c.std:.2f})", c.where


def test_parity_gap_is_best_minus_worst_except_the_flagged_cells():
    # The paper's own numbers: ΔAG = Best - Worst (Best 10% - Worst 10%) up to the rounding of
    # three 2-decimal numbers (0.015), except the cells spec §10.3 flags (every Berka entry,
    # TERM-ISIC, FedMGDA-ISIC) and FedAvg-MQP (76.31 - 41.03 = 35.28, printed 35.30), which differ.
    pv = _pv()
    flagged = {("term", "isic"), ("fedmgda", "isic"), ("fedavg", "mqp")}
    for table, source, best, worst in (
        ("table3_8", "table3_6", "best", "worst"),
        ("table3_9", "table3_7", "best10", "worst10"),
    ):
        for c in _cells(table):
            gap = (
                pv.get(source, c.row, f"{c.column}-{best}").value
                - pv.get(source, c.row, f"{c.column}-{worst}").value
            )
            if c.column == "berka" or (c.row, c.column) in flagged:
                assert abs(gap - c.value) > 0.015, (table, c.row, c.column, gap)
            else:
                assert abs(gap - c.value) <= 0.015, (table, c.row, c.column, gap)
