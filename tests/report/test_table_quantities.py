"""Per-cell quantities (row/column metric, protocol, stat), percent for accuracies only, spread
across clients, the best_lambda label; and plain tables unchanged without any of them."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fedbench.io import write_yaml
from fedbench.papers import load_paper_values
from fedbench.report.collect import RunDataError
from fedbench.report.layout import LayoutError, quantity_lines
from fedbench.report.sidecar import read_sidecar
from fedbench.report.tables import (
    STD_NOTE,
    TableSpec,
    build_table,
    header_lines,
    to_csv,
    write_table,
)

BEST_LAMBDA = "best λ per client, chosen on the client's test split (optimistic)"
TOPK = ("top1", "top5")
SEEDS = {0: 0.68, 1: 0.74}  # client-mean global top1 at the final round 20 (conftest CURVES)


def spec(cells: dict, rows: list[dict], columns: list[dict], **kw) -> TableSpec:
    """A top1-mean table in percent (table-wide quantity) over the given layout."""
    fields = dict(
        paper="demo",
        name="t",
        caption="demo",
        metric="top1",
        protocol="global",
        stat="mean",
        round="final",
        percent=True,
        rows=rows,
        columns=columns,
        cells=cells,
        scale="quick",
    )
    fields.update(kw)
    return TableSpec(**fields)


def cell(df: pd.DataFrame, row: str, col: str) -> pd.Series:
    """The built table's row for one cell."""
    return df[(df.row == row) & (df.column == col)].iloc[0]


def texts(paths: list[Path]) -> list[str]:
    """md, tex, csv contents (the .html and the .json sidecar left out)."""
    return [p.read_text() for p in paths if p.suffix not in (".html", ".json")]


def test_column_metric_and_row_protocol(make, tmp_path):
    """Table 2.5 style: Top-1 and Top-5 columns; personalised rows read protocol personal."""
    avg = [make(seed=s) for s in SEEDS]
    ditto = [make(seed=0, algorithm="ditto", protocols=("global", "personal"))]
    rows = [
        {"id": "fedavg", "label": "FedAvg", "protocol": "global"},
        {"id": "ditto", "label": "Ditto", "protocol": "personal"},
    ]
    cols = [
        {"id": "top1", "label": "Top-1", "metric": "top1"},
        {"id": "top5", "label": "Top-5", "metric": "top5"},
    ]
    cells = {(r, c): (avg if r == "fedavg" else ditto) for r in ("fedavg", "ditto") for c in TOPK}
    s = spec(cells, rows, cols, metric="loss", protocol="personal")
    df = build_table(s, None)
    top1 = np.array(list(SEEDS.values())) * 100
    assert cell(df, "fedavg", "top1").ours_mean == pytest.approx(top1.mean())
    assert cell(df, "fedavg", "top5").ours_mean == pytest.approx(top1.mean() + 10)
    assert cell(df, "ditto", "top1").ours_mean == pytest.approx(68.0 + 10)  # personal = +0.1
    assert cell(df, "ditto", "top5").ours_mean == pytest.approx(68.0 + 20)
    c = cell(df, "ditto", "top5")
    assert (c.metric, c.protocol, c.stat) == ("top5", "personal", "mean")
    assert c.quantity == "top5 (protocol personal, stat mean), in % (×100)"
    md, tex, csv = texts(write_table(df, s, tmp_path / "t"))
    assert "- Quantity: varies per cell: metric by column, protocol by row; stat mean" in md
    assert "- Metric by column: top1: Top-1; top5: Top-5" in md
    assert "- Protocol by row: global: FedAvg; personal: Ditto" in md
    assert "Metric by column: top1: Top-1; top5: Top-5." in tex
    assert ("Protocol by row", "global: FedAvg; personal: Ditto") in read_sidecar(
        tmp_path / "t.json"
    )
    read = pd.read_csv(tmp_path / "t.csv")
    assert list(read["quantity"]) == list(df["quantity"])
    assert "- Percent: accuracy metrics (names starting with 'top') and auroc in % (×100)\n" in md


