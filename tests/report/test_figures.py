"""Learning curves: both files written, non-empty, nothing left behind; notes in the suptitle."""

from __future__ import annotations

import numpy as np
import pytest

from fedbench.report.collect import load_run
from fedbench.report.figures import FigureSpec, learning_curves, make_figure, seed_curves
from fedbench.report.layout import STANDIN_NOTE, LayoutError, Quantity, load_cells

ROWS = [{"id": "fedavg", "label": "FedAvg"}, {"id": "fedprox", "label": "FedProx"}]
COLS = [{"id": "mnist", "label": "MNIST"}, {"id": "synthetic", "label": "Synthetic"}]


def spec(cells: dict, **kw) -> FigureSpec:
    """A top1-mean learning-curve figure in percent."""
    fields = dict(
        paper="demo",
        name="figure3_1",
        caption="Learning curves",
        metric="top1",
        protocol="global",
        stat="mean",
        percent=True,
        rows=ROWS,
        columns=COLS,
        cells=cells,
        scale="quick",
    )
    fields.update(kw)
    return FigureSpec(**fields)


def test_files_written(runs, tmp_path):
    s = spec(
        {
            ("fedavg", "mnist"): [runs["avg0"], runs["avg1"]],
            ("fedprox", "mnist"): [runs["prox0_div"], runs["prox1"]],
            ("fedavg", "synthetic"): [runs["avg0_standin"]],
        }
    )
    out = tmp_path / "figs"
    paths = learning_curves(s, out / "figure3_1")
    assert [p.name for p in paths] == ["figure3_1.png", "figure3_1.pdf"]
    assert sorted(p.name for p in out.iterdir()) == ["figure3_1.pdf", "figure3_1.png"]
    assert paths[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert paths[1].read_bytes()[:5] == b"%PDF-"
    assert all(p.stat().st_size > 1000 for p in paths)


def test_suptitle_notes(runs):
    with_standin = make_figure(spec({("fedavg", "synthetic"): [runs["avg0_standin"]]}))
    text = " ".join(with_standin.get_suptitle().split())
    assert STANDIN_NOTE in text and "small-scale run" in text
    plain = make_figure(spec({("fedavg", "mnist"): [runs["avg0"]]}, scale="quick"))
    assert "STAND-IN" not in plain.get_suptitle()


def test_a_figure_of_bf16_runs_says_so(runs, make):
    bf16 = [make(seed=s, algorithm="scaffold", precision="bf16") for s in (0, 1)]
    text = " ".join(make_figure(spec({("fedavg", "mnist"): bf16})).get_suptitle().split())
    assert "Precision: every run trained in bf16" in text
    plain = make_figure(spec({("fedavg", "mnist"): [runs["avg0"]]}))
    assert "Precision" not in plain.get_suptitle()


def test_seed_curves_mean(runs):
    s = spec({("fedavg", "mnist"): [runs["avg0"], runs["avg1"]]})
    cell = [*load_cells(s)[("fedavg", "mnist")], load_run(runs["prox0_div"])]
    curves = seed_curves(cell, s)  # the diverged run is left out
    assert list(curves.index) == [5, 10, 15, 20] and list(curves.columns) == [0, 1]
    assert curves.mean(axis=1).loc[20] == pytest.approx(np.mean([68.0, 74.0]))


def test_unknown_stat_rejected():
    with pytest.raises(LayoutError, match="unknown stat"):
        spec({}, stat="median")


def test_row_protocol_override(runs):
    rows = [
        {"id": "fedavg", "label": "FedAvg"},
        {"id": "ditto", "label": "Ditto", "protocol": "personal"},
    ]
    s = spec(
        {("fedavg", "mnist"): [runs["avg0"]], ("ditto", "mnist"): [runs["avg0_personal"]]},
        rows=rows,
        columns=COLS[:1],
    )
    cells = load_cells(s)
    personal = Quantity("top1", "personal", "mean")
    curves = seed_curves(cells[("ditto", "mnist")], s, personal)
    assert curves.loc[20, 0] == pytest.approx(78.0)  # conftest: personal = global + 0.1
    fig = make_figure(s)
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend == ["FedAvg [global]", "Ditto [personal]"]
    assert fig.axes[0].get_ylabel() == "Top-1 accuracy (%)"  # the title says the protocols
    text = " ".join(fig.get_suptitle().split())
    assert "protocol per row, in brackets after each line's name: global = the global model" in text


def test_best_lambda_note_and_column_protocol(make):
    sup = make(seed=0, algorithm="superfed", protocols=("global", "best_lambda"))
    cols = [{"id": "g", "label": "global"}, {"id": "b", "label": "best", "protocol": "best_lambda"}]
    s = spec({("fedavg", "g"): [sup], ("fedavg", "b"): [sup]}, rows=ROWS[:1], columns=cols)
    fig = make_figure(s)
    assert [ax.get_title() for ax in fig.axes] == ["global [global]", "best [best_lambda]"]
    text = " ".join(fig.get_suptitle().split())
    assert "best λ per client, chosen on the client's test split (optimistic)" in text


def test_percent_not_applied_to_loss(runs):
    s = spec({("fedavg", "mnist"): [runs["avg0"]]}, metric="loss")
    curves = seed_curves(load_cells(s)[("fedavg", "mnist")], s)
    assert curves.loc[20, 0] == pytest.approx(1 - 0.68)


def test_only_protocol_may_vary():
    rows = [{"id": "fedavg", "label": "FedAvg", "metric": "top5"}]
    with pytest.raises(LayoutError, match="may override only the protocol"):
        spec({}, rows=rows)
    same = [{"id": "fedavg", "label": "FedAvg", "metric": "top1", "stat": "mean"}]
    spec({}, rows=same)  # an override equal to the figure's own quantity is fine


def test_rows_get_distinct_styles_even_when_their_curves_coincide(make):
    """Quick figure1's FedAvg lies exactly under FedProx: each row gets its own color, dash and
    marker (every other one hollow), with markers at other rounds, so both stay visible."""
    algos = ("fedavg", "fedprox", "scaffold")
    rows = [{"id": a, "label": a} for a in algos]
    curve = {r: 0.5 + 0.01 * r for r in range(1, 13)}  # the same 12 points for every row
    cells = {(a, "mnist"): [make(seed=0, algorithm=a, curve=curve)] for a in algos}
    fig = make_figure(spec(cells, rows=rows, columns=COLS[:1]))
    lines = fig.axes[0].get_lines()
    assert [line.get_label() for line in lines] == list(algos)
    np.testing.assert_array_equal(lines[0].get_ydata(), lines[1].get_ydata())  # they coincide
    for get in ("get_color", "get_linestyle", "get_marker"):
        assert len({getattr(line, get)() for line in lines}) == 3, get
    assert [line.get_markerfacecolor() == "none" for line in lines] == [False, True, False]
    assert len({line.get_markevery()[0] for line in lines}) == 3  # markers at other rounds
    legend = fig.legends[0].legend_handles
    assert [h.get_marker() for h in legend] == [line.get_marker() for line in lines]
    text = " ".join(fig.get_suptitle().split())  # and the title says so, each pair once
    assert "fedprox ≈ fedavg; scaffold ≈ fedavg: within 0.1 at every round" in text
    apart = {**cells, ("scaffold", "mnist"): [make(seed=0, algorithm="scaffold")]}
    text = " ".join(make_figure(spec(apart, rows=rows, columns=COLS[:1])).get_suptitle().split())
    assert "fedprox ≈ fedavg:" in text and "scaffold ≈" not in text


def test_plain_axis_labels_and_the_quantity_in_the_title(runs):
    fig = make_figure(spec({("fedavg", "mnist"): [runs["avg0"]]}, stat="wmean"))
    assert fig.axes[0].get_ylabel() == "Top-1 accuracy (%)"
    assert fig.axes[0].get_xlabel() == "Round"
    text = " ".join(fig.get_suptitle().split())
    assert (
        "y axis: Top-1 accuracy (%) of the global model on each client's test split, "
        "sample-weighted mean over clients"
    ) in text
    assert "line: the mean over 1 seed" in text and "band" not in text  # one run: no band
    for code in ("protocol global", "stat wmean", "ddof"):  # said in words, not code names
        assert code not in text, code
    loss = make_figure(spec({("fedavg", "mnist"): [runs["avg0"]]}, metric="loss"))
    assert loss.axes[0].get_ylabel() == "Loss"  # percent scales accuracies only
    gini = make_figure(spec({("fedavg", "mnist"): [runs["avg0"]]}, stat="gini"))
    assert gini.axes[0].get_ylabel() == "Top-1 accuracy, Gini coefficient across clients (×100)"
