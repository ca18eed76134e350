"""Per-class loss-deviation figures of one client's personalised model (pFedBreD Figs 3 and 9):
one run per cell (method row x setting column), its final `per_class_loss` record
(`fedbench.report.deviations`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fedbench.cells import (
    Grid,
    axis_entry,
    check_names,
    column_labels,
    merge_cell,
    spec_header,
)
from fedbench.config import ConfigError
from fedbench.outputs.base import OutputKind, check_axes
from fedbench.report.deviations import DeviationFigureSpec, write_deviation_figure

AXIS_KEYS = ("id", "label", "dataset", "partition", "model", "algorithm")


class DeviationKind(OutputKind):
    name = "deviation"
    section = "figures"
    keys = ("caption", "kind", "protocol", "client", "seeds", "rows", "columns")
    about = "a deviation figure (per-class loss deviations of one client)"

    def check(self, where: str, out: dict[str, Any], catalog: dict) -> None:
        """One seed, a client index, and rows x columns whose cells name known runs."""
        seeds = out.get("seeds")
        if not isinstance(seeds, list) or len(seeds) != 1 or not _is_index(seeds[0]):
            raise ConfigError(
                f"{where}.seeds: a deviation figure draws one run per cell: give one seed, e.g. "
                f"[0] (got {seeds!r})"
            )
        if not _is_index(out.get("client", 0)):
            raise ConfigError(
                f"{where}.client: expected a client index >= 0, got {out['client']!r}"
            )
        if not isinstance(out.get("protocol", "personal"), str):
            raise ConfigError(
                f"{where}.protocol: expected a protocol name, got {out['protocol']!r}"
            )
        check_axes(where, out)
        for axis in ("rows", "columns"):
            for e in out[axis]:
                bad = sorted(set(e) - set(AXIS_KEYS))
                if bad:
                    raise ConfigError(
                        f"{where} {axis[:-1]} {e['id']!r}: unknown key(s) {bad}; valid: {AXIS_KEYS}"
                    )
        for row in out["rows"]:
            for col in out["columns"]:
                place = f"{where} cell ({row['id']}, {col['id']})"
                check_names(place, merge_cell(row, col, place), catalog)

    def spec(self, grid: Grid, name: str, catalog: dict, scale: str) -> DeviationFigureSpec:
        out = grid.output(self.section, name)
        return DeviationFigureSpec(
            **spec_header(grid, self.section, name, scale),
            protocol=out.get("protocol", "personal"),
            client=int(out.get("client", 0)),
            seed=int(out["seeds"][0]),
            rows=[axis_entry(r) for r in out["rows"]],
            columns=column_labels(grid, self.section, name, catalog, scale),
            cells={
                cell: Path(keys[0].folder(scale))
                for cell, keys in self.runs(grid, name, catalog, scale).items()
            },
        )

    def render(self, spec: DeviationFigureSpec, out_prefix: Path) -> list[Path]:
        return write_deviation_figure(spec, out_prefix)


def _is_index(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0
