"""Figures of kind 'parallel' (pFedBreD's Figures 5-8): polylines through λ, η and accuracy."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib import colormaps
from matplotlib.collections import LineCollection

from fedbench.config import ConfigError
from fedbench.outputs.parallel import (
    CMAP,
    ParallelFigureSpec,
    ParallelKind,
    ParallelPanel,
    ParallelPoint,
    make_parallel_figure,
    select_points,
    write_parallel_figure,
)
from fedbench.report.layout import Quantity

# (λ, η) -> the run's per-round client-mean top1; best rounds 0.6, 0.8 and 0.3 (< the others'
# minimum, so a colour scale fitted to the data would differ from the fixed [0, 1] one).
POINTS = {
    (5.0, 0.01): {1: 0.50, 2: 0.60, 3: 0.55},
    (30.0, 0.1): {1: 0.70, 2: 0.65, 3: 0.80},
    (100.0, 1.0): {1: 0.30, 2: 0.20, 3: 0.25},
}
RANGES = {"lam": (0.0, 100.0), "eta": (0.0, 1.0)}


def _panel(make, diverged=()):
    points = []
    for (lam, eta), curve in POINTS.items():
        run = make(  # three clients, all at the curve's value: their weighted mean is it
            algorithm=f"mh-l{lam:g}-e{eta:g}",
            curve=curve,
            offsets=(0.0, 0.0, 0.0),
            diverged_round=2 if (lam, eta) in diverged else None,
        )
        points.append(ParallelPoint({"lam": lam, "eta": eta}, (run,)))
    return ParallelPanel(
        label="toy -G",
        quantity=Quantity("top1", "global", "wmean"),
        axes=("lam", "eta"),
        labels={"lam": "λ", "eta": "η"},
        ranges=RANGES,
        points=tuple(points),
    )


def _spec(panel, round_="best"):
    return ParallelFigureSpec("toy", "figure5", "cap", "quick", round_, (panel,), 1)


def _lines(fig) -> list[LineCollection]:
    """The panels' line collections (the colour bar's own are not polylines)."""
    panels = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    return [c for ax in panels for c in ax.collections if isinstance(c, LineCollection)]


def test_polylines_pass_through_the_swept_values_and_each_runs_best_accuracy(make):
    fig = make_parallel_figure(_spec(_panel(make)))
    (lines,) = _lines(fig)
    got = []
    for seg in lines.get_segments():
        xs, ys = seg[:, 0], seg[:, 1]
        assert xs.tolist() == [0, 1, 2]  # λ, η, accuracy axes left to right
        # Undo each axis's [low, high] -> [0, 1] scaling; accuracy's range is [0, 1].
        got.append((ys[0] * 100.0, ys[1] * 1.0, ys[2]))
    want = [(lam, eta, max(c.values())) for (lam, eta), c in POINTS.items()]
    assert np.allclose(sorted(got), sorted(want))
    # Each line's colour is its accuracy's on the fixed [0, 1] scale, not a data-fitted one.
    assert (lines.norm.vmin, lines.norm.vmax) == (0.0, 1.0)
    accs = np.asarray(lines.get_array())
    assert sorted(accs) == pytest.approx(sorted(w[2] for w in want))
    assert np.allclose(lines.to_rgba(accs), colormaps[CMAP](accs))
    assert fig.axes[-1].get_ylim() == (0.0, 1.0)  # the colour bar spans [0, 1] too


def test_final_round_takes_the_last_evaluated_round(make):
    (lines,) = _lines(make_parallel_figure(_spec(_panel(make), "final")))
    accs = sorted(np.asarray(lines.get_array()))
    assert accs == pytest.approx(sorted(c[3] for c in POINTS.values()))


def test_a_point_whose_runs_diverged_is_a_grey_line_through_the_swept_axes_only(make):
    fig = make_parallel_figure(_spec(_panel(make, diverged=[(30.0, 0.1)])))
    coloured, grey = _lines(fig)
    assert len(coloured.get_segments()) == 2
    (seg,) = grey.get_segments()
    assert seg[:, 0].tolist() == [0, 1] and seg[:, 1].tolist() == pytest.approx([0.3, 0.1])
    assert "1 run(s) diverged" in fig.axes[0].get_title()


def test_the_figure_is_written_as_png_and_pdf(make, tmp_path):
    paths = write_parallel_figure(_spec(_panel(make)), tmp_path / "out" / "figure5")
    assert [p.name for p in paths] == ["figure5.png", "figure5.pdf"]
    assert all(p.stat().st_size > 1000 for p in paths)
    assert not list((tmp_path / "out").glob(".*tmp"))  # nothing half-written left behind


def test_select_points_full_grid_or_a_diagonal_under_a_cap():
    values = {"lam": [1, 5, 15, 30, 60], "eta": [0, 0.5, 1.0]}
    full = select_points(values, ["lam", "eta"], None)
    assert len(full) == 15 and full[0] == {"lam": 1, "eta": 0} and full[1]["eta"] == 0.5
    assert select_points(values, ["lam", "eta"], 15) == full
    assert select_points(values, ["lam", "eta"], 2) == [
        {"lam": 1, "eta": 0},
        {"lam": 60, "eta": 1.0},
    ]
    three = select_points(values, ["lam", "eta"], 3)
    assert [p["lam"] for p in three] == [1, 15, 60] and [p["eta"] for p in three] == [0, 0.5, 1.0]
    assert select_points({"lam": [15], "eta": [0, 0.5]}, ["lam", "eta"], 2) == [
        {"lam": 15, "eta": 0},
        {"lam": 15, "eta": 0.5},
    ]


CATALOG = {
    "datasets": {"d": {}},
    "partitions": {"p": {}},
    "models": {"m": {}},
    "algorithms": {f"a-l{lam}-e{eta}": {} for lam in (5, 30) for eta in ("0", "0.1")},
}


def _figure(**kw):
    out = {
        "kind": "parallel",
        "metric": "top1",
        "stat": "wmean",
        "round": "best",
        "sweep": {"algorithm": "a-l{lam}-e{eta}", "values": {"lam": [5, 30], "eta": [0, 0.1]}},
        "rows": [{"id": "g", "label": "-G", "protocol": "global"}],
        "columns": [{"id": "c", "dataset": "d", "partition": "p", "model": "m"}],
    }
    out.update(kw)
    return out


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"protocol": "global"}, r"\[.protocol.\] do not apply to a parallel-coordinates figure"),
        ({"metric": "loss"}, r"\.metric: an accuracy"),
        ({"stat": "median"}, r"\.stat"),
        ({"rows": [{"id": "g"}]}, "needs a 'protocol'"),
        ({"sweep": {"algorithm": "a-l{lam}-e{eta}", "values": {"lam": [5]}}}, r"sweep\.values"),
        (
            {"sweep": {"algorithm": "a-l{lam}-e{eta}", "values": {"lam": [5], "eta": [0.2]}}},
            "'a-l5-e0.2' is not in the catalog",
        ),
        ({"sweep": {"algorithm": "a", "values": {}}}, "no {placeholder}"),
        ({"sweep": {"algorithm": "a-l{lam}-e{eta}", "valus": {}}}, r"sweep: unknown key"),
        (
            {"columns": [{"id": "c", "dataset": "d", "partition": "p", "model": "x"}]},
            "unknown model 'x'",
        ),
        (
            {
                "columns": [
                    {
                        "id": "c",
                        "dataset": "d",
                        "partition": "p",
                        "model": "m",
                        "sweep": {"range": {"eta": [0, 0.05]}},
                    }
                ]
            },
            r"range\.eta: value\(s\) \[0.1\] outside",
        ),
    ],
)
def test_bad_parallel_figures_are_rejected_naming_the_key(change, needle):
    ParallelKind().validate("g.figure5", _figure(), CATALOG)  # the unchanged one is fine
    with pytest.raises(ConfigError, match=needle):
        ParallelKind().validate("g.figure5", _figure(**change), CATALOG)
