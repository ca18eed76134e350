# Claims (issue 38): each work's sentences read three ways (the paper's printed tables, the paper
# grid's runs at this scale, the quick grid's), one page per work and one across works. A page
# reads the runs finished so far: its inputs are the files that exist at DAG build, so it never
# asks for a run (build the grids first, then `snakemake claims`).
from fedbench.claims import WORKS
from fedbench.claims.page import CLAIMS_OUT, page_inputs, page_targets


rule claims_page:
    input:
        lambda w: page_inputs(w.work, config, w.scale),
    output:
        md=f"{CLAIMS_OUT}/{{work}}.md",
        html=report(
            f"{CLAIMS_OUT}/{{work}}.html",
            caption="../report/claims.rst",
            category="claims",
            subcategory="claims ({scale} scale)",
            labels={"output": "{work}", "scale": "{scale}"},
        ),
        csv=f"{CLAIMS_OUT}/{{work}}.csv",
        json=f"{CLAIMS_OUT}/{{work}}.json",
    log:
        "logs/{scale}/claims/{work}.log",
    wildcard_constraints:
        work="|".join(WORKS),
    localrule: True
    conda:
        "../envs/fedbench.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
        gpu=0,
    script:
        "../scripts/claims.py"


rule claims_index:
    input:
        expand(
            f"{CLAIMS_OUT}/{{work}}.{{ext}}",
            work=WORKS,
            ext=("csv", "json"),
            allow_missing=True,
        ),
    output:
        md=f"{CLAIMS_OUT}/index.md",
        html=report(
            f"{CLAIMS_OUT}/index.html",
            caption="../report/claims_index.rst",
            category="claims",
            subcategory="claims ({scale} scale)",
            labels={"output": "all works", "scale": "{scale}"},
        ),
        csv=f"{CLAIMS_OUT}/index.csv",
    log:
        "logs/{scale}/claims/index.log",
    localrule: True
    conda:
        "../envs/fedbench.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
        gpu=0,
    script:
        "../scripts/claims_index.py"


# `snakemake claims` (at --config scale=..., default paper): every work's page and the index.
rule claims:
    input:
        page_targets(config.get("scale") or "paper"),
    localrule: True
