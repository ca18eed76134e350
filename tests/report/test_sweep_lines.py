"""Figures of kind sweep_lines (fedbench.outputs.sweep_lines, QF-6): each point is the mean over
seeds of the final round's statistic across clients, a diverged run is left out and counted,
and the figure renders from run files alone."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fedbench.outputs.sweep_lines import (
    SweepFigureSpec,
    SweepQuantity,
    sweep_points,
    write_sweep_figure,
)

# Each fake run's client-mean top1 per evaluated round, and the clients' offsets around it.
CURVES = {0: {5: 0.5, 10: 0.7}, 1: {5: 0.4, 10: 0.8}}
OFFSETS = (-0.1, 0.0, 0.1)


def _run(make, seed, algorithm, **kw):
    return make(seed=seed, algorithm=algorithm, curve=CURVES[seed], offsets=OFFSETS, **kw)


def _spec(cells, quantities, percent=True):
    return SweepFigureSpec(
        paper="qffl",
        name="figure6",
        caption="QF-6",
        scale="quick",
        axis="q",
        values=(0.0, 1.0),
        protocol="global",
        percent=percent,
        rows=(("a", "method A"),),
        columns=(("c", "data"),),
        quantities=quantities,
        cells=cells,
    )


def test_points_are_the_seeds_mean_of_the_final_round(make):
    runs_q0 = [make(seed=s, algorithm="alg-q0", curve=CURVES[s], offsets=OFFSETS) for s in (0, 1)]
    runs_q1 = [_run(make, 0, "alg-q1"), _run(make, 1, "alg-q1", diverged_round=10)]
    cells = {("a", "c", 0): tuple(runs_q0), ("a", "c", 1): tuple(runs_q1)}
    q_mean = SweepQuantity("top1", "mean", "mean")
    q_std = SweepQuantity("top1", "std", "spread")
    points = sweep_points(_spec(cells, (q_mean, q_std)))
    finals = [CURVES[s][max(CURVES[s])] for s in (0, 1)]
    mean, std, diverged = points[("top1/mean", "a", "c", 0)]
    assert mean == pytest.approx(100 * np.mean(finals))  # percent: accuracy x 100
    assert std == pytest.approx(100 * np.std(finals, ddof=1))
    assert diverged == 0
    # population std across the three clients (offsets around each run's mean)
    spread = 100 * np.std(OFFSETS)
    assert points[("top1/std", "a", "c", 0)][0] == pytest.approx(spread, rel=1e-5)
    mean, std, diverged = points[("top1/mean", "a", "c", 1)]
    assert diverged == 1 and std == 0.0  # only seed 0 finished
    assert mean == pytest.approx(100 * CURVES[0][max(CURVES[0])])


def test_a_point_whose_runs_all_diverged_is_nan(make):
    cells = {
        ("a", "c", 0): (_run(make, 0, "alg-q0"),),
        ("a", "c", 1): (_run(make, 0, "alg-q1", diverged_round=5),),
    }
    q = SweepQuantity("loss", "mean", "loss")
    points = sweep_points(_spec(cells, (q,)))
    mean, _std, diverged = points[("loss/mean", "a", "c", 1)]
    assert math.isnan(mean) and diverged == 1
    # loss is not scaled by percent
    assert points[("loss/mean", "a", "c", 0)][0] == pytest.approx(1 - CURVES[0][10])


def test_renders_png_and_pdf(make, tmp_path):
    cells = {
        ("a", "c", 0): (_run(make, 0, "alg-q0"),),
        ("a", "c", 1): (_run(make, 0, "alg-q1", diverged_round=5),),
    }
    spec = _spec(cells, (SweepQuantity("top1", "std", "σ"), SweepQuantity("loss", "std", "σ")))
    paths = write_sweep_figure(spec, tmp_path / "figure6")
    assert [p.suffix for p in paths] == [".png", ".pdf"]
    assert all(p.stat().st_size > 1000 for p in paths)
