"""The SuPerFed paper values (`fedbench/papers/superfed.yaml`) against their sources.

This checks the TRANSCRIPTION of Tables 2.3-2.7 of S.-J. Hahn's thesis (Chapter II), not our code:
ids and counts, a re-read of the thesis text file (seed 000) where it is available, and a few values
copied by hand from the workspace spec (shared/specs/superfed.md §6) with their line there.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from fedbench.papers import PAPERS_DIR

REPO = Path(__file__).resolve().parents[2]
# read by the `pv` and `source_lines` fixtures (tests/papers/conftest.py)
PAPER_ID = "superfed"
SOURCE_TEXT = REPO.parent / "shared" / "seeds" / "000_76dd62e74d7460bb.txt"
YAML_PATH = PAPERS_DIR / f"{PAPER_ID}.yaml"

METHODS = [
    "fedavg",
    "fedprox",
    "scaffold",
    "lgfedavg",
    "fedper",
    "apfl",
    "pfedme",
    "ditto",
    "fedrep",
    "superfed-mm",
    "superfed-lm",
]
# how each method's row starts in the thesis text (SuPerFed rows carry a "\rowcolor" prefix there)
THESIS_NAMES = [
    "FedAvg",
    "FedProx",
    "SCAFFOLD",
    "LG-FedAvg",
    "FedPer",
    "APFL",
    "pFedMe",
    "Ditto",
    "FedRep",
    "SuPerFed-MM",
    "SuPerFed-LM",
]
COLUMNS = {
    "table2_3": [
        "mnist-k50",
        "mnist-k100",
        "mnist-k500",
        "cifar10-k50",
        "cifar10-k100",
        "cifar10-k500",
    ],
    "table2_4": [
        "cifar100-a1",
        "cifar100-a10",
        "cifar100-a100",
        "tinyimagenet-a1",
        "tinyimagenet-a10",
        "tinyimagenet-a100",
    ],
    "table2_5": ["femnist-top1", "femnist-top5", "shakespeare-top1", "shakespeare-top5"],
    "table2_6": [
        "mnist-pair0.1",
        "mnist-pair0.4",
        "mnist-sym0.2",
        "mnist-sym0.6",
        "cifar10-pair0.1",
        "cifar10-pair0.4",
        "cifar10-sym0.2",
        "cifar10-sym0.6",
    ],
    "table2_7": ["l0.0", "l0.2", "l0.4", "l0.6", "l0.8"],
}
ROWS = {
    "table2_3": METHODS,
    "table2_4": METHODS,
    "table2_5": METHODS,
    "table2_6": [f"{m}-{q}" for m in METHODS for q in ("ece", "mce", "top1")],
    "table2_7": ["superfed-mm-top1", "superfed-mm-loss", "superfed-lm-top1", "superfed-lm-loss"],
}
COUNTS = {"table2_3": 66, "table2_4": 66, "table2_5": 44, "table2_6": 264, "table2_7": 20}
# (first, last) line of each table in the thesis text (spec §6 headings)
THESIS_RANGES = {
    "table2_3": (342, 489),
    "table2_4": (490, 637),
    "table2_5": (638, 741),
    "table2_6": (771, 1049),
    "table2_7": (1057, 1080),
}

# one "a±b" cell of Tables 2.6/2.7, optionally in parentheses, with the source's "±." typo allowed
_PM = re.compile(r"^\(?(\d+\.\d+)±\.?(\d+\.\d+)\)?plus-or-minus")


def _line(lines: list[str], n: int) -> str:
    """Line `n` (1-based, as `sed -n Np` numbers it) of the thesis text."""
    return lines[n - 1]


def _cell(text: str) -> tuple[float, float]:
    """(value, std) of one printed thesis cell, "a±b..." or "(a±b)..."."""
    m = _PM.match(text)
    assert m, f"not a '±' cell: {text[:60]!r}"
    return float(m.group(1)), float(m.group(2))


def _two_lines(value_line: str, std_line: str) -> tuple[float, float]:
    """(value, std) of a Table 2.3-2.5 cell, printed as "a" then "(b)" on the next line."""
    assert re.fullmatch(r"\d+\.\d+", value_line), value_line
    assert re.fullmatch(r"\(\d+\.\d+\)", std_line), std_line
    return float(value_line), float(std_line[1:-1])


# --- structure --------------------------------------------------------------------------------


def test_file_loads_with_the_project_loader(pv):
    assert pv.paper == "superfed"
    assert "Hahn" in pv.source and "000_76dd62e74d7460bb" in pv.source
    assert len(pv) == sum(COUNTS.values()) == 460


@pytest.mark.parametrize("table", sorted(COUNTS))
def test_entry_count_per_table(pv, table):
    n = sum(1 for (t, _, _) in pv.values if t == table)
    assert n == COUNTS[table] == len(ROWS[table]) * len(COLUMNS[table])


def test_every_id_is_known_and_every_cell_present(pv):
    assert {t for (t, _, _) in pv.values} == set(COUNTS)
    for t, r, c in pv.values:
        assert r in ROWS[t], (t, r, c)
        assert c in COLUMNS[t], (t, r, c)
    for t in COUNTS:
        for r in ROWS[t]:
            for c in COLUMNS[t]:
                assert pv.get(t, r, c) is not None, (t, r, c)


def test_each_cell_appears_once_in_the_raw_file():
    # the loader already refuses repeats; this re-counts on the raw YAML, independently of it
    raw = yaml.safe_load(YAML_PATH.read_text())["values"]
    keys = [(e["table"], e["row"], e["column"]) for e in raw]
    assert len(keys) == len(set(keys)) == 460


def test_every_value_has_a_std_and_a_where_naming_its_table(pv):
    for (t, r, c), v in pv.values.items():
        assert v.std is not None, (t, r, c)
        number = t.removeprefix("table").replace("_", ".")
        assert v.where.startswith(f"Table {number}"), v.where
        assert "thesis 000 line" in v.where, v.where


def test_ece_and_mce_are_fractions(pv):
    for (t, r, c), v in pv.values.items():
        if t == "table2_6" and r.endswith(("-ece", "-mce")):
            assert 0.0 <= v.value <= 1.0, (r, c, v.value)


# --- hand-copied from the workspace spec (shared/specs/superfed.md §6), with the spec line --------

SPEC_VALUES = [
    # (table, row, column, value, std, spec line)
    ("table2_3", "fedavg", "mnist-k50", 95.69, 2.39, 443),
    ("table2_3", "superfed-mm", "cifar10-k500", 90.81, 9.35, 452),
    ("table2_4", "pfedme", "tinyimagenet-a1", 6.05, 2.84, 472),
    ("table2_4", "superfed-lm", "cifar100-a1", 62.50, 6.34, 476),
    ("table2_5", "ditto", "femnist-top1", 64.61, 31.49, 494),
    ("table2_5", "superfed-lm", "shakespeare-top1", 54.52, 7.54, 497),
    ("table2_6", "apfl-ece", "mnist-pair0.4", 0.42, 0.05, 523),
    ("table2_6", "pfedme-mce", "cifar10-pair0.1", 0.83, 0.52, 540),
    ("table2_6", "superfed-lm-mce", "mnist-pair0.1", 0.49, 0.08, 544),
    ("table2_6", "pfedme-top1", "mnist-pair0.1", 72.05, 0.05, 556),
    ("table2_6", "ditto-top1", "cifar10-pair0.1", 29.41, 5.15, 557),
    ("table2_7", "superfed-mm-loss", "l0.2", 0.72, 0.40, 577),
    ("table2_7", "superfed-lm-loss", "l0.8", 6.28, 1.76, 579),
]


@pytest.mark.parametrize(("table", "row", "column", "value", "std", "spec_line"), SPEC_VALUES)
def test_values_copied_from_the_spec(pv, table, row, column, value, std, spec_line):
    got = pv.get(table, row, column)
    assert got is not None, f"spec line {spec_line}: {table}/{row}/{column} missing"
    assert (got.value, got.std) == (value, std), f"spec line {spec_line}"


def test_source_quirks_are_kept_and_flagged(pv):
    # printed numbers kept (not "fixed"), and the quirk said in `where`
    assert pv.get("table2_6", "pfedme-mce", "cifar10-pair0.1").std == 0.52
    assert "sic" in pv.get("table2_6", "pfedme-mce", "cifar10-pair0.1").where
    for row, col in [("apfl-ece", "mnist-pair0.4"), ("pfedme-mce", "mnist-pair0.4")]:
        assert "±.0.05" in pv.get("table2_6", row, col).where
    for col in ("mnist-pair0.1", "cifar10-sym0.2"):
        assert pv.get("table2_6", "pfedme-top1", col).std == 0.05
        assert "sic" in pv.get("table2_6", "pfedme-top1", col).where
    mm = pv.get("table2_5", "superfed-mm", "shakespeare-top1")
    lm = pv.get("table2_5", "superfed-lm", "shakespeare-top1")
    assert (mm.value, mm.std) == (lm.value, lm.std) == (54.52, 7.54)
    assert "copy error" in mm.where and "copy error" in lm.where


# --- re-read from the thesis text (seed 000), skipped when the file is absent ---------------------

THESIS_SPOTS = [
    # (table, row, column, thesis line of the value; Tables 2.3-2.5 print the std on the next line)
    ("table2_3", "fedavg", "mnist-k50", 348),
    ("table2_3", "superfed-lm", "cifar10-k500", 488),
    ("table2_4", "lgfedavg", "tinyimagenet-a10", 543),
    ("table2_5", "pfedme", "femnist-top1", 698),
    ("table2_5", "superfed-mm", "shakespeare-top1", 729),
    ("table2_6", "fedavg-top1", "mnist-pair0.1", 778),
    ("table2_6", "apfl-ece", "mnist-pair0.4", 904),
    ("table2_6", "pfedme-top1", "mnist-pair0.1", 928),
    ("table2_6", "pfedme-mce", "cifar10-pair0.1", 939),
    ("table2_6", "ditto-top1", "cifar10-pair0.1", 965),
    ("table2_6", "superfed-mm-top1", "cifar10-sym0.2", 1021),
    ("table2_7", "superfed-mm-top1", "l0.4", 1064),
    ("table2_7", "superfed-lm-loss", "l0.8", 1080),
]


@pytest.mark.parametrize(("table", "row", "column", "line"), THESIS_SPOTS)
def test_spot_values_reread_from_the_thesis(pv, source_lines, table, row, column, line):
    if table in ("table2_3", "table2_4", "table2_5"):
        printed = _two_lines(_line(source_lines, line), _line(source_lines, line + 1))
    else:
        printed = _cell(_line(source_lines, line))
    got = pv.get(table, row, column)
    assert (got.value, got.std) == printed, f"thesis 000 line {line}"


def _method_header(lines: list[str], name: str, lo: int, hi: int) -> int:
    """Thesis line number (1-based) of a method's row header within lines lo..hi."""
    pattern = re.compile(rf"^(\\rowcolor\S*\s+)?{re.escape(name)}(\s|\[|$)")
    hits = [n for n in range(lo, hi + 1) if pattern.match(_line(lines, n).replace("\u00a0", " "))]
    assert len(hits) == 1, (name, lo, hi, hits)
    return hits[0]


