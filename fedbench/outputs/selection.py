"""Hyperparameter-selection tables (kind `selection`, DQN-Fed's B-D13): a table whose rows are
catalog sweeps, each row `{id, label, algorithm: <name template>, values: [...]}` expanded into
one row per swept value (a row without `values` names one algorithm), all of a row's values one
group; `select` names the columns the choice reads. The rendered table writes down each group's
chosen value (`fedbench.report.tables.choices`). A scale's `caps.select_points` (else
`caps.sweep_points`) keeps that many values per row, spread along the grid (2: the first and the
last; 1: the first), so CI stays cheap."""

from __future__ import annotations

from typing import Any

from fedbench.cells import Grid, RunKey, rect_cells
from fedbench.config import ConfigError
from fedbench.outputs.base import GridView
from fedbench.outputs.sweep_rows import expanded_rows, scale_rows
from fedbench.outputs.table import TableKind
from fedbench.report.tables import TableSpec


class SelectionKind(TableKind):
    name = "selection"
    keys = (*TableKind.keys,)
    about = "a table of kind 'selection' (a hyperparameter sweep and the value it chooses)"

    def check_own(self, where: str, out: dict[str, Any], catalog: dict) -> None:
        if not out.get("select"):
            raise ConfigError(f"{where}: missing key 'select' (the columns the choice reads)")
        super().check_own(where, out, catalog)

    def check(self, where: str, out: dict[str, Any], catalog: dict) -> None:
        super().check(where, {**out, "rows": expanded_rows(where, out, catalog)}, catalog)

    def runs(
        self, grid: Grid, name: str, catalog: dict, scale: str, choices: str = "read"
    ) -> dict[tuple[str, str], list[RunKey]]:
        rows = scale_rows(grid, name, catalog, scale)
        return rect_cells(
            GridView(grid, self.section, name, rows), self.section, name, catalog, scale
        )

    def spec(self, grid: Grid, name: str, catalog: dict, scale: str) -> TableSpec:
        rows = scale_rows(grid, name, catalog, scale)
        return super().spec(GridView(grid, self.section, name, rows), name, catalog, scale)
