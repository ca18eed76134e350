"""Our summary-column computation (fedbench.report.tables.summary_value) reproduces the Avg / Std /
H.Avg / H.Std columns of pFedBreD's Table 1 from the paper's own task numbers (spec §6: Avg/Std
over the 8 tasks, H.* over FEMNIST-DNN, CIFAR-10-CNN and Sent140-LSTM, std with ddof = 1)."""

from __future__ import annotations

import math

import pytest

from fedbench.papers import load_paper_values
from fedbench.report.tables import summary_value


def _grid_summaries(table: str) -> dict[str, tuple[str, list[str]]]:
    """The summary columns the grid declares for `table`: id -> (stat, task columns)."""
    from fedbench.config import load_catalog
    from fedbench.grid import load_grid

    out = load_grid("config/papers/pfedbred.yaml", load_catalog("config/config.yaml")).outputs(
        "tables"
    )[table]
    tasks = [c["id"] for c in out["columns"]]
    return {s["id"]: (s["stat"], s.get("columns", tasks)) for s in out["summaries"]}


SUMMARIES = _grid_summaries("table1")
TASKS = SUMMARIES["avg"][1]


def test_the_grid_declares_the_papers_columns():
    # Spec §6: Avg/Std over the 8 tasks, H.* over FEMNIST-DNN, CIFAR-10-CNN and Sent140-LSTM.
    assert len(TASKS) == 8 and "sent140-lstm" in TASKS
    assert SUMMARIES["havg"] == ("mean", ["femnist-dnn", "cifar10-cnn", "sent140-lstm"])
    assert SUMMARIES["hstd"][0] == "std" and SUMMARIES["std"] == ("std", TASKS)
    assert set(_grid_summaries("table2")) == {"avg", "havg"}
    assert _grid_summaries("table1_final") == SUMMARIES


def test_table1_summaries_from_the_papers_own_numbers():
    pv = load_paper_values("pfedbred")
    rows = sorted({r for (t, r, _c) in pv.values if t == "table1"})
    checked = 0
    for row in rows:
        for sid, (stat, cols) in SUMMARIES.items():
            cells = [pv.get("table1", row, c) for c in cols]
            ours = summary_value([c.value if c else math.nan for c in cells], stat)
            printed = pv.get("table1", row, sid)
            if printed is None:  # pFedBayes: tasks missing, the paper prints no summary
                assert any(c is None for c in cells) and math.isnan(ours)
                continue
            assert ours == pytest.approx(printed.value, abs=0.011), (row, sid)
            checked += 1
    assert checked == 13 * 4


def test_a_wrong_number_would_be_caught():
    pv = load_paper_values("pfedbred")
    values = [pv.get("table1", "mh-am", c).value for c in TASKS]
    values[0] += 0.2  # one task off by 0.2 moves Avg by 0.025
    assert summary_value(values, "mean") != pytest.approx(
        pv.get("table1", "mh-am", "avg").value, abs=0.011
    )


def test_table8_decrease_from_the_papers_own_numbers():
    # The grid's mean_drop over (before, after) pairs gives the paper's "Average Decrease by
    # Noise" column from its own before/after numbers (printed to one decimal: ±0.05).
    pv = load_paper_values("pfedbred")
    stat, cols = _grid_summaries("table8")["decrease"]
    assert stat == "mean_drop" and len(cols) == 6
    rows = sorted({r for (t, r, _c) in pv.values if t == "table8"})
    checked = 0
    for row in rows:
        ours = summary_value([pv.get("table8", row, c).value for c in cols], stat)
        assert ours == pytest.approx(pv.get("table8", row, "decrease").value, abs=0.05), row
        checked += 1
    assert checked == 5


def test_mean_drop_by_hand_and_odd_columns_rejected():
    assert summary_value([62.2, 60.7, 78.9, 77.3], "mean_drop") == pytest.approx(1.55)
    with pytest.raises(ValueError, match="pairs"):
        summary_value([1.0, 2.0, 3.0], "mean_drop")
