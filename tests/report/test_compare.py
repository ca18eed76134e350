"""`fedbench compare`: two renderings of the same tables, cell by cell, against the seed spread."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from fedbench.cli import main
from fedbench.report.compare import CompareError, compare_dirs, read_table_csv


def _table(path, cells, header="# Paper: demo\n# Table: t1: demo\n"):
    """A table CSV as tables.to_csv writes it: '# ' lines, then tidy rows."""
    rows = [
        {
            "row": r,
            "column": c,
            "row_label": r.upper(),
            "column_label": c.upper(),
            "ours_mean": mean,
            "ours_std": std,
            "n_runs": n,
            "quantity": "top1 (protocol global, stat wmean), in % (×100)",
        }
        for (r, c), (mean, std, n) in cells.items()
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(header + pd.DataFrame(rows).to_csv(index=False))


def test_cells_are_matched_and_judged_against_the_larger_seed_spread(tmp_path):
    a, b = tmp_path / "fp32", tmp_path / "bf16"
    _table(
        a / "t1.csv",
        {("x", "p"): (80.0, 1.0, 3), ("y", "p"): (70.0, 0.5, 3), ("z", "p"): (60.0, 0.0, 1)},
    )
    _table(
        b / "t1.csv",
        {("x", "p"): (81.5, 2.0, 3), ("y", "p"): (69.0, 0.4, 3), ("z", "p"): (61.0, 0.0, 1)},
    )
    _table(a / "only_a.csv", {("x", "p"): (1.0, 0.1, 3)})
    (a / "cost.csv").write_text("cell,hours\n")
    (b / "cost.csv").write_text("cell,hours\n")
    df = compare_dirs(a, b).set_index("row")
    assert list(df["table"].unique()) == ["t1"]  # only the tables both directories hold
    assert df.loc["x", "delta"] == pytest.approx(1.5) and df.loc["x", "spread"] == 2.0
    assert bool(df.loc["x", "within"]) is True
    assert df.loc["y", "delta"] == pytest.approx(-1.0) and df.loc["y", "spread"] == 0.5
    assert bool(df.loc["y", "within"]) is False
    assert math.isnan(df.loc["z", "spread"]) and df.loc["z", "within"] is None  # one seed


def test_the_command_writes_markdown_and_csv(tmp_path, capsys):
    a, b = tmp_path / "fp32", tmp_path / "bf16"
    _table(a / "t1.csv", {("x", "p"): (80.0, 1.0, 3), ("y", "p"): (70.0, 0.5, 3)})
    _table(b / "t1.csv", {("x", "p"): (80.5, 1.0, 3), ("y", "p"): (72.0, 0.5, 3)})
    assert (
        main(
            ["compare", str(a), str(b), "--labels", "fp32", "bf16", "--out", str(tmp_path / "cmp")]
        )
        == 0
    )
    md = (tmp_path / "cmp.md").read_text()
    assert capsys.readouterr().out == md + "\n"  # printed as written
    assert "| X / P | 80.00 ± 1.00 (n=3) | 80.50 ± 1.00 (n=3) | +0.50 | 1.00 | yes |" in md
    assert "| Y / P | 70.00 ± 0.50 (n=3) | 72.00 ± 0.50 (n=3) | +2.00 | 0.50 | **no** |" in md
    assert "1 of 2 cells within the seed spread" in md
    assert len(pd.read_csv(tmp_path / "cmp.csv")) == 2


def test_bad_inputs_name_the_path_and_the_fix(tmp_path, capsys):
    with pytest.raises(CompareError, match="no such directory"):
        compare_dirs(tmp_path / "nope", tmp_path)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with pytest.raises(CompareError, match="share no table CSV"):
        compare_dirs(tmp_path / "a", tmp_path / "b")
    (tmp_path / "a" / "t.csv").write_text("x,y\n1,2\n")
    with pytest.raises(CompareError, match="lacks column"):
        read_table_csv(tmp_path / "a" / "t.csv")
    assert main(["compare", str(tmp_path / "nope"), str(tmp_path)]) == 2
    assert "fedbench compare:" in capsys.readouterr().err


def test_a_suffixed_scale_reads_as_its_base():
    from fedbench.report.layout import SCALE_NOTES, base_scale, warning_lines

    assert base_scale("quick-bf16") == "quick" and base_scale("paper") == "paper"
    assert warning_lines("quick-bf16", False) == [SCALE_NOTES["quick"]]
    assert warning_lines("paper-bf16", False) == []
