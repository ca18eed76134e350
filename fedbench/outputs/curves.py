"""Curve figures: per-round learning curves (`rounds`: a client metric or a server scalar,
optionally smoothed) and accuracy over the mixing weight λ (`lambda`, SuPerFed); drawn by
`fedbench.report.figures`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fedbench.cells import Grid
from fedbench.config import ConfigError
from fedbench.outputs.matrix import (
    MATRIX_KEYS,
    MatrixKind,
    check_panels,
    check_server,
    matrix_fields,
)
from fedbench.report.figures import FigureSpec, learning_curves
from fedbench.report.smooth import SAVGOL_KEYS, SMOOTHERS, Savgol


class CurvesKind(MatrixKind):
    """What the two curve kinds share: their spec and drawing."""

    section = "figures"

    def spec(self, grid: Grid, name: str, catalog: dict, scale: str) -> FigureSpec:
        out = grid.output(self.section, name)
        return FigureSpec(
            **matrix_fields(self, grid, name, catalog, scale),
            kind=self.name,
            panels=out.get("panels", "columns"),
            smooth=parse_smooth(f"{grid.name}.{name}", out.get("smooth")),
        )

    def render(self, spec: FigureSpec, out_prefix: Path) -> list[Path]:
        return learning_curves(spec, out_prefix)


class RoundsKind(CurvesKind):
    name = "rounds"
    keys = (*MATRIX_KEYS, "seeds", "panels", "server", "smooth")
    about = "a figure of kind 'rounds'"

    def required(self, out: dict[str, Any]) -> tuple[str, ...]:
        """A server scalar's figure names `server` in place of metric, protocol and stat."""
        return ("rows", "columns") if "server" in out else super().required(out)

    def check_own(self, where: str, out: dict[str, Any], catalog: dict) -> None:
        parse_smooth(where, out.get("smooth"))
        if "server" in out:
            check_server(where, out, catalog)
        check_panels(where, out)


class LambdaKind(CurvesKind):
    name = "lambda"
    keys = (*MATRIX_KEYS, "seeds", "panels")
    about = "a figure of kind 'lambda'"

    def check_own(self, where: str, out: dict[str, Any], catalog: dict) -> None:
        check_panels(where, out)


def parse_smooth(where: str, raw: Any) -> Savgol | None:
    """`{savgol: {window: odd int >= 1, order: 0 <= int < window}}` or None; errors name keys."""
    if raw is None:
        return None
    if not isinstance(raw, dict) or len(raw) != 1:
        raise ConfigError(
            f"{where}.smooth: expected one smoother as a mapping, e.g. "
            f"{{savgol: {{window: 9, order: 2}}}}; valid smoothers: {list(SMOOTHERS)}; got {raw!r}"
        )
    ((name, params),) = raw.items()
    if name not in SMOOTHERS:
        raise ConfigError(f"{where}.smooth: unknown smoother {name!r}; valid: {list(SMOOTHERS)}")
    place = f"{where}.smooth.{name}"
    if not isinstance(params, dict):
        raise ConfigError(f"{place}: expected a mapping with {list(SAVGOL_KEYS)}, got {params!r}")
    unknown = sorted(set(params) - set(SAVGOL_KEYS))
    if unknown:
        raise ConfigError(f"{place}: unknown key(s) {unknown}; valid: {list(SAVGOL_KEYS)}")
    for key in SAVGOL_KEYS:
        value = params.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ConfigError(f"{place}.{key}: expected an integer >= 0, got {value!r}")
    window, order = params["window"], params["order"]
    if window < 1 or window % 2 == 0:
        raise ConfigError(f"{place}.window: expected an odd integer >= 1, got {window!r}")
    if order >= window:
        raise ConfigError(f"{place}.order: must be below the window ({window}), got {order!r}")
    return Savgol(window, order)
