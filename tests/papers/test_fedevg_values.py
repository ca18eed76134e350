"""FedEvg's Tables 4.2-4.5 as data (fedbench/papers/fedevg.yaml): the file parses, names its
source, covers the grid's cells, and its numbers are the thesis text's (transcription checks, not
our code)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fedbench.grid import load_grid

REPO = Path(__file__).resolve().parents[2]
PAPER_ID = "fedevg"
SOURCE_TEXT = REPO.parent / "shared" / "seeds" / "000_76dd62e74d7460bb.txt"
TABLES = ("table4_2", "table4_3", "table4_4", "table4_5")
ROWS = ("fedcgan", "fedcvae", "fedevg")
SETTINGS = ("k10-a0.01", "k10-a1", "k100-a0.01", "k100-a1")
DATASETS = {
    "table4_2": ("mnist", "cifar10"),
    "table4_3": ("dermamnist", "organcmnist"),
    "table4_4": ("mnist", "cifar10"),
    "table4_5": ("dermamnist", "organcmnist"),
}
# A few cells typed from spec fedevg.md §5.2 (table, row, column): (mean, std).
SPOT = {
    ("table4_2", "fedcvae", "mnist-k10-a0.01"): (66.93, 4.92),
    ("table4_2", "fedevg", "cifar10-k100-a1"): (58.57, 2.05),
    ("table4_3", "fedcgan", "dermamnist-k10-a0.01"): (3.74, 20.42),
    ("table4_3", "fedevg", "organcmnist-k100-a1"): (77.59, 12.26),
    ("table4_4", "fedcvae", "mnist-k10-a1"): (181.30, 0.08),
    ("table4_4", "fedevg", "cifar10-k10-a0.01"): (359.18, 1.50),
    ("table4_5", "fedcgan", "dermamnist-k10-a1"): (296.88, 15.91),
    ("table4_5", "fedevg", "organcmnist-k100-a0.01"): (209.96, 12.28),
}


def test_four_tables_of_three_rows_by_eight_cells(pv):
    assert pv.paper == PAPER_ID and "Chapter IV" in pv.source and "000_" in pv.source
    assert len(pv) == 4 * 3 * 8
    for table in TABLES:
        columns = [f"{d}-{s}" for d in DATASETS[table] for s in SETTINGS]
        for row in ROWS:
            for col in columns:
                v = pv.get(table, row, col)
                assert v is not None and v.std is not None, (table, row, col)
                assert f"Table {table[5:].replace('_', '.')}" in v.where and "000 lines" in v.where


def test_spot_cells_are_the_spec_numbers(pv):
    for key, (mean, std) in SPOT.items():
        v = pv.get(*key)
        assert (v.value, v.std) == (mean, std), key


def test_the_grid_tables_meet_every_value(pv, catalog):
    grid = load_grid(REPO / "config" / "papers" / "fedevg.yaml", catalog)
    keys = set()
    for table in TABLES:
        out = grid.output("tables", table)
        keys |= {(table, r["id"], c["id"]) for r in out["rows"] for c in out["columns"]}
    assert keys == set(pv.values)


def test_values_match_the_thesis_text(pv, source_lines):
    # Each `where` names the lines of the mean and of its "(std)".
    for key, v in pv.values.items():
        first, second = map(int, re.search(r"lines (\d+)-(\d+)", v.where).groups())
        assert float(source_lines[first - 1]) == v.value, key
        assert source_lines[second - 1] == f"({v.std:.2f})", key


@pytest.mark.parametrize("table", TABLES)
def test_rows_follow_their_table_heading(pv, source_lines, table):
    # The rows' lines lie under the table's caption and in the order FedCGAN, FedCVAE, FedEvg.
    num = table[5:].replace("_", ".")
    head = next(i for i, t in enumerate(source_lines, 1) if t.startswith(f"Table {num}:"))
    starts = []
    for row in ROWS:
        lines = [
            int(re.search(r"lines (\d+)", pv.get(table, row, c).where).group(1))
            for (t, r, c) in pv.values
            if (t, r) == (table, row)
        ]
        starts.append(min(lines))
        label = source_lines[min(lines) - 2].split()[-1]
        assert label.lower() == row, (table, row)
    assert head < starts[0] < starts[1] < starts[2]