def _reread_table(lines: list[str], table: str) -> dict[tuple[str, str], tuple[float, float]]:
    """Every cell of one table, walked from the thesis text by its layout."""
    lo, hi = THESIS_RANGES[table]
    cols = COLUMNS[table]
    cells: dict[tuple[str, str], tuple[float, float]] = {}
    if table in ("table2_3", "table2_4", "table2_5"):
        # per method: header line, then value / "(std)" lines, column by column
        for method, name in zip(METHODS, THESIS_NAMES):
            h = _method_header(lines, name, lo, hi)
            for j, col in enumerate(cols):
                n = h + 1 + 2 * j
                cells[(method, col)] = _two_lines(_line(lines, n), _line(lines, n + 1))
    elif table == "table2_6":
        # per method: header line, then for each column three lines ECE, MCE, (Top-1)
        for method, name in zip(METHODS, THESIS_NAMES):
            h = _method_header(lines, name, lo, hi)
            for j, col in enumerate(cols):
                for k, q in enumerate(("ece", "mce", "top1")):
                    cells[(f"{method}-{q}", col)] = _cell(_line(lines, h + 1 + 3 * j + k))
    else:
        # Table 2.7, per scheme: header line, then for each L/T two lines Top-1, loss
        for method, name in [("superfed-mm", "SuPerFed-MM"), ("superfed-lm", "SuPerFed-LM")]:
            h = _method_header(lines, name, lo, hi)
            for j, col in enumerate(cols):
                for k, q in enumerate(("top1", "loss")):
                    cells[(f"{method}-{q}", col)] = _cell(_line(lines, h + 1 + 2 * j + k))
    return cells


@pytest.mark.parametrize("table", sorted(COUNTS))
def test_whole_table_reread_from_the_thesis(pv, source_lines, table):
    cells = _reread_table(source_lines, table)
    assert len(cells) == COUNTS[table]
    wrong = {
        key: (printed, (pv.get(table, *key).value, pv.get(table, *key).std))
        for key, printed in cells.items()
        if (pv.get(table, *key).value, pv.get(table, *key).std) != printed
    }
    assert not wrong, f"{table}: thesis (value, std) vs superfed.yaml: {wrong}"


def test_where_cites_the_thesis_line_that_prints_the_value(pv, source_lines):
    for (t, r, c), v in pv.values.items():
        m = re.search(r"thesis 000 line (\d+)", v.where)
        n = int(m.group(1))
        lo, hi = THESIS_RANGES[t]
        assert lo <= n <= hi, v.where
        text = _line(source_lines, n)
        printed = float(text) if t in ("table2_3", "table2_4", "table2_5") else _cell(text)[0]
        assert printed == v.value, (t, r, c, n, text[:40])
