PAPER_OUT = "results/{scale}/papers/{paper}"


# The report shows each table as its .html (a sortable table with the header notes; Snakemake's
# report shows HTML inline, while .md, .tex and .csv would only be links to download) and offers
# the .csv, the tidy per-cell values, under its own subcategory. "output" is the first label: the
# report lists one line per output (a later label with two values would become a toggle).
rule table:
    input:
        output_inputs("tables"),
    output:
        md=f"{PAPER_OUT}/{{table}}.md",
        tex=f"{PAPER_OUT}/{{table}}.tex",
        csv=report(
            f"{PAPER_OUT}/{{table}}.csv",
            caption="../report/table_csv.rst",
            category="{paper}",
            subcategory="table data, CSV ({scale} scale)",
            labels={"output": "{table}", "paper": "{paper}", "scale": "{scale}"},
        ),
        json=f"{PAPER_OUT}/{{table}}.json",
        html=report(
            f"{PAPER_OUT}/{{table}}.html",
            caption="../report/table.rst",
            category="{paper}",
            subcategory="tables ({scale} scale)",
            labels={"output": "{table}", "paper": "{paper}", "scale": "{scale}"},
        ),
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


# What a selection table (kind selection, DQN-Fed's B-D13) chose, once its runs are in: the rows
# of other tables that run its choice (`chosen`) name their runs from this file, so it is a
# checkpoint: the DAG learns those runs after it.
checkpoint choice:
    input:
        output_inputs("tables"),
    output:
        "results/{scale}/choices/{paper}/{table}.json",
    log:
        "logs/{scale}/choice/{paper}/{table}.log",
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
        name=lambda w: w.table,
    script:
        "../scripts/choice.py"


rule figure:
    input:
        output_inputs("figures"),
    output:
        png=report(
            f"{PAPER_OUT}/{{figure}}.png",
            category="{paper}",
            subcategory="figures ({scale} scale)",
            labels={"output": "{figure}", "paper": "{paper}", "scale": "{scale}"},
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


# The numbers of one incentive-game output (the q-FFL preprint's game and bound): computed, not
# trained; the figure or table rule reads them.
rule incentive:
    output:
        "results/{scale}/incentive/{paper}/{name}.json",
    log:
        "logs/{scale}/incentive/{paper}/{name}.log",
    wildcard_constraints:
        name=r"(table|figure)[0-9][0-9a-z_]*",
    localrule: True
    conda:
        "../envs/fedbench.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
        gpu=0,
    params:
        settings=incentive_settings,
    script:
        "../scripts/incentive.py"


# One target rule per grid, named after it: `snakemake --cores N quick`, `... superfed`.
for _paper in GRIDS:

    rule:
        name:
            _paper
        input:
            grid_outputs(_paper),
        localrule: True


# A scale's landing page: every grid built there, tables inline, figures embedded, the claims.
# It reads what exists at DAG build (like the claims pages): build the grids first, then
# `snakemake index` (at --config scale=...). "Overview" sorts before the grids' categories.
rule landing:
    input:
        lambda w: landing_inputs(w.scale),
    output:
        report(
            "results/{scale}/index.html",
            caption="../report/landing.rst",
            category="Overview",
            subcategory="results ({scale} scale)",
            labels={"output": "index", "scale": "{scale}"},
        ),
    log:
        "logs/{scale}/landing.log",
    localrule: True
    conda:
        "../envs/fedbench.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
        gpu=0,
    script:
        "../scripts/landing.py"


# `snakemake index` (at --config scale=..., default paper): the landing page of that scale.
rule index:
    input:
        f"results/{config.get('scale') or 'paper'}/index.html",
    localrule: True
