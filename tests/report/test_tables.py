"""Paper tables: ours vs paper, Δ, diverged cells, banners, eval-protocol labels, files."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fedbench.io import write_yaml
from fedbench.papers import load_paper_values
from fedbench.report.layout import STANDIN_NOTE, LayoutError
from fedbench.report.sidecar import read_sidecar
from fedbench.report.tables import TableSpec, build_table, header_lines, write_table

QUICK_NOTE = "small-scale run: reduced clients/rounds, not the paper's setting"
ROWS = [{"id": "fedavg", "label": "FedAvg"}, {"id": "fedprox", "label": "FedProx"}]
COLS = [{"id": "mnist", "label": "MNIST"}]


def spec(cells: dict, round_: str = "final", **kw) -> TableSpec:
    """A top1-mean table in percent over the given cells."""
    fields = dict(
        paper="demo",
        name="table2_3",
        caption="Accuracy of the global model",
        metric="top1",
        protocol="global",
        stat="mean",
        round=round_,
        percent=True,
        rows=ROWS,
        columns=COLS,
        cells=cells,
        scale="quick",
    )
    fields.update(kw)
    return TableSpec(**fields)


def paper_values(tmp_path: Path):
    """A temporary demo.yaml with a value (and ±) for the FedAvg / MNIST cell."""
    write_yaml(
        tmp_path / "papers" / "demo.yaml",
        {
            "paper": "demo",
            "source": "a test",
            "values": [
                {
                    "table": "table2_3",
                    "row": "fedavg",
                    "column": "mnist",
                    "value": 74.8,
                    "std": 1.2,
                    "where": "Table 2.3, FedAvg, MNIST",
                },
            ],
        },
    )
    return load_paper_values("demo", tmp_path / "papers")


def cell(df: pd.DataFrame, row: str, col: str = "mnist") -> pd.Series:
    """The built table's row for one cell."""
    return df[(df.row == row) & (df.column == col)].iloc[0]


def test_mean_std_delta_by_hand(runs, tmp_path):
    s = spec({("fedavg", "mnist"): [runs["avg0"], runs["avg1"]]})
    df = build_table(s, paper_values(tmp_path))
    ours = np.array([0.68, 0.74]) * 100  # seeds 0 and 1, client-mean top1 at round 20
    c = cell(df, "fedavg")
    assert c.ours_mean == pytest.approx(ours.mean())
    assert c.ours_std == pytest.approx(np.std(ours, ddof=1))
    assert c.n_runs == 2 and c.status == "ok" and c.seeds == "0;1" and c.rounds == "20;20"
    assert c.paper == 74.8 and c.paper_std == 1.2
    assert c.delta == pytest.approx(ours.mean() - 74.8)
    md = write_table(df, s, tmp_path / "out" / "table2_3")[0].read_text()
    assert "| FedAvg | 74.80 ± 1.20 | 71.00 ± 4.24 (n=2) | -3.80 |" in md
    assert "sample standard deviation (ddof=1)" in md
    assert cell(df, "fedprox").status == "no runs"


def test_one_seed_has_no_pm(runs, tmp_path):
    s = spec({("fedavg", "mnist"): [runs["avg1"]]})
    df = build_table(s, None)
    assert math.isnan(cell(df, "fedavg").ours_std)
    md = write_table(df, s, tmp_path / "t")[0].read_text()
    assert "| FedAvg | 74.00 (n=1) |" in md  # no paper values: no paper and Δ columns


def test_diverged_cell(runs, tmp_path):
    s = spec({("fedavg", "mnist"): [runs["avg0"]], ("fedprox", "mnist"): [runs["prox0_div"]]})
    df = build_table(s, paper_values(tmp_path))
    c = cell(df, "fedprox")
    assert c.status == "diverged (round 12)" and c.n_runs == 0 and c.n_diverged == 1
    assert math.isnan(c.ours_mean)
    paths = write_table(df, s, tmp_path / "t")
    assert "| FedProx | — | diverged (round 12) | — |" in paths[0].read_text()
    assert "diverged (round 12)" in paths[1].read_text()


