# Helpers for the rules: the catalog and grids, validated once at DAG build.
import re

from fedbench.config import (
    data_mode,
    resolve_dataset,
    resolve_partition,
    resolve_run,
    standin_size,
)
from fedbench.data import SOURCES
from fedbench.grid import (
    OUTPUT_NAME_PATTERNS,
    cells,
    landscape_file,
    landscape_panels,
    load_workflow,
    partition_panels,
    output_files,
    resolve_scale,
)
from fedbench.metrics.landscape import LandscapeSettings
from fedbench.worker import shutdown as shutdown_warm_worker

GRIDS = load_workflow(config, "config")


def _alternatives(names):
    return "|".join(re.escape(n) for n in sorted(names))


wildcard_constraints:
    scale=_alternatives(config["scales"]),
    dataset=_alternatives(config["datasets"]),
    partition=_alternatives(config["partitions"]),
    model=_alternatives(config["models"]),
    algorithm=_alternatives(config["algorithms"]),
    paper=_alternatives(GRIDS),
    source=_alternatives(SOURCES),
    seed=r"\d+",


def grid_outputs(paper):
    """Every table and figure file of one grid at its scale."""
    grid = GRIDS[paper]
    return output_files(grid, resolve_scale(grid, config.get("scale")))


def raw_manifest(wildcards):
    """The fetched files a dataset needs (none for stand-ins and generated sets)."""
    source = config["datasets"][wildcards.dataset]["source"]
    if data_mode(config, wildcards.scale) == "standin" or not SOURCES[source].files:
        return []
    return f"resources/raw/{source}/MANIFEST.json"


def run_spec(wildcards):
    """The resolved spec of the run named by the wildcards."""
    return resolve_run(
        config,
        wildcards.scale,
        wildcards.dataset,
        wildcards.partition,
        wildcards.model,
        wildcards.algorithm,
        int(wildcards.seed),
    )


def output_runs(kind):
    """Input function: the run files of every cell of one table or figure."""

    def inputs(wildcards):
        grid = GRIDS[wildcards.paper]
        name = getattr(wildcards, kind[:-1])
        if name not in grid.outputs(kind):
            raise ValueError(
                f"{wildcards.paper} has no {kind[:-1]} {name!r}; "
                f"valid: {', '.join(grid.outputs(kind)) or 'none'}"
            )
        runs = cells(grid, kind, name, config, wildcards.scale)
        keys = dict.fromkeys(k for ks in runs.values() for k in ks)
        return [
            f"{k.folder(wildcards.scale)}/{f}"
            for k in keys
            for f in ("metrics.jsonl", "run.yaml")
        ]

    return inputs


def _landscape_figure(wildcards):
    """The grid entry of a figure of kind 'landscape' (None for any other figure)."""
    out = GRIDS[wildcards.paper].outputs("figures").get(wildcards.figure) or {}
    return out if out.get("kind") == "landscape" else None


def landscape_inputs(wildcards):
    """Input function of a figure: each panel's landscape file (none unless kind landscape)."""
    if _landscape_figure(wildcards) is None:
        return []
    grid, scale = GRIDS[wildcards.paper], wildcards.scale
    panels = landscape_panels(grid, wildcards.figure, config, scale)
    return [landscape_file(scale, grid.name, wildcards.figure, k) for _, k in panels]


def partition_inputs(wildcards):
    """Input function of a figure: the data and partition files a kind 'partition' figure draws."""
    out = GRIDS[wildcards.paper].outputs("figures").get(wildcards.figure) or {}
    if out.get("kind") != "partition":
        return []
    panels = partition_panels(
        GRIDS[wildcards.paper], wildcards.figure, config, wildcards.scale
    )
    return [f for _, data, part in panels for f in (data, part)]


def landscape_settings(wildcards):
    """The landscape rule's computing settings (span, points, batch_size) at this scale."""
    out = _landscape_figure(wildcards)
    if out is None:
        raise ValueError(
            f"{wildcards.paper}: {wildcards.figure} is not a figure of kind landscape"
        )
    return LandscapeSettings.for_scale(
        out.get("landscape"), wildcards.scale
    ).compute_fields()
