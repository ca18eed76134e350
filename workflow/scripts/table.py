"""Snakemake adapter: one paper table (paper value | ours | delta) as .md, .tex and .csv."""

from fedbench.worker import delegate

delegate(snakemake, __file__)  # noqa: F821  (in the warm worker when one is up; exits there)


from pathlib import Path

from fedbench.grid import table_spec
from fedbench.papers import load_paper_values
from fedbench.report import build_table, write_table

sm = snakemake  # noqa: F821
spec = table_spec(sm.params.grid, sm.wildcards.table, sm.config, sm.wildcards.scale)
table = build_table(spec, load_paper_values(sm.wildcards.paper))
write_table(table, spec, Path(sm.output.md).with_suffix(""))
