"""A copy of the workflow in a temporary folder, for tests that run `snakemake` end to end: the
Snakefile, the rules, the catalog and only the grids a test needs, and the environment a user's
shell gives `snakemake` (this interpreter's, importing this checkout)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def copy_workflow(ws: Path, grids: dict[str, Path | str]) -> None:
    """Snakefile, workflow/, config/config.yaml and config/catalog/ into `ws`; each grid as
    config/papers/NAME.yaml (a file to copy, or the grid's YAML text)."""
    shutil.copy(ROOT / "Snakefile", ws)
    shutil.copytree(ROOT / "workflow", ws / "workflow")
    (ws / "config" / "papers").mkdir(parents=True)
    shutil.copy(ROOT / "config" / "config.yaml", ws / "config")
    shutil.copytree(ROOT / "config" / "catalog", ws / "config" / "catalog")
    for name, grid in grids.items():
        target = ws / "config" / "papers" / f"{name}.yaml"
        if isinstance(grid, Path):
            shutil.copy(grid, target)
        else:
            target.write_text(grid)


def snakemake_env(warm: Path) -> dict[str, str]:
    """The environment: `snakemake` and `python` from this venv, this checkout importable, the
    warm worker's sockets in `warm` and the worker off (a test switches it on)."""
    return {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(ROOT),
        "FEDBENCH_WARM_DIR": str(warm),
        "FEDBENCH_WARM_WORKER": "0",
    }
