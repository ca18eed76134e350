"""layout: the curve figures' one legend (each label once, with its first handle), the rows'
styles and the plain-language axis labels."""

from __future__ import annotations

from matplotlib.figure import Figure

from fedbench.report.layout import axis_label, marker_every, metric_name, row_styles, shared_legend


def test_shared_legend_dedupes_labels_first_handle_wins():
    fig = Figure(layout="constrained")
    left, right = fig.subplots(1, 2)
    (a,) = left.plot([0, 1], color="C0", label="FedAvg")
    (b,) = left.plot([0, 1], color="C1", label="FedProx")
    right.plot([0, 1], color="C2", label="FedAvg")  # same label again: the left handle stays
    (c,) = right.plot([0, 1], color="C3", label="SCAFFOLD")
    shared_legend(fig, [left, right])
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == ["FedAvg", "FedProx", "SCAFFOLD"]
    colors = [h.get_color() for h in legend.legend_handles]
    assert colors == [a.get_color(), b.get_color(), c.get_color()]
    assert legend._ncols == 3


def test_shared_legend_columns_capped_at_five():
    fig = Figure()
    ax = fig.subplots()
    for i in range(7):
        ax.plot([0, 1], label=f"line {i}")
    shared_legend(fig, [ax])
    assert fig.legends[0]._ncols == 5


def test_shared_legend_none_without_labels():
    fig = Figure()
    ax = fig.subplots()
    ax.plot([0, 1])  # unlabelled
    shared_legend(fig, [ax])
    assert fig.legends == []


def test_row_styles_differ_for_forty_rows():
    styles = row_styles([{"id": i} for i in range(40)])
    keys = {(s["color"], str(s["ls"]), s["marker"]) for s in styles.values()}
    assert len(keys) == 40
    assert all(s["ls"] != ":" for s in styles.values())  # dotted is kept for diverged runs


def test_marker_every_staggers_rows():
    assert [marker_every(20, i, 3) for i in range(3)] == [(0, 3), (1, 3), (2, 3)]
    assert marker_every(1, 2, 3) == (0, 1)  # a one-point curve is its marker
    assert marker_every(80, 0, 2) == (0, 10)  # about eight markers on a long line


def test_plain_axis_labels():
    assert axis_label("top1", "wmean", True) == "Top-1 accuracy (%)"
    assert axis_label("top5", "mean", False) == "Top-5 accuracy"
    assert axis_label("loss", "mean", True) == "Loss"
    assert axis_label("top1", "std", True) == "Top-1 accuracy, std across clients (%)"
    assert metric_name("objective_code") == "objective_code"  # a server scalar keeps its name
