# Helpers for the rules: the catalog and grids, validated once at DAG build.
import os
import re
import sys

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
    chosen_tables,
    load_workflow,
    output_files,
    output_inputs as grid_output_inputs,
    resolve_scale,
)
from fedbench.outputs import incentive as incentive_kind
from fedbench.outputs import landscape as landscape_kind
from fedbench.worker import plan as plan_warm_worker, shutdown as shutdown_warm_worker
from fedbench.io import check_results, damaged_results_message
from fedbench.report.landing import page_inputs as landing_inputs
from fedbench.advice import print_advice as print_failed_job_advice, unknown_target

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


def output_inputs(section):
    """Input function: every file one table or figure reads (its kind says which)."""

    def inputs(wildcards):
        grid = GRIDS[wildcards.paper]
        name = getattr(wildcards, section[:-1])
        if name not in grid.outputs(section):
            raise ValueError(
                f"{wildcards.paper} has no {section[:-1]} {name!r}; "
                f"valid: {', '.join(grid.outputs(section)) or 'none'}"
            )
        # Rows that run a selection's choice (B-D13) name their runs once the choice is made:
        # wait for each choice (the checkpoint), then read it.
        for table in chosen_tables(grid, section, name):
            checkpoints.choice.get(
                scale=wildcards.scale, paper=wildcards.paper, table=table
            )
        return grid_output_inputs(grid, section, name, config, wildcards.scale)

    return inputs


def landscape_settings(wildcards):
    """The landscape rule's computing settings (span, points, batch_size) at this scale."""
    grid = GRIDS[wildcards.paper]
    out = grid.outputs("figures").get(wildcards.figure) or {}
    if out.get("kind") != "landscape":
        raise ValueError(
            f"{wildcards.paper}: {wildcards.figure} is not a figure of kind landscape"
        )
    settings = landscape_kind.settings(grid, wildcards.figure, wildcards.scale)
    return settings.compute_fields()


def incentive_settings(wildcards):
    """The incentive rule's settings: the game (or bound) block of one output of kind incentive."""
    return incentive_kind.settings_of(GRIDS[wildcards.paper], wildcards.name)


def _command_line():
    """This snakemake's command line as Snakemake's own parser reads it (None: not a snakemake
    command line, e.g. the API)."""
    from snakemake.cli import get_argument_parser

    try:
        return get_argument_parser().parse_known_args(sys.argv[1:])[0]
    except SystemExit:
        return None


def check_results_unchanged():
    """Before any job: result files changed since the workflow wrote them (fedbench.io's content
    records) stop the run naming them, so no rerun deletes a good output; a file written again
    with the same bytes gets its first time back, so nothing made from it reruns. Skipped in a
    job's own process (a cluster job re-reads the Snakefile while others write)."""
    args = _command_line()
    if (
        args is None
        or getattr(args, "target_jobs", None)
        or getattr(args, "forceall", False)
    ):
        return
    damaged = check_results(
        "results", forced=list(getattr(args, "forcerun", None) or [])
    )
    if damaged:
        raise ValueError(damaged_results_message(damaged))


def check_target_names(workflow):
    """Refuse a requested target that names no rule and no file, naming the nearest rules (the
    targets from Snakemake's own command-line parser: the DAG settings do not exist yet here).
    """
    args = _command_line()
    if args is None:  # not a snakemake command line (the API, a job's own process)
        return
    message = unknown_target(list(args.targets or []), [r.name for r in workflow.rules])
    if message:
        raise ValueError(message)


def drop_unneeded_temp(workflow):
    """Snakemake keeps a target job's temp outputs: a run forced by its metrics.jsonl kept its
    params.pt (~800 KB) that a grid run deletes once no landscape job needs it. Delete those of
    the run's target jobs that no requested file names (every consumer has run by now).
    """
    from snakemake.io import is_flagged

    dag = workflow.dag
    requested = {str(f) for f in dag.targetfiles}
    for job in dag.targetjobs:
        for f in job.output:
            if is_flagged(f, "temp") and str(f) not in requested and os.path.isfile(f):
                os.remove(f)