def test_row_metric_percent_only_for_accuracies(make, tmp_path):
    """Table 2.6 style: stacked ECE and Top-1 rows; percent scales the Top-1 row only."""
    runs = [make(seed=s, metrics=("loss", "top1", "top5", "ece", "mce")) for s in SEEDS]
    rows = [
        {"id": "fedavg-ece", "label": "FedAvg ECE", "metric": "ece"},
        {"id": "fedavg-top1", "label": "FedAvg Top-1", "metric": "top1"},
    ]
    cols = [{"id": "mnist", "label": "MNIST"}]
    s = spec({(r["id"], "mnist"): runs for r in rows}, rows, cols)
    df = build_table(s, None)
    ece = np.array([(1 - v) / 4 for v in SEEDS.values()])  # conftest: client ece = (1 - top1)/4
    c = cell(df, "fedavg-ece", "mnist")
    assert c.ours_mean == pytest.approx(ece.mean())
    assert c.ours_std == pytest.approx(np.std(ece, ddof=1))
    assert c.quantity == "ece (protocol global, stat mean)"
    assert cell(df, "fedavg-top1", "mnist").ours_mean == pytest.approx(71.0)
    md = write_table(df, s, tmp_path / "t")[0].read_text()
    assert "- Metric by row: ece: FedAvg ECE; top1: FedAvg Top-1" in md
    percent = (
        "accuracy metrics (names starting with 'top') and auroc in % (×100); "
        "other metrics (ece) not"
    )
    assert f"- Percent: {percent} scaled\n" in md
    assert "| FedAvg ECE | 0.07 ± 0.01 (n=2) |" in md  # no paper values: ours alone


def test_uniform_loss_table_not_scaled(make):
    s = spec(
        {("fedavg", "mnist"): [make(seed=1)]},
        [{"id": "fedavg", "label": "FedAvg"}],
        [{"id": "mnist", "label": "MNIST"}],
        metric="loss",
    )
    df = build_table(s, None)
    assert cell(df, "fedavg", "mnist").ours_mean == pytest.approx(1 - 0.74)
    head = dict(header_lines(df, s))
    assert head["Quantity"] == "loss (protocol global, stat mean)"
    assert "other metrics (loss) not scaled" in head["Percent"]


def test_best_lambda_protocol_label(make, tmp_path):
    avg = [make(seed=0)]
    sup = [make(seed=0, algorithm="superfed", protocols=("global", "best_lambda"))]
    rows = [
        {"id": "fedavg", "label": "FedAvg"},
        {"id": "superfed", "label": "SuPerFed-MM", "protocol": "best_lambda"},
    ]
    cols = [{"id": "mnist", "label": "MNIST"}]
    s = spec({("fedavg", "mnist"): avg, ("superfed", "mnist"): sup}, rows, cols)
    df = build_table(s, None)
    sf, fa = cell(df, "superfed", "mnist"), cell(df, "fedavg", "mnist")
    assert sf.ours_mean == pytest.approx(68.0 + 15)  # conftest: best_lambda = global + 0.15
    assert fa.ours_mean == pytest.approx(68.0)
    assert sf.eval_protocol == f"final round (last evaluated round); {BEST_LAMBDA}"
    assert fa.eval_protocol == "final round (last evaluated round)"
    md, tex, csv = texts(write_table(df, s, tmp_path / "t"))
    assert "- Eval protocol: final round (last evaluated round); protocol best_lambda: " in md
    assert BEST_LAMBDA in md and BEST_LAMBDA in csv
    assert r"best $\lambda$ per client, chosen on the client's test split (optimistic)" in tex
    assert not any("λ" in line for line in tex.splitlines() if not line.startswith("%"))


def test_val_lambda_column_beside_best_lambda_is_labelled(make, tmp_path):
    sup = [make(seed=0, algorithm="superfed", protocols=("global", "best_lambda", "val_lambda"))]
    rows = [{"id": "superfed", "label": "SuPerFed-MM"}]
    cols = [
        {"id": "best", "label": "best λ (test)", "protocol": "best_lambda"},
        {"id": "val", "label": "λ on validation", "protocol": "val_lambda"},
    ]
    s = spec({("superfed", "best"): sup, ("superfed", "val"): sup}, rows, cols)
    df = build_table(s, None)
    assert cell(df, "superfed", "val").ours_mean == pytest.approx(68.0 + 10)  # conftest: +0.1
    label = cell(df, "superfed", "val").eval_protocol
    assert "λ per client chosen by top-1 on a validation part of the client's training" in label
    md = texts(write_table(df, s, tmp_path / "t"))[0]
    assert "protocol best_lambda: " in md and "protocol val_lambda: λ per client chosen" in md


