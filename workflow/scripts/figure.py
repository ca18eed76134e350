"""Snakemake adapter: one paper figure as .png and .pdf."""

from pathlib import Path

from fedbench.grid import figure_spec
from fedbench.report import learning_curves

sm = snakemake  # noqa: F821
spec = figure_spec(sm.params.grid, sm.wildcards.figure, sm.config, sm.wildcards.scale)
learning_curves(spec, Path(sm.output.png).with_suffix(""))
