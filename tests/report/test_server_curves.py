"""Figures of a server-logged scalar over rounds (record["server"]), optionally smoothed."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy.signal import savgol_filter

from fedbench.config import ConfigError
from fedbench.grid import load_grid, output_spec
from fedbench.io import write_jsonl, write_yaml
from fedbench.outputs.curves import parse_smooth
from fedbench.report.collect import RunDataError, load_run
from fedbench.report.figures import FigureSpec, make_figure, seed_curves
from fedbench.report.layout import LayoutError
from fedbench.report.smooth import Savgol

ROOT = Path(__file__).resolve().parents[2]
# Seven evaluation rounds of a cumulative server objective, two seeds.
OBJECTIVE = {
    0: [0.9, 1.7, 2.6, 3.2, 4.1, 4.7, 5.6],
    1: [1.1, 2.1, 2.8, 3.6, 4.3, 5.3, 6.0],
}


def _server_run(root: Path, seed: int, values: list[float] | None = None) -> Path:
    """A finished run whose records carry record["server"]["objective"] (and a client pack)."""
    values = OBJECTIVE[seed] if values is None else values
    run_dir = root / "smoke" / "runs" / "berka" / "natural" / "logreg" / "aaggff" / f"seed{seed}"
    pack = {"mean": 0.5, "wmean": 0.5}
    records = [
        {
            "round": t,
            "status": "ok",
            "train_loss": 1.0,
            "clients": {"global": {"ids": [0], "n": [1], "top1": [0.5]}},
            "summary": {"global": {"top1": pack}},
            "server": {"objective": v, "objective_code": -v},
        }
        for t, v in enumerate(values, start=1)
    ]
    write_jsonl(run_dir / "metrics.jsonl", records)
    run = dict(
        scale="smoke", dataset="berka", partition="natural", model="logreg", algorithm="aaggff"
    )
    write_yaml(
        run_dir / "run.yaml",
        {"run": {**run, "seed": seed}, "status": "ok", "rounds": len(values), "standin": True},
    )
    return run_dir


@pytest.fixture
def server_runs(tmp_path):
    return [_server_run(tmp_path, s) for s in (0, 1)]


def _spec(run_dirs, **kw) -> FigureSpec:
    fields = dict(
        paper="demo",
        name="figure3_1",
        caption="Cumulative objective",
        metric="objective",
        protocol="server",
        stat="value",
        percent=False,
        rows=[{"id": "normal", "label": "Normal"}],
        columns=[{"id": "berka", "label": "Berka"}],
        cells={("normal", "berka"): run_dirs},
        scale="smoke",
    )
    return FigureSpec(**{**fields, **kw})


def test_server_curve_is_the_logged_scalar(server_runs):
    spec = _spec(server_runs)
    runs = [load_run(d) for d in server_runs]
    curves = seed_curves(runs, spec)
    assert list(curves.index) == list(range(1, 8))
    assert curves[0].tolist() == OBJECTIVE[0] and curves[1].tolist() == OBJECTIVE[1]
    fig = make_figure(spec)
    (line,) = fig.axes[0].get_lines()
    by_hand = [(a + b) / 2 for a, b in zip(OBJECTIVE[0], OBJECTIVE[1], strict=True)]
    np.testing.assert_allclose(line.get_ydata(), by_hand)
    assert "protocol server" in fig.get_suptitle()


def test_a_one_point_curve_gets_a_marker(tmp_path):
    spec = _spec([_server_run(tmp_path, 0, [2.5])], smooth=Savgol(5, 2))
    ax = make_figure(spec).axes[0]
    (line,) = ax.get_lines()
    assert line.get_ydata().tolist() == [2.5] and line.get_marker() == "o"
    assert all(float(t).is_integer() for t in ax.get_xticks())  # rounds, not 0.75 or 1.25


def test_smoothing_is_scipys_savgol_per_run(server_runs):
    spec = _spec(server_runs, smooth=Savgol(window=5, order=2))
    curves = seed_curves([load_run(d) for d in server_runs], spec)
    for seed in (0, 1):
        np.testing.assert_allclose(curves[seed], savgol_filter(OBJECTIVE[seed], 5, 2))
    fig = make_figure(spec)
    mean = (savgol_filter(OBJECTIVE[0], 5, 2) + savgol_filter(OBJECTIVE[1], 5, 2)) / 2
    np.testing.assert_allclose(fig.axes[0].get_lines()[0].get_ydata(), mean)
    assert "Savitzky-Golay smoothed (window 5, order 2)" in " ".join(fig.get_suptitle().split())


def test_window_is_clipped_to_the_series_length(server_runs):
    spec = _spec(server_runs, smooth=Savgol(window=9, order=3))
    curves = seed_curves([load_run(d) for d in server_runs], spec)
    np.testing.assert_allclose(curves[0], savgol_filter(OBJECTIVE[0], 7, 3))
    assert Savgol(9, 3).clipped(2) == (1, 0)
    assert "clipped to window 7, order 3 for 7 points" in " ".join(
        make_figure(spec).get_suptitle().split()
    )


def test_a_scalar_the_runs_do_not_log_is_named(server_runs):
    with pytest.raises(RunDataError, match="no server/gce/value.*objective"):
        make_figure(_spec(server_runs, metric="gce"))


def test_smooth_needs_a_rounds_figure(server_runs):
    with pytest.raises(LayoutError, match="smooth"):
        _spec(server_runs, kind="lambda", smooth=Savgol(3, 1))


@pytest.mark.parametrize(
    "raw, named",
    [
        ({"savgol": {"window": 4, "order": 1}}, r"smooth.savgol.window: expected an odd"),
        ({"savgol": {"window": 5, "order": 5}}, r"smooth.savgol.order: must be below"),
        ({"savgol": {"window": 5, "polyorder": 2}}, r"unknown key\(s\) \['polyorder'\]"),
        ({"savgol": {"window": 5}}, r"smooth.savgol.order: expected an integer"),
        ({"lowess": {"frac": 0.1}}, r"unknown smoother 'lowess'"),
        ("savgol", r"\.smooth: expected one smoother"),
    ],
)
def test_bad_smooth_values_are_named(raw, named):
    with pytest.raises(ConfigError, match=named):
        parse_smooth("g.figures.f", raw)


# Grid keys: a quick.yaml figure turned into a server-scalar figure.
def _aaggff_grid(tmp_path, catalog, **figure):
    raw = yaml.safe_load((ROOT / "config" / "papers" / "quick.yaml").read_text())
    raw = copy.deepcopy(raw)
    fig = {
        "caption": "c",
        "server": "objective",
        "rows": [{"id": "w", "label": "Weibull", "algorithm": "aaggff-s-weibull"}],
        "columns": [
            {
                "id": "heart",
                "label": "Heart",
                "dataset": "aaggff-heart",
                "partition": "aaggff-natural-silo",
                "model": "aaggff-logreg",
            }
        ],
    }
    fig.update(figure)
    raw["figures"] = {"figure9x": {k: v for k, v in fig.items() if v is not None}}
    path = tmp_path / "quick.yaml"
    path.write_text(yaml.safe_dump(raw))
    return load_grid(path, catalog)


def test_grid_server_figure_builds_its_spec(tmp_path, catalog):
    grid = _aaggff_grid(tmp_path, catalog, smooth={"savgol": {"window": 9, "order": 2}})
    spec = output_spec(grid, "figures", "figure9x", catalog, "smoke")
    assert (spec.metric, spec.protocol, spec.stat) == ("objective", "server", "value")
    assert spec.smooth == Savgol(9, 2)


@pytest.mark.parametrize(
    "figure, named",
    [
        ({"server": "objectiv"}, r"figure9x.server: 'objectiv' is not logged by .*'objective'"),
        (
            {"rows": [{"id": "a", "label": "FedAvg", "algorithm": "fedavg"}]},
            r"'objective' is not logged by algorithm 'fedavg'",
        ),
        ({"metric": "top1"}, r"figure9x.metric: an output of a server scalar"),
        ({"server": 3}, r"figure9x.server: expected a server scalar's name"),
        ({"kind": "lambda"}, r"figure9x.server: only tables and figures of kind 'rounds' take it"),
        ({"smooth": {"savgol": {"window": 2, "order": 1}}}, r"figure9x.smooth.savgol.window"),
        ({"smooth": {"median": 3}}, r"figure9x.smooth: unknown smoother 'median'"),
        ({"server": None}, r"figure9x: missing key 'metric'"),
    ],
)
def test_bad_server_figure_keys_are_named(tmp_path, catalog, figure, named):
    with pytest.raises(ConfigError, match=named):
        _aaggff_grid(tmp_path, catalog, **figure)
