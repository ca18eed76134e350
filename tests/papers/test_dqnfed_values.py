"""The DQN-Fed paper values (`fedbench/papers/dqnfed.yaml`) against their source.

This checks the TRANSCRIPTION of Table 9 (Fashion-MNIST), not our code: ids and count (the other
tables' values are checked in tests/test_dqnfed_grid.py), the
grid's cells they attach to, two values copied by hand from the workspace spec
(shared/specs/qffl-dqnfed.md §B.7), and a re-read of the paper text file (seed 004) where it is
available.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
# read by the `pv` and `source_lines` fixtures (tests/papers/conftest.py)
PAPER_ID = "dqnfed"
SOURCE_TEXT = REPO.parent / "shared" / "seeds" / "004_ab879befdeeaa3ac.txt"
GRID = REPO / "config" / "papers" / "dqnfed.yaml"

ROWS = {"fedavg": "FedAvg", "qffl": "q-FFL", "fedmgda": "FedMGDA+", "fedheal": "FedHEAL"}
ROWS["dqnfed"] = "DQN-Fed"
COLUMNS = ("mean", "std", "shirt", "pullover", "tshirt")


TABLES = {f"table{n}" for n in (1, 2, 3, 4, 5, 6, 9, 10, 11, 12)}  # 7 and 8 are notation


def test_ids_and_count(pv):
    assert pv.paper == "dqnfed"
    assert {v.table for v in pv.values.values()} == TABLES
    nine = [v for v in pv.values.values() if v.table == "table9"]
    assert len(nine) == 25
    assert {v.row for v in nine} == set(ROWS)
    assert {v.column for v in nine} == set(COLUMNS)
    assert all(v.std is None for v in nine)  # the paper prints no ± in Table 9


def test_every_value_has_a_cell_in_the_grid(pv):
    table = yaml.safe_load(GRID.read_text())["tables"]["table9"]
    # a row shows its own paper values, or those of the row its paper_ref names
    own = [r["id"] for r in table["rows"] if "paper_ref" not in r]
    refs = [r.get("paper_ref", f"table9/{r['id']}").split("/") for r in table["rows"]]
    cols = [c["id"] for c in table["columns"]]
    assert own == list(ROWS) and cols == list(COLUMNS)
    assert all(pv.get(t, r, c) is not None for t, r in refs for c in cols)


def test_values_copied_by_hand_from_the_spec(pv):
    # §B.7 Table 9: "| FedAvg | 80.42 | 3.39 | 64.26 | 87.00 | 89.90 |" and DQN-Fed's T-shirt
    assert [pv.get("table9", "fedavg", c).value for c in COLUMNS] == [
        80.42, 3.39, 64.26, 87.00, 89.90
    ]  # fmt: skip
    assert pv.get("table9", "dqnfed", "tshirt").value == 90.99


def test_rows_match_the_paper_text(pv, source_lines):
    for rid, name in ROWS.items():
        where = pv.get("table9", rid, "mean").where
        line = int(re.search(r"line (\d+)", where).group(1))
        text = source_lines[line - 1]
        assert text.startswith(name + " "), (rid, text)
        printed = [float(t) for t in text[len(name) :].split()]
        assert printed == [pv.get("table9", rid, c).value for c in COLUMNS], rid
