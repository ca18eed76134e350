"""Claims: what each work's sentences say its tables show, tested three ways.

`fedbench/papers/claims/{work}.yaml` holds each work's claims (the sentence, its line in the
work's text, and a check over table cells); `load` reads and validates them against the grids
and the printed values; `forms` turns a check into comparisons (a new form: one function and
one line in `FORMS`); `stats` gives a comparison's verdict over seeds; `evaluate` reads the
paper's printed values and our runs through the tables' own specs. This package sits above
`fedbench.grid` (it asks a grid's tables for their specs) and below the entry points.
"""

from fedbench.claims.forms import FORMS, ClaimError
from fedbench.claims.load import WORKS, Claim, ClaimsFile, load_claims, read_claims
from fedbench.claims.stats import VERDICTS

__all__ = [
    "FORMS",
    "VERDICTS",
    "WORKS",
    "Claim",
    "ClaimError",
    "ClaimsFile",
    "load_claims",
    "read_claims",
]
