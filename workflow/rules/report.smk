PAPER_OUT = "results/{scale}/papers/{paper}"


rule table:
    input:
        output_inputs("tables"),
    output:
        md=report(
            f"{PAPER_OUT}/{{table}}.md",
            category="{paper}",
            subcategory="tables ({scale} scale)",
            labels={"paper": "{paper}", "output": "{table}", "scale": "{scale}"},
        ),
        tex=f"{PAPER_OUT}/{{table}}.tex",
        csv=f"{PAPER_OUT}/{{table}}.csv",
    log:
        "logs/{scale}/table/{paper}/{table}.log",
    wildcard_constraints:
        table=OUTPUT_NAME_PATTERNS["tables"],
    localrule: True
    conda:
        "../envs/fedbench.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
        gpu=0,
    params:
        grid=lambda w: GRIDS[w.paper],
        section="tables",
        name=lambda w: w.table,
    script:
        "../scripts/output.py"


rule figure:
    input:
        output_inputs("figures"),
    output:
        png=report(
            f"{PAPER_OUT}/{{figure}}.png",
            category="{paper}",
            subcategory="figures ({scale} scale)",
            labels={"paper": "{paper}", "output": "{figure}", "scale": "{scale}"},
        ),
        pdf=f"{PAPER_OUT}/{{figure}}.pdf",
    log:
        "logs/{scale}/figure/{paper}/{figure}.log",
    wildcard_constraints:
        figure=OUTPUT_NAME_PATTERNS["figures"],
    localrule: True
    conda:
        "../envs/fedbench.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
        gpu=0,
    params:
        grid=lambda w: GRIDS[w.paper],
        section="figures",
        name=lambda w: w.figure,
    script:
        "../scripts/output.py"


# A loss landscape of one run's final global model, with the settings of the figure that shows it.
rule landscape:
    input:
        data="results/{scale}/data/{dataset}.npz",
        run=f"results/{{scale}}/runs/{RUN}/run.yaml",
        params=f"results/{{scale}}/runs/{RUN}/params.pt",
    output:
        f"results/{{scale}}/landscapes/{{paper}}/{{figure}}/{RUN}.npz",
    log:
        f"logs/{{scale}}/landscape/{{paper}}/{{figure}}/{RUN}.log",
    benchmark:
        f"benchmarks/{{scale}}/landscape/{{paper}}/{{figure}}/{RUN}.tsv"
    wildcard_constraints:
        figure=r"figure[0-9_]+",
    conda:
        "../envs/fedbench.yaml"
    threads: config["threads"]
    resources:
        mem_mb=4000,
        runtime=120,
        gpu=config["gpus_per_run"],
    params:
        settings=landscape_settings,
        device=config["device"],
    script:
        "../scripts/landscape.py"


# One target rule per grid, named after it: `snakemake --cores N quick`, `... superfed`.
for _paper in GRIDS:

    rule:
        name:
            _paper
        input:
            grid_outputs(_paper),
        localrule: True
