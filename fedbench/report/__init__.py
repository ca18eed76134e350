"""Reports: collect runs into tidy frames, paper tables (paper value beside ours), figures."""

from fedbench.report.collect import (
    RunData,
    RunDataError,
    collect_clients,
    collect_runs,
    load_run,
    run_series,
)
from fedbench.report.curve_spec import FigureSpec
from fedbench.report.figures import learning_curves
from fedbench.report.layout import LayoutError
from fedbench.report.tables import TableSpec, build_table, write_table

__all__ = [
    "FigureSpec",
    "LayoutError",
    "RunData",
    "RunDataError",
    "TableSpec",
    "build_table",
    "collect_clients",
    "collect_runs",
    "learning_curves",
    "load_run",
    "run_series",
    "write_table",
]
