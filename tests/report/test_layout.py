"""layout.shared_legend: one legend for all panels, each label once with its first handle."""

from __future__ import annotations

from matplotlib.figure import Figure

from fedbench.report.layout import shared_legend


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
