"""Output kinds (fedbench.outputs): each grid entry's kind owns its checks, the runs and files it
reads, its spec and its drawing; a new kind is one module and one registry line."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from fedbench.cells import SECTIONS
from fedbench.config import ConfigError
from fedbench.grid import load_grid, output_inputs, output_spec
from fedbench.outputs import KINDS, kind_of, registry
from fedbench.registry import LazyRegistry

ROOT = Path(__file__).resolve().parents[2]

# The smallest kind (docs/architecture.md shows it): one bar per cell, the seeds' mean of one
# quantity at the final round. Everything else (the rule, the adapter, validation of the shared
# keys, which runs the cells name) is the grid's and the workflow's already.
BARS = """
from matplotlib.figure import Figure

from fedbench.outputs.matrix import MATRIX_KEYS, MatrixKind, matrix_fields
from fedbench.report import load_run, run_series
from fedbench.report.figures import save_figure


class BarsKind(MatrixKind):
    name = "bars"
    section = "figures"
    keys = (*MATRIX_KEYS, "seeds")
    about = "a figure of kind 'bars'"

    def spec(self, grid, name, catalog, scale):
        return matrix_fields(self, grid, name, catalog, scale)

    def render(self, spec, out_prefix):
        ax = (fig := Figure()).subplots()
        for i, (cell, runs) in enumerate(spec["cells"].items()):
            q = (spec["protocol"], spec["metric"], spec["stat"])
            finals = [run_series(load_run(r), *q).iloc[-1] for r in runs]
            ax.bar(i, sum(finals) / len(finals), label=" / ".join(cell))
        return save_figure(fig, out_prefix)
"""


def _quick() -> dict:
    return yaml.safe_load((ROOT / "config" / "papers" / "quick.yaml").read_text())


def test_every_grid_entry_has_a_registered_kind_of_its_section(catalog):
    for path in sorted((ROOT / "config" / "papers").glob("*.yaml")):
        grid = load_grid(path, catalog)
        for section in SECTIONS:
            for name, out in grid.outputs(section).items():
                kind = kind_of(section, out)
                assert kind is KINDS[out.get("kind", kind.name)]
                assert kind.section == section and set(out) <= set(kind.keys), (path, name)


@pytest.mark.parametrize(
    ("section", "kind", "needle"),
    [
        ("tables", "landscape", "'landscape' is a kind of figures, not of tables"),
        ("figures", "table", "'table' is a kind of tables, not of figures"),
        ("figures", "scatter", r"'scatter' is not one of \['rounds', 'lambda'"),
        ("figures", ["rounds"], r"\['rounds'\] is not one of"),
    ],
)
def test_a_kind_of_the_wrong_section_or_none_is_named(section, kind, needle):
    with pytest.raises(ConfigError, match=needle):
        kind_of(section, {"kind": kind}, "g.x")


def test_a_new_kind_is_one_module_and_one_registry_line(tmp_path, monkeypatch, catalog, runs):
    (tmp_path / "fedbench_bars.py").write_text(BARS)
    monkeypatch.syspath_prepend(str(tmp_path))
    targets = {name: KINDS.target(name) for name in KINDS} | {"bars": "fedbench_bars:BarsKind"}
    monkeypatch.setattr(registry, "KINDS", LazyRegistry(targets, build=lambda cls: cls()))
    raw = _quick()
    synthetic = [c for c in raw["columns"] if c["id"] == "synthetic"]
    figure = {"kind": "bars", "metric": "top1", "protocol": "global", "stat": "wmean"}
    raw["figures"] = {"figure7": {**figure, "rows": raw["rows"], "columns": synthetic}}
    (tmp_path / "quick.yaml").write_text(yaml.safe_dump(raw))
    grid = load_grid(tmp_path / "quick.yaml", catalog)

    # The grid expands the cells and names the files the figure rule waits for.
    files = output_inputs(grid, "figures", "figure7", catalog, "smoke")
    assert len(files) == 3 * 1 * 2  # rows x seeds (smoke keeps 1 of 3) x (metrics.jsonl, run.yaml)
    assert files[0] == "results/smoke/runs/synthetic-1-1/natural/linear/fedavg/seed0/metrics.jsonl"

    # The shared keys are checked for it, and a key of another kind says whose it is.
    bad = copy.deepcopy(raw)
    bad["figures"]["figure7"]["smooth"] = {"savgol": {"window": 3, "order": 1}}
    (tmp_path / "quick.yaml").write_text(yaml.safe_dump(bad))
    with pytest.raises(ConfigError, match="figure7.smooth: only figures of kind 'rounds' take it"):
        load_grid(tmp_path / "quick.yaml", catalog)

    # Its spec and drawing are its own (the cells pointed at fake runs: the report reads files).
    spec = output_spec(grid, "figures", "figure7", catalog, "smoke")
    assert list(spec["cells"]) == [
        ("fedavg", "synthetic"),
        ("fedprox", "synthetic"),
        ("scaffold", "synthetic"),
    ]
    spec["cells"] = {("fedavg", "synthetic"): [runs["avg0"], runs["avg1"]]}
    paths = registry.KINDS["bars"].render(spec, tmp_path / "out" / "figure7")
    assert [p.suffix for p in paths] == [".png", ".pdf"]
    assert all(p.stat().st_size > 1000 for p in paths)