def test_partly_diverged_cell_not_averaged(runs):
    df = build_table(spec({("fedprox", "mnist"): [runs["prox0_div"], runs["prox1"]]}), None)
    c = cell(df, "fedprox")
    assert c.status == "diverged (round 12) in 1/2 seeds"
    assert c.n_runs == 1 and c.ours_mean == pytest.approx(74.0) and c.seeds == "1"


def test_standin_banner_only_with_standin_runs(runs, tmp_path):
    plain = spec({("fedavg", "mnist"): [runs["avg0"]]})
    paths = write_table(build_table(plain, None), plain, tmp_path / "plain")
    for p in paths:
        assert STANDIN_NOTE not in p.read_text(), p
    mixed = spec({("fedavg", "mnist"): [runs["avg0_standin"]]})
    paths = write_table(build_table(mixed, None), mixed, tmp_path / "standin")
    for p in paths:
        if p.suffix == ".csv":  # tidy: each cell's standin column, the banner in the .json
            assert pd.read_csv(p)["standin"].any()
            continue
        assert STANDIN_NOTE in p.read_text(), p
    assert "GENERATED STAND-IN" in paths[1].read_text()


def test_scale_notes(make, tmp_path):
    quick = spec({("fedavg", "mnist"): [make(seed=0)]})
    for p in write_table(build_table(quick, None), quick, tmp_path / "q"):
        if p.suffix in (".csv", ".json"):
            continue  # tidy: its notes are in the .json
        assert QUICK_NOTE in p.read_text()
        assert "Scale: quick" in p.read_text()
    notes = read_sidecar(tmp_path / "q.json")
    assert ("Scale", "quick") in notes and ("WARNING", QUICK_NOTE) in notes
    paper = spec({("fedavg", "mnist"): [make(seed=0, scale="paper")]}, scale="paper")
    for p in write_table(build_table(paper, None), paper, tmp_path / "p"):
        if p.suffix == ".csv":
            continue  # tidy: its notes are in the .json
        assert QUICK_NOTE not in p.read_text()
        assert "final round" in p.read_text()


def test_best_round_labelled_and_picked(runs, tmp_path):
    s = spec({("fedavg", "mnist"): [runs["avg0"], runs["avg1"]]}, round_="best")
    df = build_table(s, None)
    c = cell(df, "fedavg")
    assert c.ours_mean == pytest.approx((75.0 + 78.0) / 2)  # seed 0 peaks at r10, seed 1 at r15
    assert c.rounds == "10;15"
    for p in write_table(df, s, tmp_path / "t"):
        if p.suffix == ".csv":
            continue  # tidy: its notes are in the .json
        assert "best round on the test set" in p.read_text(), p
    csv = pd.read_csv(tmp_path / "t.csv")
    assert set(csv["eval_protocol"]) == {c.eval_protocol}
    assert c.eval_protocol.startswith("best round on the test set (max")


def test_best_round_of_a_loss_is_the_minimum(runs):
    s = spec({("fedavg", "mnist"): [runs["avg1"]]}, round_="best", metric="loss", percent=False)
    assert cell(build_table(s, None), "fedavg").ours_mean == pytest.approx(1 - 0.78)


def test_global_test_protocol(runs):
    s = spec({("fedavg", "mnist"): [runs["avg0"]]}, protocol="global_test", stat="value")
    assert cell(build_table(s, None), "fedavg").ours_mean == pytest.approx(69.0)


def test_files_written_and_nothing_else(runs, tmp_path):
    s = spec({("fedavg", "mnist"): [runs["avg0"], runs["avg1"]]})
    out = tmp_path / "papers" / "demo"
    paths = write_table(build_table(s, paper_values(tmp_path)), s, out / "table2_3")
    names = sorted(p.name for p in out.iterdir())
    assert names == [f"table2_3.{x}" for x in ("csv", "html", "json", "md", "tex")]
    assert sorted(p.name for p in paths) == names
    csv = pd.read_csv(out / "table2_3.csv")
    assert list(csv.columns[:9]) == [
        "row",
        "column",
        "paper",
        "paper_std",
        "ours_mean",
        "ours_std",
        "n_runs",
        "delta",
        "status",
    ]
    assert csv.set_index("row").loc["fedavg", "delta"] == pytest.approx(71.0 - 74.8)
    tex = (out / "table2_3.tex").read_text()
    assert r"\toprule" in tex and r"\bottomrule" in tex and r"$\pm$" in tex


