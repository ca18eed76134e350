"""pFedBreD Figures 5-8 in the paper grid: the λ x η sweeps of mh that feed them."""

from pathlib import Path

import pytest

from fedbench.algorithms import build_algorithm
from fedbench.config import resolve_run
from fedbench.grid import all_runs, cells, load_grid, output_spec
from fedbench.outputs.parallel import ParallelFigureSpec, parallel_points

ROOT = Path(__file__).resolve().parent.parent
FIGURES = ("figure5", "figure6", "figure7", "figure8")


@pytest.fixture(scope="module")
def grid(catalog):
    return load_grid(ROOT / "config" / "papers" / "pfedbred.yaml", catalog)


def test_each_point_is_an_mh_run_at_its_lambda_and_eta(grid, catalog):
    for name in FIGURES:
        for (_row, _col), points in parallel_points(grid, name, catalog, "paper").items():
            for point, keys in points:
                assert [k.seed for k in keys] == [0]  # one run per point
                a = resolve_run(catalog, "paper", *vars(keys[0]).values())["algorithm"]
                algo = build_algorithm(a["algorithm"], **a["params"])
                assert a["algorithm"] == "pfedbred" and algo.prior == "mh"
                assert (algo.lam, algo.eta) == (point["lam"], point["eta"])
                assert algo.beta == 1.0 and not algo.ft


def test_a_default_point_reuses_the_tables_run(grid, catalog):
    # η = 0.05 is mh's default: λ = 15 / 30 at η = 0.05 are Table 1's pfedbred-mh-l15 / -l30 runs,
    # trained once; every other point keeps its sweep name.
    for name in FIGURES:
        for (_row, col), points in parallel_points(grid, name, catalog, "paper").items():
            for point, keys in points:
                expected = (
                    f"pfedbred-mh-l{point['lam']}"
                    if point["eta"] == 0.05 and point["lam"] in (15, 30)
                    else f"pfedbred-mh-l{point['lam']}-e{point['eta']:g}"
                )
                assert keys[0].algorithm == expected, (name, col, point)
    fig6 = parallel_points(grid, "figure6", catalog, "paper")[("g", "fmnist-dnn")]
    table1 = {k for ks in cells(grid, "tables", "table1", catalog, "paper").values() for k in ks}
    shared = [keys[0] for point, keys in fig6 if keys[0] in table1]
    assert [k.algorithm for k in shared] == ["pfedbred-mh-l30"]


def test_paper_grid_sizes_and_ranges(grid, catalog):
    fig5 = parallel_points(grid, "figure5", catalog, "paper")
    assert set(fig5) == {(r, c) for r in "gp" for c in ("femnist-mclr", "femnist-dnn")}
    assert all(len(points) == 64 for points in fig5.values())
    fig8 = parallel_points(grid, "figure8", catalog, "paper")
    sent = [p for p, _ in fig8[("p", "sent140-lstm")]]
    cifar = [p for p, _ in fig8[("g", "cifar10-cnn")]]
    assert len(sent) == 64 and max(p["eta"] for p in sent) == 0.4
    assert {p["lam"] for p in cifar} == {15} and max(p["eta"] for p in cifar) == 0.5
    assert len(cifar) == 9
    spec = output_spec(grid, "figures", "figure8", catalog, "paper")
    assert [p.label for p in spec.panels] == [
        "Sent140 LSTM -G",
        "Sent140 LSTM -P",
        "CIFAR-10 CNN -G",
        "CIFAR-10 CNN -P",
    ]
    assert spec.panels[0].ranges == {"lam": (0.0, 100.0), "eta": (0.0, 0.4)}
    assert spec.panels[2].ranges["eta"] == (0.0, 0.5)
    assert [p.quantity.protocol for p in spec.panels] == ["global", "personal"] * 2
    assert spec.round == "best"


def test_smoke_draws_two_points_per_panel_and_few_runs(grid, catalog):
    extra = set()
    for name in FIGURES:
        for (_row, _col), points in parallel_points(grid, name, catalog, "smoke").items():
            assert len(points) <= 2
            for axis in ("lam", "eta"):
                assert len({p[axis] for p, _ in points}) <= 2
            extra.update(k for _, keys in points for k in keys)
    others = {
        k
        for kind in ("tables", "figures")
        for name in grid.outputs(kind)
        if name not in FIGURES
        for keys in cells(grid, kind, name, catalog, "smoke").values()
        for k in keys
    }
    assert len(extra - others) <= 20  # the CI's smoke budget
    assert extra <= set(all_runs(grid, catalog, "smoke"))


def test_a_parallel_figures_spec_comes_from_its_kind(grid, catalog):
    assert isinstance(output_spec(grid, "figures", "figure6", catalog, "smoke"), ParallelFigureSpec)
