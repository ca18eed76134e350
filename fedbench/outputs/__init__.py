"""Output kinds: each table or figure kind is one module that owns its grid keys' validation, the
runs (and other files) it reads, the spec it hands the report and its rendering.

A grid entry names its kind (`kind:`; a table's default is `table`, a figure's `rounds`). Adding a
kind is one module defining an `OutputKind` and one line in `KINDS` (`fedbench/outputs/registry.py`;
docs/architecture.md).
"""

from fedbench.outputs.base import OutputKind
from fedbench.outputs.registry import DEFAULT_KIND, KINDS, kind_of, owners

__all__ = ["DEFAULT_KIND", "KINDS", "OutputKind", "kind_of", "owners"]
