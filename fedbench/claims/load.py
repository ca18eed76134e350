"""Claims files (`fedbench/papers/claims/{work}.yaml`): read, validate against the grids and the
paper's printed values.

A file looks like::

    work: dqnfed                        # one of the seven works
    text: 004_ab879befdeeaa3ac.txt      # the seed text (../shared/seeds/) or a repository file
    grids: {paper: dqnfed, quick: dqnfed_quick}
    claims:
      - id: fairness-tables-1-4-5-6
        line: 451                       # the line of `text` holding the quote ("25-27": a range)
        section: results                # abstract | introduction | results | conclusion | appendix
        quote: "Compared to the benchmark models, DQN-Fed consistently trains ..."
        check: {form: order, table: table1, row: dqnfed, over: all, columns: [s1-std],
                better: lower}          # or a list of checks, which must all hold
        quick: {form: order, table: table9, ...}   # the same comparison in the quick grid
        quick_note: "..."               # what the small-scale table is (optional)
        runs: {form: order, table: table9, ...}    # the part of `check` our runs can read
        runs_note: "..."                # which part, and why (required with `runs`)
        note: "..."                     # how the sentence was read (optional)
      - id: converges-faster
        line: 457
        section: results
        quote: "..."
        untestable: "Figure 1's curves; no table cell reads the convergence speed"

`check` reads the paper-scale grid's tables (and the paper's printed values of the same cells,
through a row's `paper_ref` where it has one), `quick` the quick grid's. `runs` replaces `check`
for our paper-scale runs where they cover part of what the claim reads (pFedBreD's Fashion-MNIST
columns of an eight-benchmark table): the same grid, the cells our runs have; `runs_note` says
what is left out, and the page marks that verdict as a part. A claim no table can
test names why in `untestable` (it may still carry a `quick` check when a small-scale table
tests it). Every error names the file, the claim and the key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from fedbench.cells import Grid
from fedbench.claims.forms import Cell, ClaimError, TableIds, Test, build_test
from fedbench.config import load_catalog
from fedbench.grid import load_grid
from fedbench.papers import PAPERS_DIR, PaperValues, load_paper_values

CLAIMS_DIR = PAPERS_DIR / "claims"
REPO = Path(__file__).resolve().parents[2]
SEEDS_DIR = REPO.parent / "shared" / "seeds"
WORKS = ("quick", "superfed", "aaggff", "fedevg", "pfedbred", "qffl", "dqnfed")
TOP_KEYS = ("work", "text", "source", "grids", "claims")
CLAIM_KEYS = (
    "id",
    "line",
    "section",
    "quote",
    "check",
    "quick",
    "quick_note",
    "runs",
    "runs_note",
    "note",
    "untestable",
)
SECTIONS = ("abstract", "introduction", "results", "discussion", "conclusion", "appendix")
ID_PATTERN = r"[a-z0-9][a-z0-9.\-]*"


@dataclass(frozen=True)
class Claim:
    """One sentence of a work and how the tables test it."""

    id: str
    line: tuple[int, int]  # first and last line of the quote in the work's text
    section: str
    quote: str
    checks: tuple[Test, ...] = ()  # on the paper-scale grid (and the printed values)
    quick: tuple[Test, ...] = ()  # on the quick grid
    untestable: str = ""
    note: str = ""
    quick_note: str = ""
    runs: tuple[Test, ...] = ()  # on our paper-scale runs, where they cover part of `checks`
    runs_note: str = ""

    @property
    def ours_tests(self) -> tuple[Test, ...]:
        """The tests our paper-scale runs are read with: `runs` where given, else `checks`."""
        return self.runs or self.checks

    @property
    def lines(self) -> str:
        """'L451' or 'L25-27'."""
        a, b = self.line
        return f"L{a}" if a == b else f"L{a}-{b}"


@dataclass(frozen=True)
class ClaimsFile:
    """A work's claims, with the grids and printed values they were validated against."""

    work: str
    text: str
    source: str
    paper_grid: Grid | None
    quick_grid: Grid | None
    printed: PaperValues
    claims: tuple[Claim, ...] = field(default_factory=tuple)
    path: Path | None = None

    def text_path(self) -> Path:
        """The text the lines refer to: a seed file, else a file of this repository."""
        seed = SEEDS_DIR / self.text
        return seed if "/" not in self.text else REPO / self.text


