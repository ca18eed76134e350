"""Byte-identity of two result trees, for a refactor that must not change any output.

    python .ci/results_digest.py list  TREE SCALE            # "sha256  path" of every result file
    python .ci/results_digest.py compare TREE_A TREE_B SCALE # counts by kind, then each difference

TREE is a checkout holding `results/SCALE`. Left out: `run.yaml` (commit, timings), the content
records `.NAME.sha256` (first-write times), checkpoints. Known to differ between two builds of
the same code: files with wall-clock numbers (DQN-Fed's Table 2, the landing page showing it) and
`artifacts.pt` (torch.save stores the temporary file's name and a random id; compare its tensors).
A claims page reads the runs finished when it is built: rebuild both trees' pages
(`--forcerun claims_page claims_index`) before comparing them.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path


def listing(tree: Path, scale: str) -> dict[str, str]:
    root = tree / "results" / scale
    out = {}
    for p in sorted(root.rglob("*")):
        skip = p.name == "run.yaml" or p.name.endswith(".sha256") or "checkpoint" in p.name
        if p.is_file() and not skip:
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def kind(path: str) -> str:
    if path.endswith("metrics.jsonl"):
        return "metrics.jsonl"
    return path.split("/")[0]


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "list":
        for path, digest in listing(Path(argv[1]), argv[2]).items():
            print(f"{digest}  {path}")
        return 0
    if len(argv) != 4 or argv[0] != "compare":
        print(__doc__, file=sys.stderr)
        return 2
    a, b = listing(Path(argv[1]), argv[3]), listing(Path(argv[2]), argv[3])
    common = sorted(set(a) & set(b))
    differ = [k for k in common if a[k] != b[k]]
    counts: dict[str, list[int]] = {}
    for k in common:
        counts.setdefault(kind(k), [0, 0])[a[k] != b[k]] += 1
    same = len(common) - len(differ)
    print(f"{len(common)} files in both: {same} identical, {len(differ)} differ")
    for name, (same, other) in sorted(counts.items()):
        print(f"  {name}: {same} identical, {other} differ")
    for k in differ:
        print(f"differs: {k}")
    for k in sorted(set(a) ^ set(b)):
        print(f"only in {'A' if k in a else 'B'}: {k}")
    return 1 if differ or set(a) ^ set(b) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
