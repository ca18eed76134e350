"""B-D13's hyperparameter selection written into a table (TableSpec.select, kind `selection`):
highest validation mean, ties to the lowest std, then the first row; the sweep rows expanded
from catalog name templates, thinned by a scale's select_points (else sweep_points) cap; bad
entries named."""

from __future__ import annotations

import pytest

from fedbench.config import ConfigError
from fedbench.outputs.registry import KINDS
from fedbench.outputs.sweep_rows import expanded_rows
from fedbench.report.layout import LayoutError
from fedbench.report.tables import TableSpec, build_table, choices, header_lines, to_markdown

COLS = [
    {"id": "mean", "label": "validation ā", "stat": "mean"},
    {"id": "std", "label": "validation σ_a", "stat": "std"},
]
# (row id, group, final client-mean top1, client offsets): q-0.1 and q-1 tie on the mean, q-1
# has the smaller spread; q-1 and q-2 are the same run twice (a full tie: the first row wins).
ROWS = [
    ("q-0", "q", 0.70, (-0.01, 0.0, 0.01)),
    ("q-0.1", "q", 0.80, (-0.10, 0.0, 0.10)),
    ("q-1", "q", 0.80, (-0.02, 0.0, 0.02)),
    ("q-2", "q", 0.80, (-0.02, 0.0, 0.02)),
    ("e-0.5", "e", 0.60, (-0.05, 0.0, 0.05)),
    ("e-1", "e", 0.65, (-0.30, 0.0, 0.30)),
]


def _spec(make, select=({"by": "mean", "tie": "std"},)):
    cells = {}
    for rid, _, top1, offsets in ROWS:
        run = make(seed=0, algorithm=rid, curve={5: top1}, offsets=offsets)
        cells.update({(rid, c["id"]): [run] for c in COLS})
    return TableSpec(
        paper="demo",
        name="table1_select",
        caption="Selection",
        metric="top1",
        protocol="global",
        stat="mean",
        round="final",
        percent=True,
        rows=[{"id": r, "label": f"label {r}", "group": g} for r, g, _, _ in ROWS],
        columns=COLS,
        cells=cells,
        scale="quick",
        select=list(select),
    )


def test_highest_mean_then_lowest_std_then_first_row(make):
    spec = _spec(make)
    table = build_table(spec)
    ((_, picked),) = choices(table, spec)
    assert [(g, row["id"]) for g, row in picked] == [("q", "q-1"), ("e", "e-1")]
    md = to_markdown(table, spec)
    line = (
        "- Chosen: highest validation ā, ties to the lowest validation σ_a, then the first row: "
        "label q-1 (80.00 / 1.63); label e-1 (65.00 / 24.49)"
    )
    assert line in md
    assert ("Chosen", line.removeprefix("- Chosen: ")) in header_lines(table, spec)  # the .json


def test_a_row_without_a_group_is_its_own_and_unfinished_groups_are_left_out(make):
    spec = _spec(make)
    rows = [{k: v for k, v in r.items() if k != "group"} for r in spec.rows]
    cells = {k: v for k, v in spec.cells.items() if k[0] != "e-1"}
    spec = TableSpec(**{**spec.__dict__, "rows": rows, "cells": cells})
    ((_, picked),) = choices(build_table(spec), spec)
    assert [g for g, _ in picked] == ["q-0", "q-0.1", "q-1", "q-2", "e-0.5"]  # e-1: no runs


def test_select_names_unknown_columns(make):
    with pytest.raises(LayoutError, match=r"select .* unknown column\(s\) \['sigma'\]"):
        _spec(make, select=[{"by": "mean", "tie": "sigma"}])


