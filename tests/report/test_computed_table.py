"""Tables computed without runs (AAggFF's Table 3.3, kind `cdf_responses`): the grid's target,
its checks, and the thesis's values beside ours."""

from __future__ import annotations

import copy
import csv
from pathlib import Path

import pytest
import yaml

from fedbench.config import ConfigError
from fedbench.grid import cells, load_grid, output_files, output_inputs
from fedbench.jobs import render

ROOT = Path(__file__).resolve().parents[2]
GRID = ROOT / "config" / "papers" / "aaggff.yaml"


@pytest.fixture(scope="module")
def grid(catalog):
    return load_grid(GRID, catalog)


@pytest.mark.parametrize("scale", ["smoke", "paper"])
def test_table3_3_is_a_target_that_reads_no_run(grid, catalog, scale):
    assert f"results/{scale}/papers/aaggff/table3_3.md" in output_files(grid, scale)
    assert cells(grid, "tables", "table3_3", catalog, scale) == {}
    assert output_inputs(grid, "tables", "table3_3", catalog, scale) == []


@pytest.mark.parametrize("scale", ["smoke", "paper"])
def test_table3_3_has_the_thesis_values_beside_ours(tmp_path, grid, catalog, scale):
    paths = render(grid, "tables", "table3_3", catalog, scale, tmp_path / "table3_3.md")
    assert [p.suffix for p in paths] == [".md", ".tex", ".csv", ".html", ".json"]
    with open(tmp_path / "table3_3.csv") as f:
        cells_ = list(csv.DictReader(f))
    assert len(cells_) == 18
    for c in cells_:
        assert round(float(c["ours"]), 2) == float(c["paper"]), c  # all 18 printed values
        assert float(c["delta"]) == 0.0
    md = (tmp_path / "table3_3.md").read_text()
    assert "| Normal | 0.22 | 0.22 | +0.00 |" in md.replace("CDF ", "")
    assert f"Scale: {scale}" in md and "Paper values from: S.-J. Hahn" in md


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"rows": [{"id": "cauchy"}]}, r"\['cauchy'\] are not CDFs"),
        ({"losses": [0.01, -0.1, 0.02]}, "losses > 0"),
        ({"columns": [{"id": "f1"}]}, "one column per loss"),
        ({"metric": "top1"}, r"\['metric'\] do not apply to a table of CDF-transformed"),
        ({"decimals": 11}, "decimals: expected an integer"),
    ],
)
def test_bad_entries_are_named(tmp_path, catalog, change, needle):
    raw = yaml.safe_load(GRID.read_text())
    entry = {**copy.deepcopy(raw["tables"]["table3_3"]), **change}
    raw = {**raw, "figures": {}, "tables": {"table3_3": entry}}
    (tmp_path / "aaggff.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match=needle):
        load_grid(tmp_path / "aaggff.yaml", catalog)


def test_a_computed_table_without_paper_values_shows_ours_alone(tmp_path):
    from fedbench.report.computed import ComputedTableSpec, write_computed_table

    spec = ComputedTableSpec(
        paper="demo",
        name="t",
        caption="c",
        scale="smoke",
        rows=[{"id": "a", "label": "A"}],
        columns=[{"id": "x", "label": "X"}, {"id": "y", "label": "Y"}],
        values={("a", "x"): 0.25, ("a", "y"): 0.5},
        decimals=2,
        method="by hand",
    )
    md, tex, csv_text, page, _ = (
        p.read_text() for p in write_computed_table(spec, None, tmp_path / "t")
    )
    assert "|  | X | Y |\n" in md and "| A | 0.25 | 0.50 |" in md
    assert "- Paper values: none for this table, so no paper or Δ columns" in md
    assert r" & X & Y \\" in tex and "paper" not in tex.split(r"\begin{tabular}")[1]
    assert csv_text.splitlines()[0] == "row,column,paper,ours,delta,row_label,column_label"
    assert '<td data-v="0.5">0.50</td>' in page and ">paper<" not in page
