"""What tables, curve figures and landscapes share: rows x columns of cells, each cell a run
(one per seed) named by its row's and column's run fields, and a quantity (metric, protocol,
stat) set on the entry or overridden per row or column."""

from __future__ import annotations

import functools
from typing import Any

from fedbench.cells import (
    QUANTITY_KEYS,
    Grid,
    RunKey,
    as_list,
    axis_entry,
    check_names,
    check_seeds,
    column_labels,
    merge_cell,
    rect_cells,
    run_folders,
    spec_header,
)
from fedbench.config import ConfigError
from fedbench.metrics import PACK_STATS
from fedbench.metrics.distribution import VECTOR_STATS, client_stat
from fedbench.metrics.names import CLIENT_METRICS
from fedbench.outputs import chosen
from fedbench.outputs.base import GridView, OutputKind
from fedbench.report.collect import RUN, RUN_METRICS

MATRIX_KEYS = ("caption", "kind", "metric", "protocol", "stat", "percent", "rows", "columns")


class MatrixKind(OutputKind):
    """An output over rows x columns of runs. Subclasses add their keys' checks in `check_own`."""

    def required(self, out: dict[str, Any]) -> tuple[str, ...]:
        """The keys an entry must set."""
        return ("metric", "protocol", "stat", "rows", "columns")

    def check_own(self, where: str, out: dict[str, Any], catalog: dict) -> None:
        """Checks of the keys only this kind takes (none by default)."""

    def cell_rows(self, out: dict[str, Any]) -> list[dict]:
        """The rows whose cells the entry's own check resolves: those naming their algorithm
        (a chosen row's cells are checked with every value it may run: chosen.check_grid)."""
        return chosen.fixed_rows(out)

    def runs(
        self, grid: Grid, name: str, catalog: dict, scale: str, choices: str = "read"
    ) -> dict[tuple[str, str], list[RunKey]]:
        if chosen.has_chosen(grid.output(self.section, name)):
            rows = chosen.resolve_rows(grid, self.section, name, catalog, scale, choices)
            grid = GridView(grid, self.section, name, rows)
        return rect_cells(grid, self.section, name, catalog, scale)

    def inputs(self, grid: Grid, name: str, catalog: dict, scale: str) -> list[str]:
        """The choice files of the selections whose choices chosen rows run."""
        return [
            chosen.choice_path(scale, grid.name, t)
            for t in chosen.chosen_tables(grid, self.section, name)
        ]

    def check(self, where: str, out: dict[str, Any], catalog: dict) -> None:
        for axis in ("rows", "columns"):
            entries = out.get(axis, [{}])
            if (
                not isinstance(entries, list)
                or not entries
                or not all(isinstance(e, dict) for e in entries)
            ):
                raise ConfigError(
                    f"{where}.{axis}: expected a non-empty list of mappings (each with an 'id'), "
                    f"got {entries!r}"
                )
        if "seeds" in out:
            check_seeds(f"{where}.seeds", out["seeds"])
        if "percent" in out and not isinstance(out["percent"], bool):
            raise ConfigError(f"{where}.percent: expected true or false, got {out['percent']!r}")
        chosen.check_keys(where, out)
        self.check_own(where, out, catalog)
        for key in self.required(out):
            if key not in out:
                raise ConfigError(f"{where}: missing key {key!r}")
        _check_quantities(where, out)
        for axis in ("rows", "columns"):
            ids = [e.get("id") for e in out[axis]]
            if None in ids or len(set(ids)) != len(ids):
                raise ConfigError(f"{where}.{axis}: every entry needs a unique 'id'")
        for row in self.cell_rows(out):
            for col in out["columns"]:
                place = f"{where} cell ({row['id']}, {col['id']})"
                cell = merge_cell(row, col, place)
                check_names(place, cell, catalog)
                _check_validation(place, row, col, out, cell, catalog)
                _check_binary_metric(place, row, col, out, cell, catalog)


def check_panels(where: str, out: dict[str, Any]) -> None:
    """`panels`: one panel per column (default) or per cell."""
    if out.get("panels", "columns") not in ("columns", "cells"):
        raise ConfigError(f"{where}.panels: {out['panels']!r} is not one of ['columns', 'cells']")


def _check_quantities(where: str, out: dict[str, Any]) -> None:
    for entry in (out, *out["rows"], *out["columns"]):
        place = where if entry is out else f"{where} entry {entry.get('id')!r}"
        protocol, stat = entry.get("protocol"), entry.get("stat")
        valid = (*PACK_STATS, *VECTOR_STATS, "value")
        if stat is not None and stat not in valid and client_stat(stat) is None:
            raise ConfigError(
                f"{place}.stat: {stat!r} is not one of {list(valid)} or client<k> (client id "
                "k's own value)"
            )
        if protocol == "global_test" and stat not in (None, "value"):
            raise ConfigError(f"{place}.stat: protocol global_test takes stat 'value'")
        metric = entry.get("metric")
        # protocol train: the round's mean training loss, or ρ_t (training.improved_clients)
        if metric == "improved_clients" and protocol in (None, "train"):
            continue
        # protocol run: a number of run.yaml (DQN-Fed's Table 2: train_seconds)
        if protocol == RUN or (protocol is None and out.get("protocol") == RUN):
            if metric is not None and metric not in RUN_METRICS:
                raise ConfigError(
                    f"{place}.metric: protocol {RUN!r} reads run.yaml's {list(RUN_METRICS)}, "
                    f"not {metric!r}"
                )
            if stat not in (None, "value"):
                raise ConfigError(f"{place}.stat: protocol {RUN!r} takes stat 'value'")
            continue
        if metric is not None and metric not in CLIENT_METRICS:
            raise ConfigError(f"{place}.metric: {metric!r} is not one of {list(CLIENT_METRICS)}")