def _out(**kw):
    cols = [{"id": "m", "dataset": "mnist", "partition": "iid-k100", "model": "twonn"}]
    base = {
        "kind": "selection",
        "caption": "c",
        "metric": "top1",
        "protocol": "global",
        "stat": "mean",
        "rows": [
            {"id": "fedavg", "label": "FedAvg", "algorithm": "fedavg"},
            {"id": "prox", "label": "FedProx", "symbol": "μ", "algorithm": "fedprox-mu{mu}"},
        ],
        "columns": [{**cols[0], "stat": "mean"}, {**cols[0], "id": "s", "stat": "std"}],
        "select": [{"by": "m", "tie": "s"}],
    }
    return {**base, **kw}


def _catalog(catalog):
    names = {f"fedprox-mu{v}": {"algorithm": "fedprox", "mu": v} for v in ("0.01", "0.1", "1")}
    return {**catalog, "algorithms": {**catalog["algorithms"], **names}}


def test_sweep_rows_expand_and_thin(catalog):
    cat = _catalog(catalog)
    out = _out()
    out["rows"][1]["values"] = [0.01, 0.1, 1]
    rows = expanded_rows("g.t", out, cat)
    assert [(r["id"], r["label"], r["algorithm"], r["group"]) for r in rows] == [
        ("fedavg", "FedAvg", "fedavg", "fedavg"),
        ("prox-0.01", "FedProx μ = 0.01", "fedprox-mu0.01", "prox"),
        ("prox-0.1", "FedProx μ = 0.1", "fedprox-mu0.1", "prox"),
        ("prox-1", "FedProx μ = 1", "fedprox-mu1", "prox"),
    ]
    thin = expanded_rows("g.t", out, cat, cap=2)  # a smoke scale: the first and the last value
    assert [r["id"] for r in thin] == ["fedavg", "prox-0.01", "prox-1"]
    KINDS["selection"].validate("g.t", out, cat)  # a good entry passes


@pytest.mark.parametrize(
    ("caps", "ids"),
    [
        ({}, ["fedavg", "prox-0.01", "prox-0.1", "prox-1"]),
        ({"sweep_points": 2}, ["fedavg", "prox-0.01", "prox-1"]),
        ({"sweep_points": 2, "select_points": 1}, ["fedavg", "prox-0.01"]),
        ({"select_points": 3}, ["fedavg", "prox-0.01", "prox-0.1", "prox-1"]),
    ],
)
def test_a_scale_keeps_select_points_of_each_sweep_else_sweep_points(catalog, caps, ids):
    from pathlib import Path

    from fedbench.cells import Grid
    from fedbench.outputs.sweep_rows import scale_rows

    out = _out()
    out["rows"][1]["values"] = [0.01, 0.1, 1]
    cat = _catalog(catalog)
    cat = {**cat, "scales": {**cat["scales"], "demo": {"data": "standin", "caps": caps}}}
    grid = Grid("demo", {"paper": "demo", "tables": {"table1_select": out}}, Path("demo.yaml"))
    assert [r["id"] for r in scale_rows(grid, "table1_select", cat, "demo")] == ids


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"values": [0.01, 0.5]}, r"'fedprox-mu0.5' is not in the catalog"),
        ({"values": [0.1, 0.1]}, "distinct numbers"),
        ({"values": [0.1], "algorithm": "fedprox"}, "exactly one {placeholder}"),
        ({"values": [0.1], "colour": "red"}, r"unknown key\(s\) \['colour'\]"),
    ],
)
def test_bad_sweep_rows_are_named(catalog, change, match):
    out = _out()
    out["rows"][1] = {**out["rows"][1], **change}
    with pytest.raises(ConfigError, match=match):
        KINDS["selection"].validate("g.t", out, _catalog(catalog))


def test_select_is_required_and_checked(catalog):
    out = _out()
    out["rows"][1]["values"] = [0.1]
    with pytest.raises(ConfigError, match="missing key 'select'"):
        KINDS["selection"].validate("g.t", {**out, "select": []}, _catalog(catalog))
    with pytest.raises(ConfigError, match=r"select: unknown column\(s\) \['x'\]"):
        bad = {**out, "select": [{"by": "m", "tie": "x"}]}
        KINDS["selection"].validate("g.t", bad, _catalog(catalog))
