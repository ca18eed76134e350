"""Figures of kind 'landscape' in the grids: validation, their runs and files, Figure 2.4."""

import copy
from pathlib import Path

import pytest
import yaml

from fedbench.config import ConfigError
from fedbench.grid import load_grid, output_spec
from fedbench.outputs.landscape import LandscapeFigureSpec, landscape_file, landscape_panels

ROOT = Path(__file__).resolve().parent.parent
LANDSCAPE = {
    "caption": "toy",
    "kind": "landscape",
    "seeds": [1],
    "landscape": {"span": 0.5, "points": 21, "scales": {"smoke": {"points": 3}}},
    "rows": [{"id": "fedavg", "label": "FedAvg", "algorithm": "fedavg"}],
    "columns": [
        {
            "id": "a",
            "label": "A",
            "dataset": "synthetic-1-1",
            "partition": "natural",
            "model": "linear",
        },
        {
            "id": "b",
            "label": "B",
            "dataset": "synthetic-0-0",
            "partition": "natural",
            "model": "linear",
        },
    ],
}


def _grid(tmp_path, catalog, figure):
    raw = yaml.safe_load((ROOT / "config" / "papers" / "quick.yaml").read_text())
    raw["figures"] = {"figure9": figure}
    path = tmp_path / "quick.yaml"
    path.write_text(yaml.safe_dump(raw))
    return load_grid(path, catalog)


def test_landscape_panels_files_and_settings(tmp_path, catalog):
    grid = _grid(tmp_path, catalog, LANDSCAPE)
    panels = landscape_panels(grid, "figure9", catalog, "smoke")
    assert [label for label, _ in panels] == ["FedAvg, A", "FedAvg, B"]
    key = panels[0][1]
    assert (key.dataset, key.algorithm, key.seed) == ("synthetic-1-1", "fedavg", 1)
    assert landscape_file("smoke", "quick", "figure9", key) == (
        "results/smoke/landscapes/quick/figure9/synthetic-1-1/natural/linear/fedavg/seed1.npz"
    )
    spec = output_spec(grid, "figures", "figure9", catalog, "smoke")
    assert (spec.settings.points, spec.settings.span) == (3, 0.5)
    assert spec.panels[1][1] == Path(landscape_file("smoke", "quick", "figure9", panels[1][1]))
    assert output_spec(grid, "figures", "figure9", catalog, "paper").settings.points == 21
    assert isinstance(spec, LandscapeFigureSpec)  # the figure's kind built it


@pytest.mark.parametrize(
    "mutate, named",
    [
        (lambda f: f.update(metric="top1"), r"\['metric'\] do not apply to a landscape"),
        (lambda f: f.update(seeds=[0, 1]), "one seed"),
        (lambda f: f.pop("seeds"), "one seed"),
        (lambda f: f["landscape"].update(points=4), r"scale paper\): .*odd"),
        (lambda f: f["landscape"]["scales"].update(huge={"points": 3}), r"unknown scale\(s\)"),
        (lambda f: f["landscape"].update(spam=1), r"unknown key\(s\) \['spam'\]"),
        (lambda f: f.update(kind="lambda", metric="top1", protocol="global", stat="mean"), "only"),
    ],
)
def test_bad_landscape_entries_are_named(tmp_path, catalog, mutate, named):
    figure = copy.deepcopy(LANDSCAPE)
    mutate(figure)
    with pytest.raises(ConfigError, match=named):
        _grid(tmp_path, catalog, figure)


def test_superfed_figure2_4_is_table2_3_cifar10_k100(catalog):
    grid = load_grid(ROOT / "config" / "papers" / "superfed.yaml", catalog)
    panels = landscape_panels(grid, "figure2_4", catalog, "paper")
    assert [label for label, _ in panels] == ["FedAvg", "SuPerFed-MM", "SuPerFed-LM"]
    algorithms = [k.algorithm for _, k in panels]
    assert algorithms == ["fedavg", "superfed-mm-nu1-l0.4", "superfed-lm-nu2-l0.6"]
    for _, key in panels:
        assert (key.dataset, key.partition, key.model, key.seed) == (
            "cifar10-28",
            "superfed-patho-k100",
            "superfed-twocnn",
            0,
        )
    spec = output_spec(grid, "figures", "figure2_4", catalog, "paper")
    assert (spec.settings.points, spec.settings.span) == (41, 1.0)
    assert output_spec(grid, "figures", "figure2_4", catalog, "smoke").settings.points == 5
