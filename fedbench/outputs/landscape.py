"""Loss-landscape figures: one panel per cell, the run's objective on the global test set over a
plane around its final global model. Each panel's .npz is a job of its own (the `landscape` rule,
`fedbench.engine.landscape`); the figure reads those files (`fedbench.report.landscape`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fedbench.cells import Grid, RunKey, column_labels, spec_header
from fedbench.config import ConfigError
from fedbench.metrics.landscape import LandscapeError, LandscapeSettings
from fedbench.outputs.matrix import MatrixKind
from fedbench.report.landscape import LandscapeFigureSpec, write_landscape_figure


class LandscapeKind(MatrixKind):
    name = "landscape"
    section = "figures"
    # Always the run's objective (its mean loss) on the global test set, one run a cell.
    keys = ("caption", "kind", "rows", "columns", "seeds", "landscape")
    about = "a landscape (always the mean cross-entropy on the global test set)"

    def required(self, out: dict[str, Any]) -> tuple[str, ...]:
        return ("rows", "columns")

    def check_own(self, where: str, out: dict[str, Any], catalog: dict) -> None:
        """One seed, and settings valid at every scale."""
        if not isinstance(out.get("seeds"), list) or len(out["seeds"]) != 1:
            raise ConfigError(f"{where}.seeds: a landscape is of one run per cell: give one seed")
        if not isinstance(out.get("landscape", {}), dict):
            raise ConfigError(f"{where}.landscape: expected a mapping, got {out['landscape']!r}")
        scales = (out.get("landscape") or {}).get("scales") or {}
        bad = sorted(set(scales) - set(catalog["scales"])) if isinstance(scales, dict) else []
        if bad:
            raise ConfigError(
                f"{where}.landscape.scales: unknown scale(s) {bad}; "
                f"valid: {sorted(catalog['scales'])}"
            )
        for scale in catalog["scales"]:
            try:
                LandscapeSettings.for_scale(out.get("landscape"), scale)
            except (LandscapeError, TypeError) as err:
                raise ConfigError(f"{where}.landscape (scale {scale}): {err}") from None

    def inputs(self, grid: Grid, name: str, catalog: dict, scale: str) -> list[str]:
        """Each panel's landscape file."""
        return [
            landscape_file(scale, grid.name, name, k)
            for _, k in landscape_panels(grid, name, catalog, scale)
        ]

    def spec(self, grid: Grid, name: str, catalog: dict, scale: str) -> LandscapeFigureSpec:
        return LandscapeFigureSpec(
            **spec_header(grid, self.section, name, scale),
            panels=[
                (label, Path(landscape_file(scale, grid.name, name, key)))
                for label, key in landscape_panels(grid, name, catalog, scale)
            ],
            settings=settings(grid, name, scale),
        )

    def render(self, spec: LandscapeFigureSpec, out_prefix: Path) -> list[Path]:
        return write_landscape_figure(spec, out_prefix)


def settings(grid: Grid, name: str, scale: str) -> LandscapeSettings:
    """The landscape settings of one figure at one scale."""
    return LandscapeSettings.for_scale(grid.output("figures", name).get("landscape"), scale)


def landscape_file(scale: str, paper: str, figure: str, key: RunKey, root: str = "results") -> str:
    """results/{scale}/landscapes/{paper}/{figure}/{dataset}/{partition}/{model}/{algorithm}/
    seed{seed}.npz: a run's landscape, under the figure whose settings computed it."""
    return (
        f"{root}/{scale}/landscapes/{paper}/{figure}/{key.dataset}/{key.partition}/{key.model}/"
        f"{key.algorithm}/seed{key.seed}.npz"
    )


def landscape_panels(grid: Grid, name: str, catalog: dict, scale: str) -> list[tuple[str, RunKey]]:
    """(panel label, run) per cell of a landscape figure, column by column, rows in order."""
    out = grid.output("figures", name)
    runs = LandscapeKind().runs(grid, name, catalog, scale)
    cols = column_labels(grid, "figures", name, catalog, scale)
    panels = []
    for col in cols:
        for row in out["rows"]:
            label = str(row.get("label", row["id"]))
            if len(cols) > 1:
                label += f", {col['label']}"
            panels.append((label, runs[(row["id"], col["id"])][0]))
    return panels
