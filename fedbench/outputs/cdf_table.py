"""AAggFF's Table 3.3 (thesis §5.1, spec aaggff.md §7): the transformed responses CDF(F_i / F̄) of a
few example losses under each of the six CDFs, computed in closed form; no run is read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from fedbench.algorithms.aaggff import CODE_INDEX, cdf
from fedbench.cells import Grid, RunKey, spec_header
from fedbench.config import ConfigError
from fedbench.outputs.base import OutputKind, check_axes
from fedbench.report.computed import ComputedTableSpec, write_computed_table

# Table 3.3's example losses and its rows, in the thesis's order.
TABLE3_3_LOSSES = (0.01, 0.10, 0.02)
TABLE3_3_ROWS = ("weibull", "frechet", "gumbel", "exponential", "logistic", "normal")


def transformed_responses(
    losses=TABLE3_3_LOSSES, rows=TABLE3_3_ROWS, input_decimals: int | None = 2
) -> dict[str, list[float]]:
    """CDF(F_i / F̄) per CDF (F̄ the plain mean). The thesis rounds the CDF inputs to two
    decimals (0.23, 2.31, 0.46) before transforming; `input_decimals=None` uses the exact ratios
    (the Normal row's third value then rounds to 0.30, not the printed 0.29)."""
    f = np.asarray(losses, dtype=np.float64)
    x = f / f.mean()
    if input_decimals is not None:
        x = np.round(x, input_decimals)
    return {name: [float(v) for v in cdf(name, x)] for name in rows}


class CdfResponsesKind(OutputKind):
    name = "cdf_responses"
    section = "tables"
    keys = ("caption", "kind", "losses", "input_decimals", "decimals", "rows", "columns")
    about = "a table of CDF-transformed responses (computed, no runs)"

    def check(self, where: str, out: dict[str, Any], catalog: dict) -> None:
        """Positive losses, one column per loss, rows named by CDF."""
        losses = out.get("losses")
        if not (isinstance(losses, list) and losses and all(_positive(v) for v in losses)):
            raise ConfigError(f"{where}.losses: expected a non-empty list of losses > 0")
        for key, default in (("input_decimals", 2), ("decimals", 2)):
            value = out.get(key, default)
            if key == "input_decimals" and value is None:
                continue
            if isinstance(value, bool) or not (isinstance(value, int) and 0 <= value <= 10):
                raise ConfigError(f"{where}.{key}: expected an integer in 0..10, got {value!r}")
        check_axes(where, out)
        bad = [r["id"] for r in out["rows"] if r["id"] not in CODE_INDEX]
        if bad:
            raise ConfigError(f"{where}.rows: {bad} are not CDFs; valid: {list(CODE_INDEX)}")
        if len(out["columns"]) != len(losses):
            raise ConfigError(
                f"{where}.columns: one column per loss ({len(losses)}), got {len(out['columns'])}"
            )

    def runs(
        self, grid: Grid, name: str, catalog: dict, scale: str, choices: str = "read"
    ) -> dict[tuple[str, str], list[RunKey]]:
        return {}

    def spec(self, grid: Grid, name: str, catalog: dict, scale: str) -> ComputedTableSpec:
        out = grid.output(self.section, name)
        rows = [{"id": r["id"], "label": r.get("label", r["id"])} for r in out["rows"]]
        cols = [{"id": c["id"], "label": c.get("label", c["id"])} for c in out["columns"]]
        digits = out.get("input_decimals", 2)
        values = transformed_responses(out["losses"], [r["id"] for r in rows], digits)
        inputs = "the exact ratios" if digits is None else f"the ratios rounded to {digits} dp"
        return ComputedTableSpec(
            **spec_header(grid, self.section, name, scale),
            rows=rows,
            columns=cols,
            values={
                (r["id"], c["id"]): values[r["id"]][j] for r in rows for j, c in enumerate(cols)
            },
            decimals=out.get("decimals", 2),
            method=(
                f"CDF(F_i / F̄) of F = {tuple(out['losses'])}, F̄ their mean, at {inputs} "
                "(fedbench.algorithms.aaggff.cdf, the thesis's CDFs)"
            ),
        )

    def render(self, spec: ComputedTableSpec, out_prefix: Path) -> list[Path]:
        from fedbench.papers import load_paper_values

        return write_computed_table(spec, load_paper_values(spec.paper), out_prefix)


def _positive(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0
