"""Import every module of fedbench; fail naming each module that does not import.

Run right after `pip install -e .` without extras (the Makefile's set-up does), so a dependency the
code imports but pyproject.toml does not declare fails the build instead of working by accident.
"""

import importlib
import pkgutil
import sys
import traceback

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
if failed:
    print(
        f"{len(failed)} of {len(names)} modules need something pyproject.toml does not declare "
        "(add it to [project] dependencies, or import it lazily where an extra provides it)",
        file=sys.stderr,
    )
    sys.exit(1)
print(f"all {len(names)} fedbench modules import with the declared dependencies alone")