def test_spread_by_hand_two_seeds(make, tmp_path):
    """ours = mean over seeds (mean over seeds of each run's across-client std) ± std over seeds."""
    wide = (-0.1, 0.0, 0.1)
    runs = [make(seed=0), make(seed=1, offsets=wide)]
    write_yaml(
        tmp_path / "papers" / "demo.yaml",
        {
            "paper": "demo",
            "source": "a test",
            "values": [
                {
                    "table": "t",
                    "row": "fedavg",
                    "column": "mnist",
                    "value": 74.8,
                    "std": 1.2,
                    "where": "x",
                },
            ],
        },
    )
    pv = load_paper_values("demo", tmp_path / "papers")
    rows = [{"id": "fedavg", "label": "FedAvg"}, {"id": "one", "label": "One seed"}]
    cols = [{"id": "mnist", "label": "MNIST"}]
    cells = {("fedavg", "mnist"): runs, ("one", "mnist"): runs[1:]}
    s = spec(cells, rows, cols, spread="std")
    df = build_table(s, pv)
    c = cell(df, "fedavg", "mnist")
    seed0 = np.array([0.68 - 0.05, 0.68, 0.68 + 0.05]) * 100  # round 20 clients (conftest)
    seed1 = np.array([0.74 - 0.1, 0.74, 0.74 + 0.1]) * 100
    assert c.ours_mean == pytest.approx((seed0.mean() + seed1.mean()) / 2)
    assert c.ours_spread == pytest.approx((np.std(seed0) + np.std(seed1)) / 2)  # population std
    assert c.ours_std == pytest.approx(np.std([seed0.mean(), seed1.mean()], ddof=1))
    assert c.delta == pytest.approx(71.0 - 74.8)
    assert cell(df, "one", "mnist").ours_spread == pytest.approx(np.std(seed1))
    md, tex, csv = texts(write_table(df, s, tmp_path / "t"))
    assert "| FedAvg | 74.80 (1.20) | 71.00 (6.12) ± 4.24 (n=2) | -3.80 |" in md
    assert "| One seed | — | 74.00 (8.16) (n=1) | — |" in md
    assert "(c) = mean over seeds of each run's std across clients" in md
    assert STD_NOTE not in md
    read = pd.read_csv(tmp_path / "t.csv").set_index("row")
    assert read.loc["fedavg", "ours_spread"] == pytest.approx(c.ours_spread)
    assert read.loc["fedavg", "ours_std"] == pytest.approx(c.ours_std)


def test_spread_of_an_unscaled_metric(make):
    runs = [make(seed=s, metrics=("loss", "top1", "top5", "ece", "mce")) for s in SEEDS]
    rows = [{"id": "fedavg", "label": "FedAvg", "metric": "ece"}]
    cols = [{"id": "mnist", "label": "M"}]
    s = spec({("fedavg", "mnist"): runs}, rows, cols, spread="std", round="best")
    expected = np.std([(1 - v) / 4 for v in (0.63, 0.68, 0.73)])  # seeds alike: ±0.05 clients
    assert cell(build_table(s, None), "fedavg", "mnist").ours_spread == pytest.approx(expected)


def test_spread_errors(make):
    rows = [{"id": "fedavg", "label": "FedAvg"}]
    cols = [{"id": "mnist", "label": "MNIST"}]
    with pytest.raises(LayoutError, match="unknown spread 'sd'"):
        spec({}, rows, cols, spread="sd")
    glob = [{"id": "fedavg", "label": "FedAvg", "protocol": "global_test", "stat": "value"}]
    with pytest.raises(LayoutError, match="spread needs per-client values"):
        spec({}, glob, cols, spread="std")


