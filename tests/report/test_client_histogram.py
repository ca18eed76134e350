"""Figures of kind client_histogram (DQN-Fed's Figure 2): the final round's clients of every
finished seed pooled, counts divided by the seeds, a per-row protocol, a diverged run left out and
counted; both files written; bad specs and grid entries named."""

from __future__ import annotations

import numpy as np
import pytest

from fedbench.config import ConfigError
from fedbench.outputs.client_histogram import (
    HistogramSpec,
    bin_counts,
    histogram_counts,
    make_histogram_figure,
    write_client_histogram,
)
from fedbench.outputs.registry import KINDS
from fedbench.report.layout import LayoutError

ROWS = [
    {"id": "fedavg", "label": "FedAvg"},
    {"id": "ditto", "label": "Ditto", "protocol": "personal"},
]
COLS = [{"id": "mnist", "label": "MNIST"}]
# conftest's clients sit at the final round's mean + (-0.05, 0, 0.05): seed 0 ends at 0.68,
# seed 1 at 0.74 (the personal protocol 0.1 higher).


def spec(cells, **kw) -> HistogramSpec:
    fields = dict(
        paper="demo",
        name="figure2",
        caption="Client accuracies",
        metric="top1",
        protocol="global",
        percent=True,
        rows=ROWS,
        columns=COLS,
        cells=cells,
        scale="quick",
        bins=20,
    )
    return HistogramSpec(**{**fields, **kw})


def test_seed_averaged_counts_by_hand(runs, make):
    ditto = [make(seed=s, algorithm="ditto", protocols=("global", "personal")) for s in (0, 1)]
    cells = {("fedavg", "mnist"): [runs["avg0"], runs["avg1"]], ("ditto", "mnist"): ditto}
    edges, counts = histogram_counts(spec(cells))
    assert np.allclose(edges, np.linspace(0, 100, 21))  # 5-point bins over [0, 100] %
    avg = counts[("fedavg", "mnist")]
    # 63, 68, 73 (seed 0) and 69, 74, 79 (seed 1): bins 60-65, 65-70 (x2), 70-75 (x2), 75-80
    expected = np.zeros(20)
    expected[[12, 13, 14, 15]] = [0.5, 1.0, 1.0, 0.5]
    assert np.allclose(avg.counts, expected) and avg.seeds == 2 and avg.diverged == 0
    assert avg.counts.sum() == pytest.approx(3.0)  # a seed's three clients
    assert sorted(np.round(avg.values, 6)) == [63, 68, 69, 73, 74, 79]
    personal = counts[("ditto", "mnist")]  # the row's own protocol: 10 points higher
    assert sorted(np.round(personal.values, 6)) == [73, 78, 79, 83, 84, 89]


def test_a_diverged_run_is_left_out_and_counted(runs):
    cells = {("fedavg", "mnist"): [runs["prox1"], runs["prox0_div"]]}
    _, counts = histogram_counts(spec(cells, rows=ROWS[:1]))
    c = counts[("fedavg", "mnist")]
    assert (c.seeds, c.diverged) == (1, 1)
    assert c.counts.sum() == pytest.approx(3.0)
    fig = make_histogram_figure(spec(cells, rows=ROWS[:1]))
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == ["FedAvg (1 seed) [1 diverged]"]


