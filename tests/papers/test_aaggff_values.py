"""Table 3.3 of the AAggFF chapter: transcription against the thesis text, and our computation."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fedbench.papers import PAPERS_DIR, load_paper_values
from fedbench.report.aaggff import TABLE3_3_ROWS, table3_3

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


def test_table3_3_with_exact_inputs_differs_only_in_the_normal_row():
    # Spec aaggff.md §7: unrounded inputs (0.2308, 2.3077, 0.4615) change Normal's F3 to 0.30.
    exact, printed = table3_3(input_decimals=None), table3_3()
    assert exact["normal"][2] == 0.30 and printed["normal"][2] == 0.29
    assert {r for r in TABLE3_3_ROWS if exact[r] != printed[r]} == {"normal"}
