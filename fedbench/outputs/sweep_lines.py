"""Figures of client statistics against one swept hyperparameter (kind `sweep_lines`; the q-FFL
preprint's QF-6): each row names a catalog sweep by its name template with one placeholder
(`qffl-localpow-q{q}`), drawn as a line over `values`; each column a (dataset, partition, model);
each entry of `quantities` a row of panels (a metric and its stat across clients). Drawn by
`fedbench.report.sweep_lines` from the runs' final round."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fedbench.cells import (
    Grid,
    RunKey,
    check_names,
    check_seeds,
    choose_dataset,
    column_labels,
    output_seeds,
    spec_header,
)
from fedbench.config import ConfigError, nearest, sweep_fields, sweep_name, sweep_tag
from fedbench.metrics import PACK_STATS
from fedbench.metrics.names import CLIENT_METRICS
from fedbench.outputs.base import OutputKind
from fedbench.report.sweep_lines import SweepFigureSpec, SweepQuantity, write_sweep_figure

ROW_KEYS = ("id", "label", "algorithm")
COLUMN_KEYS = ("id", "label", "dataset", "partition", "model")
QUANTITY_KEYS = ("metric", "stat", "label")


class SweepLinesKind(OutputKind):
    name = "sweep_lines"
    section = "figures"
    keys = (
        "caption", "kind", "axis", "values", "protocol", "percent", "seeds", "rows", "columns",
        "quantities",
    )  # fmt: skip
    about = "a figure of kind 'sweep_lines' (client statistics against one swept value)"

    def check(self, where: str, out: dict[str, Any], catalog: dict) -> None:
        """One placeholder per row template, every swept variant in the catalog, known
        metrics and stats, and (dataset, partition, model) columns."""
        for key in ("axis", "values", "rows", "columns", "quantities"):
            if key not in out:
                raise ConfigError(f"{where}: missing key {key!r}")
        values = out["values"]
        if not isinstance(values, list) or not values:
            raise ConfigError(f"{where}.values: expected a non-empty list of numbers")
        try:
            tags = [sweep_tag(v) for v in values]
        except ValueError as err:
            raise ConfigError(f"{where}.values: {err}") from None
        if len(set(tags)) != len(tags):
            raise ConfigError(f"{where}.values: repeated value(s) in {values!r}")
        if "seeds" in out:
            check_seeds(f"{where}.seeds", out["seeds"])
        if "percent" in out and not isinstance(out["percent"], bool):
            raise ConfigError(f"{where}.percent: expected true or false, got {out['percent']!r}")
        if not isinstance(out.get("protocol", "global"), str):
            raise ConfigError(f"{where}.protocol: expected a protocol name (e.g. global)")
        for axis, keys in (("rows", ROW_KEYS), ("columns", COLUMN_KEYS), ("quantities", None)):
            entries = out[axis]
            if not isinstance(entries, list) or not entries:
                raise ConfigError(f"{where}.{axis}: expected a non-empty list of mappings")
            if keys is None:
                continue
            ids = [e.get("id") if isinstance(e, dict) else None for e in entries]
            if None in ids or len(set(ids)) != len(ids):
                raise ConfigError(f"{where}.{axis}: every entry needs a unique 'id'")
            for e in entries:
                bad = sorted(set(e) - set(keys))
                if bad:
                    raise ConfigError(
                        f"{where} {axis[:-1]} {e['id']!r}: unknown key(s) {bad}; valid: {keys}"
                    )
        for q in out["quantities"]:
            if not isinstance(q, dict) or sorted(set(q) - set(QUANTITY_KEYS)):
                raise ConfigError(
                    f"{where}.quantities: each entry a mapping of {QUANTITY_KEYS}, got {q!r}"
                )
            if q.get("metric") not in CLIENT_METRICS:
                raise ConfigError(
                    f"{where}.quantities: metric {q.get('metric')!r} is not one of "
                    f"{list(CLIENT_METRICS)}"
                )
            if q.get("stat") not in PACK_STATS:
                raise ConfigError(
                    f"{where}.quantities: stat {q.get('stat')!r} is not one of {list(PACK_STATS)}"
                )
        for col in out["columns"]:
            place = f"{where} column {col['id']!r}"
            check_names(place, {f: col.get(f) for f in ("dataset", "partition", "model")}, catalog)
        for row in out["rows"]:
            template = row.get("algorithm")
            place = f"{where} row {row['id']!r}.algorithm"
            if not isinstance(template, str):
                raise ConfigError(f"{place}: a catalog sweep's name template, got {template!r}")
            try:
                fields = sweep_fields(template)
            except ValueError as err:
                raise ConfigError(f"{place}: {err}") from None
            if len(fields) != 1:
                raise ConfigError(
                    f"{place}: {template!r} must have exactly one {{placeholder}} (the swept "
                    f"value), got {fields}"
                )
            for v in values:
                variant = sweep_name(template, {fields[0]: v})
                if variant not in catalog["algorithms"]:
                    raise ConfigError(
                        f"{place}: {variant!r} is not in the catalog (nearest: "
                        f"{', '.join(nearest(variant, catalog['algorithms'])) or 'none'})"
                    )

    def runs(
        self, grid: Grid, name: str, catalog: dict, scale: str, choices: str = "read"
    ) -> dict[tuple[str, str], list[RunKey]]:
        """(row id, column id) -> every run of the row's line in that column (all values)."""
        points = sweep_cells(grid, name, catalog, scale)
        out: dict[tuple[str, str], list[RunKey]] = {}
        for (row, col, _i), keys in points.items():
            out.setdefault((row, col), []).extend(keys)
        return out

    def spec(self, grid: Grid, name: str, catalog: dict, scale: str) -> SweepFigureSpec:
        out = grid.output(self.section, name)
        labels = column_labels(grid, self.section, name, catalog, scale)
        return SweepFigureSpec(
            **spec_header(grid, self.section, name, scale),
            axis=str(out["axis"]),
            values=tuple(float(v) for v in out["values"]),
            protocol=str(out.get("protocol", "global")),
            percent=bool(out.get("percent", False)),
            rows=tuple((str(r["id"]), str(r.get("label", r["id"]))) for r in out["rows"]),
            columns=tuple((str(c["id"]), str(c["label"])) for c in labels),
            quantities=tuple(
                SweepQuantity(
                    q["metric"], q["stat"], str(q.get("label", f"{q['metric']} {q['stat']}"))
                )
                for q in out["quantities"]
            ),
            cells={
                cell: tuple(Path(k.folder(scale)) for k in keys)
                for cell, keys in sweep_cells(grid, name, catalog, scale).items()
            },
        )

    def render(self, spec: SweepFigureSpec, out_prefix: Path) -> list[Path]:
        return write_sweep_figure(spec, out_prefix)


def sweep_cells(
    grid: Grid, name: str, catalog: dict, scale: str
) -> dict[tuple[str, str, int], list[RunKey]]:
    """(row id, column id, value index) -> the runs (one per seed) of that point."""
    out = grid.output("figures", name)
    seeds = output_seeds(grid, out, catalog, scale)
    result = {}
    for col in out["columns"]:
        dataset = choose_dataset(col["dataset"], catalog, scale)
        for row in out["rows"]:
            (field,) = sweep_fields(row["algorithm"])
            for i, v in enumerate(out["values"]):
                algo = sweep_name(row["algorithm"], {field: v})
                result[(row["id"], col["id"], i)] = [
                    RunKey(dataset, col["partition"], col["model"], algo, int(s)) for s in seeds
                ]
    return result
