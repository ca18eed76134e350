"""Figures of kind client_histogram (DQN-Fed's Figure 2): the final round's clients of every
finished seed pooled, counts divided by the seeds, a per-row protocol, a diverged run left out and
counted; both files written; bad specs and grid entries named."""

from __future__ import annotations

import numpy as np
import pytest

from fedbench.config import ConfigError
from fedbench.outputs.registry import KINDS
from fedbench.report.client_histogram import (
    HistogramSpec,
    histogram_counts,
    make_histogram_figure,
    write_client_histogram,
)
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
    ):
        with pytest.raises(ConfigError, match=match):
            kind.validate("fig2", {**base, **bad}, catalog)