def table_ids(grid: Grid, name: str) -> TableIds | None:
    """A grid table's row ids, and column ids then summary-column ids; or a curve figure's row
    and column (panel) ids, read as a table of curve means (`evaluate.read_figure`). None: no
    such table or figure."""
    out = grid.outputs("tables").get(name)
    if out is None:
        out = grid.outputs("figures").get(name)
        if out is None or out.get("kind", "rounds") != "rounds":
            return None
    if not isinstance(out.get("rows"), list):
        return None
    cols = [str(c["id"]) for c in out.get("columns", [])]
    cols += [str(s["id"]) for s in out.get("summaries", [])]
    return TableIds(name, tuple(str(r["id"]) for r in out["rows"]), tuple(cols))


def printed_cell(grid: Grid, printed: PaperValues, cell: Cell):
    """The paper's printed value of a grid cell (through its row's `paper_ref`), or None."""
    out = grid.outputs("tables").get(cell.table, {})
    row = next((r for r in out.get("rows", []) if str(r.get("id")) == cell.row), {})
    table, prow = str(row.get("paper_ref", f"{cell.table}/{cell.row}")).split("/")
    return printed.get(table, prow, cell.column)


def _line(where: str, raw: Any) -> tuple[int, int]:
    if isinstance(raw, int) and not isinstance(raw, bool) and raw > 0:
        return raw, raw
    m = re.fullmatch(r"(\d+)-(\d+)", str(raw))
    if m and 0 < int(m[1]) <= int(m[2]):
        return int(m[1]), int(m[2])
    raise ClaimError(f"{where}.line: expected a line number or 'first-last', got {raw!r}")


def _text(where: str, key: str, raw: dict, required: bool = True) -> str:
    value = raw.get(key, "" if not required else None)
    if not isinstance(value, str) or (required and not value.strip()):
        raise ClaimError(f"{where}: {key!r} must be a non-empty string, got {value!r}")
    return value


def _tests(where: str, raw: Any, grid: Grid | None, which: str) -> tuple[Test, ...]:
    if grid is None:
        raise ClaimError(f"{where}: the file names no {which} grid (grids.{which})")
    checks = raw if isinstance(raw, list) else [raw]
    if not checks:
        raise ClaimError(f"{where}: an empty list of checks")
    return tuple(
        build_test(
            f"{where}[{i}]" if isinstance(raw, list) else where,
            c,
            lambda name: table_ids(grid, name),
        )
        for i, c in enumerate(checks)
    )


def _claim(where: str, raw: Any, cf: dict) -> Claim:
    if not isinstance(raw, dict):
        raise ClaimError(f"{where}: a claim is a mapping, got {raw!r}")
    cid = raw.get("id")
    if not isinstance(cid, str) or not re.fullmatch(ID_PATTERN, cid):
        raise ClaimError(f"{where}.id: expected an id matching {ID_PATTERN!r}, got {cid!r}")
    where = f"{where} ({cid})"
    unknown = sorted(set(raw) - set(CLAIM_KEYS))
    if unknown:
        raise ClaimError(f"{where}: unknown key(s) {unknown}; valid: {list(CLAIM_KEYS)}")
    for key in ("line", "section", "quote"):
        if key not in raw:
            raise ClaimError(f"{where}: missing key {key!r}")
    if raw["section"] not in SECTIONS:
        raise ClaimError(f"{where}.section: {raw['section']!r} is not one of {list(SECTIONS)}")
    if not ("check" in raw or "quick" in raw or "untestable" in raw):
        raise ClaimError(f"{where}: needs a 'check', a 'quick' check or an 'untestable' reason")
    if "check" in raw and "untestable" in raw:
        raise ClaimError(f"{where}: a claim with a 'check' is not 'untestable'")
    checks = _tests(f"{where}.check", raw["check"], cf["paper"], "paper") if "check" in raw else ()
    quick = _tests(f"{where}.quick", raw["quick"], cf["quick"], "quick") if "quick" in raw else ()
    if "quick_note" in raw and not quick:
        raise ClaimError(f"{where}.quick_note: the claim has no quick check")
    runs = _tests(f"{where}.runs", raw["runs"], cf["paper"], "paper") if "runs" in raw else ()
    if runs and not checks:
        raise ClaimError(f"{where}.runs: a part of the claim's 'check', which it lacks")
    if bool(runs) != ("runs_note" in raw):
        raise ClaimError(f"{where}: 'runs' and 'runs_note' go together (what our runs leave out)")
    printed = cf["printed"]
    if checks and len(printed):
        for i, test in enumerate(checks):
            for cell in test.cells:
                if cell.table not in cf["paper"].outputs("tables"):
                    continue  # a figure's curves: the paper prints no number to check them on
                if printed_cell(cf["paper"], printed, cell) is None:
                    raise ClaimError(
                        f"{where}.check[{i}]: the paper prints no value for {cell} (table "
                        f"{cell.table!r}, row {cell.row!r}, column {cell.column!r})"
                    )
    return Claim(
        id=cid,
        line=_line(where, raw["line"]),
        section=raw["section"],
        quote=_text(where, "quote", raw),
        checks=checks,
        quick=quick,
        untestable=_text(where, "untestable", raw) if "untestable" in raw else "",
        note=_text(where, "note", raw, required=False),
        quick_note=_text(where, "quick_note", raw, required=False),
        runs=runs,
        runs_note=_text(where, "runs_note", raw) if runs else "",
    )


