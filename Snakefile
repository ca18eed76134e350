# fedbench: fetch -> prepare -> partition -> train -> tables / figures / report.
# Targets: `all` (every grid), one rule per paper grid (e.g. `quick`), or any output file.
from snakemake.utils import min_version, validate

from fedbench.config import check_top_level

min_version("8.0")


configfile: "config/config.yaml"


# Keys and scalar values first, in one line naming the key and the valid ones (`--config scael=x`);
# then the schema, for the structure below them.
check_top_level(config)
validate(config, "workflow/schemas/config.schema.yaml")


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/claims.smk"


# The warm worker (fedbench/worker.py) starts only when the run plans more than one script job,
# and outlives no workflow: it stops once its running jobs end.
onstart:
    plan_warm_worker(workflow)


onsuccess:
    shutdown_warm_worker()
    drop_unneeded_temp(workflow)


# A failed run ends with each failed job's "what to do" line, read from its log (fedbench.advice).
onerror:
    shutdown_warm_worker()
    print_failed_job_advice(log)


rule all:
    default_target: True
    input:
        [f for g in GRIDS for f in grid_outputs(g)],


# `snakemake quikc`: the nearest target rules, not Snakemake's bare "No rule to produce quikc".
check_target_names(workflow)
# A result file damaged since the workflow wrote it stops the run before any job (fedbench.io).
check_results_unchanged()