def test_latex_escapes_labels(runs, tmp_path):
    rows = [{"id": "fedavg", "label": "Fed_Avg & 50%"}, {"id": "fedprox", "label": "#2"}]
    s = spec({("fedavg", "mnist"): [runs["avg0"]]}, rows=rows, caption="top-1 {%}")
    tex = write_table(build_table(s, None), s, tmp_path / "t")[1].read_text()
    assert r"Fed\_Avg \& 50\%" in tex and r"\#2" in tex and r"top-1 \{\%\}" in tex


def test_layout_errors(runs, make):
    with pytest.raises(LayoutError, match="unknown row or column"):
        spec({("scaffold", "mnist"): [runs["avg0"]]})
    with pytest.raises(LayoutError, match="round must be one of"):
        spec({}, round_="last")
    with pytest.raises(LayoutError, match="unknown stat"):
        spec({}, stat="median")
    with pytest.raises(LayoutError, match="scale 'paper'"):
        build_table(spec({("fedavg", "mnist"): [make(seed=2, scale="paper")]}), None)
    with pytest.raises(LayoutError, match="differ by more than the seed"):
        build_table(spec({("fedavg", "mnist"): [runs["avg0"], runs["prox1"]]}), None)
    with pytest.raises(LayoutError, match="a seed appears twice"):
        build_table(spec({("fedavg", "mnist"): [runs["avg0"], runs["avg0"]]}), None)


def test_maxdev_seed_spread_is_the_largest_deviation(runs, tmp_path):
    s = spec({("fedavg", "mnist"): [runs["avg0"], runs["avg1"]]}, seed_spread="maxdev")
    c = cell(build_table(s), "fedavg")
    ours = np.array([0.68, 0.74]) * 100
    assert c.ours_std == pytest.approx(np.abs(ours - ours.mean()).max())  # 3.00, not 4.24
    md = write_table(build_table(s), s, tmp_path / "t")[0].read_text()
    assert "71.00 ± 3.00 (n=2)" in md and "largest absolute deviation" in md
    with pytest.raises(LayoutError, match="seed_spread"):
        spec({}, seed_spread="range")


def test_pstd_seed_spread_is_the_population_std(runs, make, tmp_path):
    # Final top1 of seeds 0, 1, 2: 68, 74, 67 -> mean 69.67; population std (ddof 0)
    # sqrt((1.67² + 4.33² + 2.67²) / 3) = 3.09 (sample std 3.79, largest deviation 4.33).
    three = [runs["avg0"], runs["avg1"], make(seed=2)]
    s = spec({("fedavg", "mnist"): three}, seed_spread="pstd")
    c = cell(build_table(s), "fedavg")
    assert c.ours_std == pytest.approx(3.0912, abs=1e-4)
    md = write_table(build_table(s), s, tmp_path / "t")[0].read_text()
    assert "69.67 ± 3.09 (n=3)" in md and "population standard deviation (ddof=0)" in md


def test_release_tail_stat_is_readable(runs):
    # Three clients at top1 - 0.05, top1, top1 + 0.05: the release's tail is max(1, floor(0.3))
    # = 1 client, the lowest: 63 and 69 -> 66.
    s = spec({("fedavg", "mnist"): [runs["avg0"], runs["avg1"]]}, stat="worst10_release")
    assert cell(build_table(s), "fedavg").ours_mean == pytest.approx(66.0)