def test_files_and_notes(runs, tmp_path):
    s = spec({("fedavg", "mnist"): [runs["avg0_standin"]]}, rows=ROWS[:1])
    paths = write_client_histogram(s, tmp_path / "figs" / "figure2")
    assert [p.name for p in paths] == ["figure2.png", "figure2.pdf"]
    assert (
        paths[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and paths[1].read_bytes()[:5] == b"%PDF-"
    )
    text = " ".join(make_histogram_figure(s).get_suptitle().split())
    assert "20 equal bins over [0, 100]" in text and "STAND-IN" in text
    assert "counts divided by the number of seeds" in text


def test_binnings_by_hand_on_the_edges():
    edges = np.linspace(0, 1, 5)  # bins of 0.25
    values = np.array([0.0, 0.1, 0.25, 0.3, 0.5, 0.75, 0.9, 1.0])
    # numpy: [a, b) and the last [a, b]: 0, 0.1 | 0.25, 0.3 | 0.5 | 0.75, 0.9, 1.0
    assert bin_counts(values, edges, "numpy").tolist() == [2, 2, 1, 3]
    # right-closed (a, b]: 0 never counted; 0.1, 0.25 | 0.3, 0.5 | 0.75 | 0.9, 1.0
    assert bin_counts(values, edges, "right_closed").tolist() == [2, 2, 1, 2]
    with pytest.raises(ValueError, match="binning must be one of"):
        bin_counts(values, edges, "left")


def _release_get_bar_y(accuracies, num_bar):
    """fair_flearn's plot_fairness.py get_bar_y (litian96/fair_flearn f097971), its counting
    loop transcribed for one run: edges = linspace(0, 1, num_bar), a value counts in bin j when
    edges[j] < v <= edges[j + 1] (the `and` stops before edges[num_bar] for v <= 1)."""
    clients = np.zeros(num_bar)
    edges = np.linspace(0, 1, num_bar, endpoint=True)
    for accu in accuracies:
        for j in range(num_bar):
            if accu > edges[j] and accu <= edges[j + 1]:
                clients[j] += 1
    return clients[: num_bar - 1]  # its last column stays 0: num_bar edges make num_bar - 1 bins


def test_right_closed_binning_equals_the_q_ffl_release():
    rng = np.random.default_rng(4)
    # accuracies of clients with 20 test samples: many values land on the edges of 20 bins
    values = rng.integers(0, 21, size=300) / 20
    edges = np.linspace(0, 1, 21)
    ours = bin_counts(values, edges, "right_closed")
    assert ours.tolist() == _release_get_bar_y(values, 21).tolist()
    assert ours.sum() == np.count_nonzero(values > 0)  # the zeros are the only ones left out
    assert not np.array_equal(ours, bin_counts(values, edges, "numpy"))


def test_right_closed_figure_counts_and_says_so(runs):
    cells = {("fedavg", "mnist"): [runs["avg0"], runs["avg1"]]}
    s = spec(cells, rows=ROWS[:1], binning="right_closed")
    _, counts = histogram_counts(s)
    # 63, 68, 73 and 69, 74, 79 lie inside their bins: either binning counts them alike
    assert np.allclose(
        counts[("fedavg", "mnist")].counts,
        histogram_counts(spec(cells))[1][("fedavg", "mnist")].counts,
    )
    text = " ".join(make_histogram_figure(s).get_suptitle().split())
    assert "(a, b] as the q-FFL release counts them" in text


def test_a_loss_histogram_bins_its_own_span(runs):
    s = spec({("fedavg", "mnist"): [runs["avg0"]]}, rows=ROWS[:1], metric="loss", bins=4)
    edges, counts = histogram_counts(s)
    # loss = 1 - top1: 0.37, 0.32, 0.27 (not scaled by the percent flag)
    assert np.allclose(edges, np.linspace(0.27, 0.37, 5))
    assert counts[("fedavg", "mnist")].counts.sum() == 3


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"bins": 0}, "bins must be in 1..200"),
        ({"protocol": "global_test"}, "no per-client values"),
        ({"cells": {("fedprox", "mnist"): []}}, "unknown row or column"),
        ({"scale": "huge"}, "unknown scale"),
        ({"binning": "left"}, "binning must be one of \\['numpy', 'right_closed'\\]"),
    ],
)
def test_bad_specs_are_named(kw, match):
    with pytest.raises(LayoutError, match=match):
        spec(kw.pop("cells", {}), **kw)


def test_grid_entries_are_checked(catalog):
    kind = KINDS["client_histogram"]
    cols = [{"id": "m", "dataset": "mnist", "partition": "iid-k100", "model": "twonn"}]
    base = {
        "kind": "client_histogram",
        "metric": "top1",
        "protocol": "global",
        "rows": [{"id": "a", "algorithm": "fedavg"}],
        "columns": cols,
    }
    kind.validate("fig2", {**base, "bins": 39}, catalog)  # a good entry passes
    for bad, match in (
        ({"bins": 0}, r"fig2.bins: expected an integer in 1..200"),
        ({"stat": "mean"}, r"key\(s\) \['stat'\] do not apply"),
        ({"rows": [{"id": "a", "algorithm": "fedavg", "metric": "loss"}]}, "share one x axis"),
        ({"protocol": "train"}, "has no per-client values"),
        ({"binning": "closed"}, r"fig2.binning: expected one of \['numpy', 'right_closed'\]"),
    ):
        with pytest.raises(ConfigError, match=match):
            kind.validate("fig2", {**base, **bad}, catalog)