def _entry_value(key: str, row: dict, col: dict, out: dict) -> Any:
    """A quantity key as the cell reads it: the row's, else the column's, else the entry's."""
    return next((e[key] for e in (row, col, out) if e.get(key)), None)


def _check_binary_metric(place: str, row: dict, col: dict, out: dict, cell: dict, catalog: dict):
    """auroc is recorded for 2-class datasets only (multiclass AUROC is not computed)."""
    if _entry_value("metric", row, col, out) != "auroc":
        return
    from fedbench.data import SOURCES

    for name in as_list(cell["dataset"]):
        classes = SOURCES[catalog["datasets"][name]["source"]].num_classes
        if classes != 2:
            raise ConfigError(
                f"{place}: metric 'auroc' needs a 2-class dataset; {name!r} has {classes} classes"
            )


@functools.cache
def _val_protocols() -> frozenset[str]:
    """Protocols chosen per client on a validation split (every algorithm's `val_selections`)."""
    from fedbench.algorithms import ALGORITHMS
    from fedbench.algorithms.opt_in import PersonalEvaluation, opt_in

    return frozenset(
        n for cls in ALGORITHMS.values() for n in opt_in(cls, PersonalEvaluation).val_selections
    )


def _check_validation(place: str, row: dict, col: dict, out: dict, cell: dict, catalog: dict):
    """A protocol chosen on a validation split needs partitions that hold one out."""
    protocol = _entry_value("protocol", row, col, out)
    if protocol is None or protocol not in _val_protocols():
        return
    for name in as_list(cell["partition"]):
        if not catalog["partitions"][name].get("val_fraction", 0) > 0:
            raise ConfigError(
                f"{place}: protocol {protocol!r} chooses on a validation split, but partition "
                f"{name!r} has no val_fraction > 0"
            )


def matrix_fields(
    kind: OutputKind,
    grid: Grid,
    name: str,
    catalog: dict,
    scale: str,
    cellmap: dict[tuple[str, str], list[RunKey]] | None = None,
) -> dict[str, Any]:
    """The spec fields a table and a curve figure share: header, quantity, axes, run folders
    (of `cellmap`, the kind's runs, when the caller already resolved them)."""
    out = grid.output(kind.section, name)
    if cellmap is None:
        cellmap = kind.runs(grid, name, catalog, scale)
    # A server scalar is read as protocol "server", stat "value" (fedbench.report.collect).
    server = out.get("server")
    return {
        **spec_header(grid, kind.section, name, scale),
        "metric": server or out["metric"],
        "protocol": "server" if server else out["protocol"],
        "stat": "value" if server else out["stat"],
        "percent": bool(out.get("percent", False)),
        "rows": [axis_entry(r) for r in out["rows"]],
        "columns": column_labels(grid, kind.section, name, catalog, scale),
        "cells": run_folders(cellmap, scale),
    }


def check_server(where: str, out: dict, catalog: dict) -> None:
    """`server: <name>`: a scalar every cell's algorithm logs, read in place of a client metric."""
    from fedbench.algorithms import ALGORITHMS
    from fedbench.algorithms.opt_in import ServerOutputs, opt_in

    name = out["server"]
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{where}.server: expected a server scalar's name, got {name!r}")
    for entry in (out, *out.get("rows", []), *out.get("columns", [])):
        place = where if entry is out else f"{where} entry {entry.get('id')!r}"
        given = [k for k in QUANTITY_KEYS if k in entry]
        if given:
            raise ConfigError(
                f"{place}.{given[0]}: an output of a server scalar ({where}.server) reads no "
                f"client metric; drop {given}"
            )
    for row in chosen.fixed_rows(out):  # chosen rows: with each value (chosen.check_grid)
        for col in out.get("columns", []):
            cell = merge_cell(row, col, f"{where} cell ({row.get('id')}, {col.get('id')})")
            for algo in as_list(cell["algorithm"]):
                if algo not in catalog["algorithms"]:
                    continue  # reported later, with the valid names
                cls = ALGORITHMS[catalog["algorithms"][algo]["algorithm"]]
                scalars = opt_in(cls, ServerOutputs).server_scalars
                if name not in scalars:
                    raise ConfigError(
                        f"{where}.server: {name!r} is not logged by algorithm {algo!r} (cell "
                        f"({row.get('id')}, {col.get('id')})); {cls.name} logs "
                        f"{list(scalars)}"
                    )