def test_summary_columns_from_the_rows_cells(make, tmp_path):
    """Avg / Std over two columns by hand; a row with a missing cell has no summary."""
    cols = [{"id": "mnist", "label": "MNIST"}, {"id": "cifar", "label": "CIFAR"}]
    a = make(seed=0, dataset="mnist", curve={10: 0.5, 20: 0.6})
    b = make(seed=0, dataset="cifar", curve={10: 0.7, 20: 0.9})
    summaries = [
        {"id": "avg", "label": "Avg", "stat": "mean"},
        {"id": "std", "label": "Std", "stat": "std", "columns": ["mnist", "cifar"]},
        {"id": "hard", "label": "H.Avg", "stat": "mean", "columns": ["cifar"]},
    ]
    s = spec(
        {("fedavg", "mnist"): [a], ("fedavg", "cifar"): [b], ("fedprox", "mnist"): [a]},
        columns=cols,
        summaries=summaries,
    )
    df = build_table(s)
    fa, fb = cell(df, "fedavg", "mnist").ours_mean, cell(df, "fedavg", "cifar").ours_mean
    assert cell(df, "fedavg", "avg").ours_mean == pytest.approx((fa + fb) / 2)
    assert cell(df, "fedavg", "std").ours_mean == pytest.approx(abs(fa - fb) / math.sqrt(2))
    assert cell(df, "fedavg", "hard").ours_mean == pytest.approx(fb)
    assert math.isnan(cell(df, "fedprox", "avg").ours_mean)  # its CIFAR cell has no runs
    assert cell(df, "fedprox", "avg").status == "no runs"
    md = write_table(df, s, tmp_path / "t")[0].read_text()
    assert "| | MNIST | CIFAR | Avg | Std | H.Avg |" in md.replace("|  |", "| |")
    assert "Summaries:" in md and "H.Avg paper" not in md  # no paper values: ours alone
    tex = (tmp_path / "t.tex").read_text()
    assert r"\begin{tabular}{lrrrrr}" in tex and "multicolumn" not in tex
    md = write_table(build_table(s, paper_values(tmp_path)), s, tmp_path / "p")[0].read_text()
    assert "Avg ours" in md and "H.Avg paper" in md  # one paper value: paper | ours | Δ
    assert (tmp_path / "p.tex").read_text().count("multicolumn{3}") == 5  # 2 + 3 summaries
    for bad, needle in (
        ({"id": "mnist", "stat": "mean"}, "unlike every column"),
        ({"id": "x", "stat": "median"}, "stat"),
        ({"id": "x", "stat": "mean", "columns": ["svhn"]}, "svhn"),
    ):
        with pytest.raises(LayoutError, match=needle):
            spec({}, columns=cols, summaries=[bad])


def test_summary_value_mean_and_sample_std():
    from fedbench.report.tables import summary_value

    assert summary_value([1.0, 2.0, 6.0], "mean") == pytest.approx(3.0)
    assert summary_value([1.0, 2.0, 6.0], "std") == pytest.approx(math.sqrt(7.0))  # ddof=1
    assert math.isnan(summary_value([1.0, math.nan], "mean"))
    assert math.isnan(summary_value([1.0], "std"))
    with pytest.raises(ValueError, match="stat"):
        summary_value([1.0], "max")


def test_paper_ref_reads_the_papers_value_from_another_table(runs, tmp_path):
    pv = paper_values(tmp_path)  # has table2_3 / fedavg / mnist = 74.8
    rows = [{"id": "mine", "label": "Mine", "paper_ref": "table2_3/fedavg"}, ROWS[1]]
    s = spec({("mine", "mnist"): [runs["avg0"]]}, name="table9", rows=rows)
    df = build_table(s, pv)
    assert cell(df, "mine").paper == 74.8 and math.isnan(cell(df, "fedprox").paper)


def test_no_paper_values_no_paper_or_delta_columns(runs, tmp_path):
    """A quick-like table (no value of the paper anywhere): ours alone in .md, .tex and .html;
    the CSV keeps its paper, paper_std and delta columns (empty) and every header says so."""
    cols = [*COLS, {"id": "synthetic", "label": "Synthetic"}]
    cells = {
        ("fedavg", "mnist"): [runs["avg0"], runs["avg1"]],
        ("fedprox", "mnist"): [runs["prox1"]],
    }
    s = spec(cells, columns=cols)
    df = build_table(s, None)
    md, tex, csv, page, _ = (p.read_text() for p in write_table(df, s, tmp_path / "t"))
    assert "|  | MNIST | Synthetic |\n|:--|--:|--:|\n" in md
    assert "| FedAvg | 71.00 ± 4.24 (n=2) | — |" in md and "| FedProx | 74.00 (n=1) | — |" in md
    assert "paper |" not in md and "Δ |" not in md and "Δ = ours − paper" not in md
    assert "- Paper values: none for this table, so no paper or Δ columns" in md
    assert r"\begin{tabular}{lrr}" in tex and "multicolumn" not in tex
    assert r" & MNIST & Synthetic \\" in tex and r"paper & ours" not in tex
    read = pd.read_csv(tmp_path / "t.csv")
    assert {"paper", "paper_std", "delta"} <= set(read.columns)
    assert read[["paper", "paper_std", "delta"]].isna().all().all()
    notes = dict(read_sidecar(tmp_path / "t.json"))
    assert notes["Paper values"].startswith("none for this table")
    assert "keeps its paper, paper_std" in notes["Paper values"]
    assert list(pd.read_csv(tmp_path / "t.csv")["row"]) == [
        "fedavg",
        "fedavg",
        "fedprox",
        "fedprox",
    ]
    assert '<th scope="col">MNIST</th>' in page and ">paper<" not in page and "colspan" not in page
    assert '<td data-v="71.0">71.00 ± 4.24 (n=2)</td>' in page


