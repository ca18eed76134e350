"""Import every module of fedbench, and find every package any of them imports, even inside a
function (start-up keeps heavy imports local); fail naming each module or package that is missing.

Run right after `pip install -e .` without extras (the Makefile's set-up does), so a dependency the
code imports but pyproject.toml does not declare fails the build instead of working by accident.
"""

import ast
import importlib
import importlib.util
import pkgutil
import sys
import traceback
from pathlib import Path

import fedbench

failed = []
names = [m.name for m in pkgutil.walk_packages(fedbench.__path__, "fedbench.")]
for name in names:
    try:
        importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001 - report every module, then fail once
        failed.append(name)
        print(f"cannot import {name}: {exc!r}", file=sys.stderr)
        traceback.print_exc(limit=-2)

imported: dict[str, str] = {}  # top-level package -> first module that imports it
for path in sorted(Path(fedbench.__path__[0]).rglob("*.py")):
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            tops = [alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            tops = [node.module.split(".")[0]]
        else:
            continue
        for top in tops:
            imported.setdefault(top, str(path))
for top, where in sorted(imported.items()):
    if importlib.util.find_spec(top) is None:
        failed.append(top)
        print(f"{where} imports {top!r}, which is not installed", file=sys.stderr)

if failed:
    print(
        f"{len(failed)} imports need something pyproject.toml does not declare "
        "(add it to [project] dependencies)",
        file=sys.stderr,
    )
    sys.exit(1)
print(
    f"all {len(names)} fedbench modules import, and all {len(imported)} packages they import "
    "are installed, with the declared dependencies alone"
)
