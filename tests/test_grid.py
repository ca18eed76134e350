import copy
from pathlib import Path

import pytest
import yaml

from fedbench.config import ConfigError
from fedbench.grid import all_runs, cells, load_grid, load_grids, output_files, validate_runs

ROOT = Path(__file__).resolve().parent.parent


def test_every_grid_loads_and_resolves_every_run(catalog):
    grids = load_grids(ROOT / "config" / "papers", catalog)
    assert "quick" in grids
    for grid in grids.values():
        for scale in catalog["scales"]:
            validate_runs(grid, catalog, scale)


def test_quick_grid_shape(catalog):
    grid = load_grid(ROOT / "config" / "papers" / "quick.yaml", catalog)
    runs = all_runs(grid, catalog, "quick")
    assert len(runs) == 3 * 3 * 3  # algorithms x columns x seeds, shared by tables and figure
    table = cells(grid, "tables", "table1", catalog, "quick")
    assert len(table) == 9 and all(len(v) == 3 for v in table.values())
    smoke = cells(grid, "tables", "table1", catalog, "smoke")
    assert all(len(v) == 1 for v in smoke.values())  # the smoke scale caps seeds
    assert "results/smoke/papers/quick/table1.md" in output_files(grid, "smoke")
    assert "results/smoke/papers/quick/figure1.png" in output_files(grid, "smoke")


def _write(tmp_path, raw):
    p = tmp_path / f"{raw['paper']}.yaml"
    p.write_text(yaml.safe_dump(raw))
    return p


@pytest.mark.parametrize(
    "mutate, named",
    [
        (lambda g: g["tables"]["table1"].update(stat="median"), "median"),
        (lambda g: g["tables"]["table1"].update(metric="acc"), "acc"),
        (lambda g: g["tables"]["table1"]["rows"][0].update(algorithm="fedsgd"), "fedsgd"),
        (lambda g: g.update(tabels={}), "tabels"),
        (lambda g: g["tables"]["table1"].update(colour="red"), "colour"),
        (lambda g: g["tables"]["table1"].update(seed_spread="range"), "seed_spread"),
        (lambda g: g["figures"]["figure1"].update(seed_spread="maxdev"), "only tables"),
        (
            lambda g: g["tables"]["table1"].update(metric="auroc"),
            "metric 'auroc' needs a 2-class dataset; '.*' has 10 classes",
        ),
        (
            lambda g: g["tables"]["table1"].update(summaries=[{"id": "avg", "stat": "median"}]),
            "summaries entry 'avg'.stat",
        ),
        (
            lambda g: g["tables"]["table1"].update(
                summaries=[{"id": "avg", "stat": "mean", "columns": ["nope"]}]
            ),
            "unknown column",
        ),
        (
            lambda g: g["tables"]["table1"].update(summaries=[{"id": "synthetic", "stat": "mean"}]),
            "already a column",
        ),
        (
            lambda g: g["tables"]["table1"].update(protocol="val_lambda"),
            "protocol 'val_lambda' chooses on a validation split, but partition .* no val_fraction",
        ),
        # Names the table / figure rules cannot match fail at load, not as a missing input.
        (
            lambda g: g["tables"].update(summary=g["tables"]["table1"]),
            r"tables\.summary: .*table\[0-9\]",
        ),
        (
            lambda g: g["figures"].update(Figure2=g["figures"]["figure1"]),
            r"figures\.Figure2: .*figure\[",
        ),
    ],
)
def test_bad_grid_entries_are_named(tmp_path, catalog, mutate, named):
    raw = yaml.safe_load((ROOT / "config" / "papers" / "quick.yaml").read_text())
    raw = copy.deepcopy(raw)
    mutate(raw)
    with pytest.raises(ConfigError, match=named):
        load_grid(_write(tmp_path, raw), catalog)
