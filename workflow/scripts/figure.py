"""Snakemake adapter: one paper figure as .png and .pdf (curves, landscapes, partitions, sweeps)."""

from fedbench.worker import delegate

delegate(snakemake, __file__)  # noqa: F821  (in the warm worker when one is up; exits there)


from pathlib import Path

from fedbench.grid import (
    deviation_spec,
    figure_spec,
    landscape_spec,
    parallel_spec,
    partition_spec,
)
from fedbench.report import learning_curves
from fedbench.report.deviations import write_deviation_figure
from fedbench.report.landscape import write_landscape_figure
from fedbench.report.parallel import write_parallel_figure
from fedbench.report.partitions import write_partition_figure

sm = snakemake  # noqa: F821
grid, name, scale = sm.params.grid, sm.wildcards.figure, sm.wildcards.scale
out = Path(sm.output.png).with_suffix("")
kind = grid.outputs("figures")[name].get("kind")
if kind == "landscape":
    write_landscape_figure(landscape_spec(grid, name, sm.config, scale), out)
elif kind == "partition":
    write_partition_figure(partition_spec(grid, name, sm.config, scale), out)
elif kind == "parallel":
    write_parallel_figure(parallel_spec(grid, name, sm.config, scale), out)
elif kind == "deviation":
    write_deviation_figure(deviation_spec(grid, name, sm.config, scale), out)
else:
    learning_curves(figure_spec(grid, name, sm.config, scale), out)
