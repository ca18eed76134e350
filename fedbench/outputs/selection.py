"""Hyperparameter-selection tables (kind `selection`, DQN-Fed's B-D13): a table whose rows are
catalog sweeps, each row `{id, label, algorithm: <name template>, values: [...]}` expanded into
one row per swept value (a row without `values` names one algorithm), all of a row's values one
group; `select` names the columns the choice reads. The rendered table writes down each group's
chosen value (`fedbench.report.tables.choices`). A scale's `caps.sweep_points` keeps that many
values per row, spread along the grid (2: the first and the last), so CI stays cheap."""

from __future__ import annotations

from typing import Any

from fedbench.cells import Grid, RunKey
from fedbench.config import ConfigError, nearest, sweep_fields, sweep_name, sweep_tag
from fedbench.outputs.parallel import select_points
from fedbench.outputs.table import TableKind
from fedbench.report.tables import TableSpec

ROW_KEYS = ("id", "label", "algorithm", "values", "symbol", "protocol", "group")


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
        self, grid: Grid, name: str, catalog: dict, scale: str
    ) -> dict[tuple[str, str], list[RunKey]]:
        rows = scale_rows(grid, name, catalog, scale)
        return super().runs(_Expanded(grid, self.section, name, rows), name, catalog, scale)

    def spec(self, grid: Grid, name: str, catalog: dict, scale: str) -> TableSpec:
        rows = scale_rows(grid, name, catalog, scale)
        return super().spec(_Expanded(grid, self.section, name, rows), name, catalog, scale)


class _Expanded:
    """A grid whose entry `name` has its template rows expanded (what TableKind.spec reads)."""

    def __init__(self, grid: Grid, section: str, name: str, rows: list[dict]):
        self._grid, self._section, self._name, self._rows = grid, section, name, rows

    def output(self, section: str, name: str) -> dict[str, Any]:
        out = self._grid.output(section, name)
        return (
            {**out, "rows": self._rows} if (section, name) == (self._section, self._name) else out
        )

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._grid, attr)


def scale_rows(grid: Grid, name: str, catalog: dict, scale: str) -> list[dict]:
    """The expanded rows a scale trains: every value, or `caps.sweep_points` of each row's."""
    cap = catalog["scales"][scale].get("caps", {}).get("sweep_points")
    out = grid.output("tables", name)
    return expanded_rows(f"{grid.name}.{name}", out, catalog, cap)


def expanded_rows(where: str, out: dict, catalog: dict, cap: int | None = None) -> list[dict]:
    """One row per swept value ({id: '<row id>-<value>', label: '<label> <symbol> = <value>' (the
    row's `symbol`, else the placeholder's name),
    algorithm: the variant, group: the row id}); rows without `values` as they are (own group)."""
    rows = out.get("rows")
    if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) for r in rows):
        raise ConfigError(f"{where}.rows: expected a non-empty list of mappings")
    expanded = []
    for row in rows:
        place = f"{where} row {row.get('id')!r}"
        bad = sorted(set(row) - set(ROW_KEYS))
        if bad:
            raise ConfigError(f"{place}: unknown key(s) {bad}; valid: {list(ROW_KEYS)}")
        if "values" not in row:  # one algorithm (or a row expanded already)
            expanded.append({"group": str(row.get("id")), **row})
            continue
        template, values = row.get("algorithm"), row["values"]
        try:
            fields = sweep_fields(template) if isinstance(template, str) else []
            tags = [sweep_tag(v) for v in values] if isinstance(values, list) else []
        except ValueError as err:
            raise ConfigError(f"{place}: {err}") from None
        if len(fields) != 1:
            raise ConfigError(
                f"{place}.algorithm: a catalog sweep's name template with exactly one "
                f"{{placeholder}} (the swept value), got {template!r}"
            )
        if not tags or len(set(tags)) != len(tags):
            raise ConfigError(f"{place}.values: expected a non-empty list of distinct numbers")
        points = select_points({fields[0]: values}, [fields[0]], cap)
        for point in points:
            variant = sweep_name(template, point)
            if variant not in catalog["algorithms"]:
                raise ConfigError(
                    f"{place}: {variant!r} is not in the catalog (nearest: "
                    f"{', '.join(nearest(variant, catalog['algorithms'])) or 'none'})"
                )
            tag = sweep_tag(point[fields[0]])
            extra = {k: row[k] for k in ("protocol",) if k in row}
            symbol = row.get("symbol", fields[0])
            expanded.append(
                {
                    "id": f"{row['id']}-{tag}",
                    "label": f"{row.get('label', row['id'])} {symbol} = {tag}",
                    "algorithm": variant,
                    "group": str(row["id"]),
                    **extra,
                }
            )
    return expanded