def test_cell_quantity_checked_and_absent_metric_named(make):
    cols = [{"id": "mnist", "label": "MNIST"}]
    bad = [{"id": "fedavg", "label": "FedAvg", "protocol": "global_test"}]
    with pytest.raises(LayoutError, match=r"cell \(fedavg, mnist\).*needs stat 'value'"):
        spec({}, bad, cols)
    glob = [{"id": "fedavg", "label": "FedAvg", "protocol": "global_test", "stat": "value"}]
    s = spec({("fedavg", "mnist"): [make(seed=0)]}, glob, cols)
    assert cell(build_table(s, None), "fedavg", "mnist").ours_mean == pytest.approx(69.0)
    ece = [{"id": "fedavg", "label": "FedAvg", "metric": "ece"}]
    with pytest.raises(RunDataError, match="no global/ece/mean"):
        build_table(spec({("fedavg", "mnist"): [make(seed=0)]}, ece, cols), None)


def test_per_cell_legend_when_row_and_column_set_the_same_field():
    rows = [{"id": "a", "label": "A", "protocol": "personal"}, {"id": "b", "label": "B"}]
    cols = [{"id": "x", "label": "X"}, {"id": "y", "label": "Y", "protocol": "best_lambda"}]
    s = spec({}, rows, cols)
    lines = dict(quantity_lines(s, True))
    assert (
        lines["Protocol by cell"] == "personal: (A, X), (A, Y); global: (B, X); best_lambda: (B, Y)"
    )


def test_plain_table_unchanged(make, tmp_path):
    """No overrides, no spread: the header and cells read as before; new CSV columns are filled."""
    rows = [{"id": "fedavg", "label": "FedAvg", "metric": "top1"}]  # same as the table: no legend
    cols = [{"id": "mnist", "label": "MNIST"}]
    s = spec({("fedavg", "mnist"): [make(seed=s) for s in SEEDS]}, rows, cols)
    df = build_table(s, None)
    assert [k for k, _ in header_lines(df, s)] == [
        "Paper",
        "Table",
        "Quantity",
        "Eval protocol",
        "Scale",
        "Ours",
        "Paper values",  # none: the one line this table gains, as it loses paper and Δ
        "WARNING",
    ]
    head = dict(header_lines(df, s))
    assert head["Quantity"] == "top1 (protocol global, stat mean), in % (×100)"
    assert head["Eval protocol"] == "final round (last evaluated round)"
    assert head["Ours"] == STD_NOTE.removesuffix("; Δ = ours − paper")  # no paper, no Δ
    c = cell(df, "fedavg", "mnist")
    assert math.isnan(c.ours_spread) and c.eval_protocol == head["Eval protocol"]
    md = write_table(df, s, tmp_path / "t")[0].read_text()
    assert "| FedAvg | 71.00 ± 4.24 (n=2) |" in md
    assert to_csv(df, s).startswith('"row","column",')  # tidy: pandas reads it as it is
    notes = read_sidecar(tmp_path / "t.json")  # the header lines, in order, in the sidecar
    assert notes[:3] == [("Paper", "demo"), ("Table", "t: demo"), ("Quantity", head["Quantity"])]


def test_a_table_says_when_its_runs_trained_in_other_precisions(make):
    rows = [{"id": "fedavg", "label": "FedAvg"}, {"id": "fedprox", "label": "FedProx"}]
    cols = [{"id": "mnist", "label": "MNIST"}]

    def header(precisions):
        runs = {
            (row["id"], "mnist"): [make(seed=s, algorithm=row["id"], precision=p) for s in SEEDS]
            for row, p in zip(rows, precisions)
        }
        s = spec(runs, rows, cols)
        return dict(header_lines(build_table(s, None), s))

    assert "Precision" not in header([None, "fp32"])  # older run.yaml files read as fp32
    assert header(["bf16", "bf16"])["Precision"].startswith("every run trained in bf16")
    mixed = header([None, "bf16"])["Precision"]
    assert "different precisions" in mixed
    assert "bf16: fedprox/mnist" in mixed and "fp32: fedavg/mnist" in mixed
