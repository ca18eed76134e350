"""A selection table's rows (kind `selection`, DQN-Fed's B-D13): catalog sweeps, each row
`{id, label, algorithm: <name template>, values: [...]}` expanded into one row per swept value
(a row without `values` names one algorithm), all of a row's values one group. Read by the kind
(`fedbench.outputs.selection`) and by the rows that run its choice (`fedbench.outputs.chosen`).
"""

from __future__ import annotations

from fedbench.cells import Grid
from fedbench.config import ConfigError, nearest, sweep_fields, sweep_name, sweep_tag
from fedbench.outputs.parallel import select_points

ROW_KEYS = ("id", "label", "algorithm", "values", "symbol", "protocol", "group")


def scale_rows(grid: Grid, name: str, catalog: dict, scale: str) -> list[dict]:
    """The expanded rows a scale trains: every value, or `caps.select_points` (else
    `caps.sweep_points`) of each row's."""
    caps = catalog["scales"][scale].get("caps", {})
    cap = caps.get("select_points", caps.get("sweep_points"))
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
