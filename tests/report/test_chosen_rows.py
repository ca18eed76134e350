"""Rows that run a selection table's choice (`chosen`, `chosen_by`; fedbench.outputs.chosen):
the choice file written from the selection's runs, the rows' runs read from it, what happens
before it exists or when it is stale, and every bad entry named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from fedbench.config import ConfigError
from fedbench.grid import cells, load_grid, output_inputs
from fedbench.jobs import choice, render
from fedbench.outputs.chosen import ChoicePending, choice_path

SCALE = "quick"
COL = {"dataset": "mnist", "partition": "dir0.1", "model": "twocnn"}
# Validation means of the swept FedProx values (seed 0): μ = 0.1 is the highest.
SWEEP = {"fedprox-mu0.01": 0.70, "fedprox-mu0.1": 0.82, "fedprox-mu1": 0.75}


def _grid_raw() -> dict:
    return {
        "paper": "demo",
        "seeds": [0, 1],
        "tables": {
            "table1_select": {
                "kind": "selection",
                "caption": "selection",
                "metric": "top1",
                "protocol": "global",
                "stat": "mean",
                "percent": True,
                "seeds": [0],
                "rows": [
                    {"id": "fedavg", "label": "FedAvg", "algorithm": "fedavg"},
                    {
                        "id": "prox",
                        "label": "FedProx",
                        "symbol": "μ",
                        "algorithm": "fedprox-mu{mu}",
                        "values": [0.01, 0.1, 1],
                    },
                ],
                "columns": [
                    {**COL, "id": "m", "label": "validation ā", "stat": "mean"},
                    {**COL, "id": "s", "label": "validation σ", "stat": "std"},
                ],
                "select": [{"by": "m", "tie": "s"}],
            },
            "table1": {
                "caption": "the table",
                "metric": "top1",
                "protocol": "global",
                "stat": "mean",
                "rows": [
                    {"id": "fedavg", "label": "FedAvg", "algorithm": "fedavg"},
                    {"id": "prox", "label": "FedProx (chosen μ)", "chosen": "prox"},
                ],
                "columns": [
                    {
                        **COL,
                        "id": "acc",
                        "label": "ā",
                        "chosen_by": {"table": "table1_select", "by": "m"},
                    }
                ],
            },
        },
    }


@pytest.fixture
def cat(catalog):
    """The catalog with the partition name the fake runs use."""
    parts = {**catalog["partitions"], "dir0.1": catalog["partitions"]["dir0.1-k100"]}
    return {**catalog, "partitions": parts}


def _load(tmp_path: Path, cat: dict, raw: dict | None = None):
    path = tmp_path / "demo.yaml"
    path.write_text(yaml.safe_dump(raw or _grid_raw(), allow_unicode=True))
    return load_grid(path, cat)


@pytest.fixture
def world(tmp_path, cat, make, monkeypatch):
    """A grid whose selection's runs are in (results/ under tmp_path, the working folder)."""
    monkeypatch.chdir(tmp_path)
    make(seed=0, scale=SCALE, curve={5: 0.60})
    for algo, top1 in SWEEP.items():
        make(seed=0, algorithm=algo, scale=SCALE, curve={5: top1})
    return _load(tmp_path, cat)


def test_rows_wait_for_the_choice_then_run_it_at_every_seed(world, cat, tmp_path):
    path = choice_path(SCALE, "demo", "table1_select")
    with pytest.raises(ChoicePending, match=f"{path}: the selection has not chosen yet.*snakemake"):
        cells(world, "tables", "table1", cat, SCALE)
    # before any selection ran (DAG-build checks, cost): the group's first value stands in
    first = cells(world, "tables", "table1", cat, SCALE, choices="first")
    assert {k.algorithm for k in first[("prox", "acc")]} == {"fedprox-mu0.01"}

    choice(world, "table1_select", cat, SCALE, path, tmp_path / "choice.log")
    record = json.loads(Path(path).read_text())
    picked = record["choices"]["m"]
    assert picked["prox"]["algorithm"] == "fedprox-mu0.1"
    assert picked["prox"]["by"] == pytest.approx(82.0)
    assert picked["fedavg"]["algorithm"] == "fedavg"

    got = cells(world, "tables", "table1", cat, SCALE)
    assert [(k.algorithm, k.seed) for k in got[("prox", "acc")]] == [
        ("fedprox-mu0.1", 0),
        ("fedprox-mu0.1", 1),
    ]
    assert [k.algorithm for k in got[("fedavg", "acc")]] == ["fedavg", "fedavg"]
    files = output_inputs(world, "tables", "table1", cat, SCALE)
    assert path in files and any("fedprox-mu0.1/seed1/metrics.jsonl" in f for f in files)