def test_paper_values_keep_paper_ours_delta_everywhere(runs, tmp_path):
    """One value of the paper is enough: every column shows paper | ours | Δ, as before."""
    cols = [*COLS, {"id": "synthetic", "label": "Synthetic"}]
    s = spec({("fedavg", "mnist"): [runs["avg0"], runs["avg1"]]}, columns=cols)
    df = build_table(s, paper_values(tmp_path))
    md, tex, _, page, _ = (p.read_text() for p in write_table(df, s, tmp_path / "t"))
    head = (
        "|  | MNIST paper | MNIST ours | MNIST Δ | Synthetic paper | Synthetic ours | Synthetic Δ |"
    )
    assert head in md
    assert "| FedAvg | 74.80 ± 1.20 | 71.00 ± 4.24 (n=2) | -3.80 | — | — | — |" in md
    assert "Paper values:" not in md and "- Paper values from: a test" in md
    assert tex.count(r"\multicolumn{3}{c}") == 2 and r"\begin{tabular}{lrrrrrr}" in tex
    assert '<th colspan="3">MNIST</th>' in page and '<th scope="col">Δ</th>' in page
    assert '<td data-v="-3.8">-3.80</td>' in page and '<td data-v="74.8">74.80 ± 1.20</td>' in page


def test_html_view_is_one_self_contained_sortable_page(runs, tmp_path):
    rows = [{"id": "fedavg", "label": "Fed<Avg> & co"}, {"id": "fedprox", "label": "FedProx"}]
    s = spec({("fedavg", "mnist"): [runs["avg0"]]}, rows=rows, caption="Accuracy <top-1>")
    page = write_table(build_table(s, None), s, tmp_path / "t")[3].read_text()
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert "<h1>demo table2_3: Accuracy &lt;top-1&gt;</h1>" in page
    assert "<td>Fed&lt;Avg&gt; &amp; co</td>" in page  # labels escaped
    assert '<li class="warning">WARNING: ' + QUICK_NOTE in page
    assert 'class="sortable"' in page and "addEventListener" in page  # click a header: sort
    assert "http" not in page and "src=" not in page  # nothing to fetch: the report embeds it


def test_a_worst_clients_cell_at_zero_in_every_seed_is_explained(make, tmp_path):
    """worst10 of three clients is the lowest one: at 0.05 - 0.05 = 0 in both seeds the cell
    prints 0.00 ± 0.00, and a note says what that means; a cell above zero gets none."""
    low = [make(seed=s, curve={5: 0.05}) for s in (0, 1)]
    s = spec({("fedavg", "mnist"): low}, stat="worst10")
    table = build_table(s, None)
    assert cell(table, "fedavg").ours_mean == 0 and cell(table, "fedavg").ours_std == 0
    notes = dict(header_lines(table, s))
    assert notes["Zero"].startswith("FedAvg / MNIST: 0.00 ± 0.00 means that in every seed the")
    assert "worst 10 % clients averaged 0 %" in notes["Zero"]
    md = write_table(table, s, tmp_path / "t")[0].read_text()
    assert "- Zero: FedAvg / MNIST: 0.00 ± 0.00 means" in md
    fine = spec({("fedavg", "mnist"): [make(seed=0, curve={5: 0.5})]}, stat="worst10")
    assert "Zero" not in dict(header_lines(build_table(fine, None), fine))