def read_claims(
    path: str | Path,
    catalog: dict,
    grids_dir: str | Path = "config/papers",
    papers_dir: str | Path | None = None,
) -> ClaimsFile:
    """Read and validate one claims file against its grids (in `grids_dir`, validated with
    `catalog`) and its work's printed values (`papers_dir`, default fedbench/papers)."""
    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as err:
        raise ClaimError(f"{path}: cannot read claims: {err}") from err
    where = path.name
    if not isinstance(doc, dict):
        raise ClaimError(f"{where}: expected a mapping with keys {list(TOP_KEYS)}")
    unknown = sorted(set(doc) - set(TOP_KEYS))
    if unknown:
        raise ClaimError(f"{where}: unknown key(s) {unknown}; valid: {list(TOP_KEYS)}")
    work = doc.get("work")
    if work != path.stem:
        raise ClaimError(f"{where}.work: must equal the file name ({path.stem!r}), got {work!r}")
    grids = doc.get("grids")
    if not isinstance(grids, dict) or not grids or set(grids) - {"paper", "quick"}:
        raise ClaimError(f"{where}.grids: a mapping with 'paper' and/or 'quick' grid names")
    loaded: dict[str, Any] = {"paper": None, "quick": None}
    for which, name in grids.items():
        grid_path = Path(grids_dir) / f"{name}.yaml"
        if not grid_path.exists():
            raise ClaimError(f"{where}.grids.{which}: no grid {grid_path}")
        loaded[which] = load_grid(grid_path, catalog)
    loaded["printed"] = load_paper_values(work, papers_dir)
    raw_claims = doc.get("claims")
    if not isinstance(raw_claims, list) or not raw_claims:
        raise ClaimError(f"{where}.claims: expected a non-empty list of claims")
    claims = tuple(_claim(f"{where}: claims[{i}]", c, loaded) for i, c in enumerate(raw_claims))
    ids = [c.id for c in claims]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise ClaimError(f"{where}.claims: repeated id(s) {dup}")
    return ClaimsFile(
        work=work,
        text=_text(where, "text", doc),
        source=_text(where, "source", doc, required=False),
        paper_grid=loaded["paper"],
        quick_grid=loaded["quick"],
        printed=loaded["printed"],
        claims=claims,
        path=path,
    )


def load_claims(
    work: str,
    catalog: dict | None = None,
    config: str | Path = "config/config.yaml",
    directory: str | Path | None = None,
) -> ClaimsFile:
    """The claims of one work (`{directory}/{work}.yaml`, default fedbench/papers/claims),
    validated against the grids beside `config`."""
    if work not in WORKS:
        raise ClaimError(f"unknown work {work!r}; valid: {list(WORKS)}")
    catalog = catalog if catalog is not None else load_catalog(config)
    path = Path(directory or CLAIMS_DIR) / f"{work}.yaml"
    return read_claims(path, catalog, Path(config).parent / "papers")


def quote_found(lines: list[str], claim: Claim) -> bool:
    """Whether the claim's quote is on its lines of the text (whitespace-insensitive)."""
    a, b = claim.line
    if b > len(lines):
        return False
    text = " ".join(" ".join(lines[a - 1 : b]).split())
    return " ".join(claim.quote.split()) in text
