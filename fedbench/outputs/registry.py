"""The output kinds by name: one line per kind, each imported on first lookup."""

from __future__ import annotations

from typing import Any

from fedbench.config import ConfigError
from fedbench.registry import LazyRegistry

KINDS: LazyRegistry[Any] = LazyRegistry(
    {
        "table": "fedbench.outputs.table:TableKind",
        "cdf_responses": "fedbench.outputs.cdf_table:CdfResponsesKind",
        "rounds": "fedbench.outputs.curves:RoundsKind",
        "lambda": "fedbench.outputs.curves:LambdaKind",
        "landscape": "fedbench.outputs.landscape:LandscapeKind",
        "partition": "fedbench.outputs.partition:PartitionKind",
        "parallel": "fedbench.outputs.parallel:ParallelKind",
        "deviation": "fedbench.outputs.deviation:DeviationKind",
        "image_grid": "fedbench.outputs.image_grid:ImageGridKind",
        "incentive": "fedbench.outputs.incentive:IncentiveKind",
        "incentive_table": "fedbench.outputs.incentive:IncentiveTableKind",
        "sweep_lines": "fedbench.outputs.sweep_lines:SweepLinesKind",
        "client_histogram": "fedbench.outputs.client_histogram:ClientHistogramKind",
        "selection": "fedbench.outputs.selection:SelectionKind",
    },
    build=lambda cls: cls(),
)
DEFAULT_KIND = {"tables": "table", "figures": "rounds"}


def kind_of(section: str, out: dict[str, Any], where: str = "") -> Any:
    """The kind of one grid entry of `section` ("tables" or "figures"); errors name the entry."""
    name = out.get("kind", DEFAULT_KIND[section])
    if isinstance(name, str) and name in KINDS and KINDS[name].section == section:
        return KINDS[name]
    valid = [k for k in KINDS if KINDS[k].section == section]
    if isinstance(name, str) and name in KINDS:
        raise ConfigError(
            f"{where}.kind: {name!r} is a kind of {KINDS[name].section}, not of {section}; "
            f"valid here: {valid}"
        )
    raise ConfigError(f"{where}.kind: {name!r} is not one of {valid}")


def owners(key: str) -> list[Any]:
    """The kinds whose grid entries take `key`."""
    return [KINDS[k] for k in KINDS if key in KINDS[k].keys]