def test_the_rendered_table_says_what_was_chosen(world, cat, make, tmp_path):
    path = choice_path(SCALE, "demo", "table1_select")
    choice(world, "table1_select", cat, SCALE, path, tmp_path / "choice.log")
    make(seed=1, algorithm="fedprox-mu0.1", scale=SCALE)
    make(seed=1, scale=SCALE)
    render(world, "tables", "table1", cat, SCALE, tmp_path / "out" / "table1.md")
    md = (tmp_path / "out" / "table1.md").read_text()
    rule = "the highest validation ā, ties to the lowest validation σ, then the first row"
    assert f"Chosen rows (ā): table1_select's choice (B-D13: {rule})" in md
    assert "FedProx μ = 0.1 (82.00)" in md


def test_a_table_spec_resolves_its_chosen_rows_once(world, cat, tmp_path, monkeypatch):
    from fedbench.outputs import chosen
    from fedbench.outputs.table import TableKind

    path = choice_path(SCALE, "demo", "table1_select")
    choice(world, "table1_select", cat, SCALE, path, tmp_path / "choice.log")
    calls = []
    resolve = chosen.resolve_rows
    monkeypatch.setattr(chosen, "resolve_rows", lambda *a: calls.append(a) or resolve(*a))
    spec = TableKind().spec(world, "table1", cat, SCALE)
    assert len(calls) == 1
    assert [p.parts[-2:] for p in spec.cells[("prox", "acc")]] == [
        ("fedprox-mu0.1", "seed0"),
        ("fedprox-mu0.1", "seed1"),
    ]


def test_a_stale_or_broken_choice_file_is_named(world, cat):
    path = Path(choice_path(SCALE, "demo", "table1_select"))
    path.parent.mkdir(parents=True)
    stale = {"paper": "demo", "choices": {"m": {"prox": {"algorithm": "fedprox-mu5"}}}}
    path.write_text(json.dumps(stale))
    with pytest.raises(ConfigError, match=r"chose 'fedprox-mu5' for 'prox', which .* no longer"):
        cells(world, "tables", "table1", cat, SCALE)
    path.write_text(json.dumps({"paper": "demo", "choices": {"m": {}}}))
    with pytest.raises(ConfigError, match=r"no choice for group 'prox' under 'm'"):
        cells(world, "tables", "table1", cat, SCALE)
    path.write_text("{not json")
    with pytest.raises(ConfigError, match="not a choice file.*delete it and rebuild"):
        cells(world, "tables", "table1", cat, SCALE)


def _with(change):
    raw = _grid_raw()
    change(raw["tables"]["table1"])
    return raw


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (
            lambda t: t["rows"][1].update(algorithm="fedavg"),
            r"row 'prox': a row with 'chosen' runs the selection's choice; drop its 'algorithm'",
        ),
        (
            lambda t: t["columns"][0].pop("chosen_by"),
            r"column 'acc': rows \['prox'\] run a selection's choice, so every column needs",
        ),
        (
            lambda t: t["columns"][0].update(chosen_by={"table": "table2", "by": "m"}),
            r"'table2' is not a table of this grid that makes a choice .*\['table1_select'\]",
        ),
        (
            lambda t: t["columns"][0].update(chosen_by={"table": "table1_select", "by": "s"}),
            r"by: 's' is not a select column of table1_select; valid: \['m'\]",
        ),
        (
            lambda t: t["rows"][1].update(chosen="scaffold"),
            r"table1_select has no row group 'scaffold'; groups: \['fedavg', 'prox'\]",
        ),
        (
            lambda t: t["rows"].pop(1),
            r"column 'acc'.chosen_by: no row of the table has 'chosen'",
        ),
        (
            lambda t: t["columns"][0].update(chosen_by="table1_select"),
            r"chosen_by: expected \{table: <selection table>, by: <its select column>\}",
        ),
    ],
)
def test_bad_chosen_entries_are_named(tmp_path, cat, change, match):
    with pytest.raises(ConfigError, match=match):
        _load(tmp_path, cat, _with(change))


def test_every_value_a_chosen_cell_may_run_is_checked(tmp_path, cat):
    """A chosen row is checked with each value it may run, as a fixed row would be: a table of
    a server scalar that DQN-Fed logs, whose chosen group may also pick FedAvg (which does not)."""
    raw = _grid_raw()
    sel = raw["tables"]["table1_select"]
    sel["rows"] = [
        {"id": "dqn", "label": "DQN-Fed", "algorithm": "dqnfed-s1", "group": "g"},
        {"id": "avg", "label": "FedAvg", "algorithm": "fedavg", "group": "g"},
    ]
    table = raw["tables"]["table1"]
    table["rows"] = [{"id": "g", "label": "chosen", "chosen": "g"}]
    for key in ("metric", "protocol", "stat"):
        table.pop(key)
    table["server"] = "gram_condition"
    with pytest.raises(ConfigError, match=r"'gram_condition' is not logged by algorithm 'fedavg'"):
        _load(tmp_path, cat, raw)
    sel["rows"].pop(1)  # DQN-Fed alone: every value it may pick logs the scalar
    _load(tmp_path, cat, raw)
