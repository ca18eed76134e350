"""The `fedbench` command (also `python -m fedbench`): one subcommand per thing users run by hand.

    fedbench cost PAPER ...        estimated compute of a paper's grid (fedbench.cost)
    fedbench record PAPER TABLE ...  per-run summary and partial table from finished runs
    fedbench compare DIR_A DIR_B   two renderings of a grid's tables, cell by cell, vs seed spread
    fedbench spec SCALE DATASET PARTITION MODEL ALGORITHM SEED   one run's resolved spec (YAML)
    fedbench data status ...       every grid's datasets: present / fetchable / manual / stand-in
    fedbench catalog [SECTION]     the catalog's names (what a grid or a wildcard may use)
    fedbench new algorithm NAME    a new method's file (a FedAvg subclass) and its tests

Each subcommand imports what it needs when it runs, so `fedbench --help` stays fast.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

CONFIG = "config/config.yaml"
SECTIONS = ("datasets", "partitions", "models", "algorithms", "scales")
# Subcommands that hand their arguments to an existing module's own parser, unchanged.
DELEGATED = {
    "cost": ("fedbench.cost", "estimated compute of a paper's grid from a few timed rounds"),
    "record": ("fedbench.record", "per-run summary (and partial table) of one table's runs"),
    "compare": (
        "fedbench.report.compare",
        "two renderings of a grid's tables (fp32 and bf16, ...), cell by cell, vs seed spread",
    ),
    "data": (
        "fedbench.data.__main__",
        "`data status`: every grid's datasets, present / fetchable (how) / manual step / stand-in",
    ),
    "new": ("fedbench.scaffold", "`new algorithm NAME`: a FedAvg subclass and its tests, to edit"),
}


def _catalog(path: str, validate: bool) -> dict:
    """The catalog with config/catalog/*.yaml added (validated for `spec`, as at DAG build)."""
    import yaml

    from fedbench.config import ConfigError, catalog_files, extend_catalog, load_catalog

    if validate:
        return load_catalog(path)
    try:
        with open(path) as f:
            catalog = yaml.safe_load(f)
    except OSError as err:
        raise ConfigError(f"config file {path}: {err.strerror}") from None
    extend_catalog(catalog, catalog_files(Path(path).parent))
    return catalog


def _spec(args: argparse.Namespace) -> int:
    from fedbench.config import resolve_run
    from fedbench.io import yaml_text

    catalog = _catalog(args.config, validate=True)
    spec = resolve_run(
        catalog, args.scale, args.dataset, args.partition, args.model, args.algorithm, args.seed
    )
    sys.stdout.write(yaml_text(spec))
    return 0


def _names(args: argparse.Namespace) -> int:
    catalog = _catalog(args.config, validate=False)
    if args.section is None:
        for section in SECTIONS:
            print(f"{section}: {len(catalog.get(section) or {})}")
        return 0
    print("\n".join(catalog.get(args.section) or {}))
    return 0


def parser() -> argparse.ArgumentParser:
    """The command's parser: one subparser per subcommand."""
    ap = argparse.ArgumentParser(
        prog="fedbench",
        description="fedbench: reproducible federated-learning benchmarks. The workflow itself "
        "runs with `snakemake` (see the README); these commands inspect and record it.",
    )
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module, about) in DELEGATED.items():
        shown = module.removesuffix(".__main__")
        sub.add_parser(name, add_help=False, help=f"{about} (= python -m {shown})")

    spec = sub.add_parser(
        "spec",
        help="print one run's resolved spec (its run.yaml) as YAML",
        description="Resolve one run's names against the catalog (config/config.yaml and "
        "config/catalog/*.yaml) at a scale and print the spec its run.yaml records.",
    )
    for field in ("scale", "dataset", "partition", "model", "algorithm"):
        spec.add_argument(field, help=f"a catalog {field} name (fedbench catalog {field}s)")
    spec.add_argument("seed", type=int)
    spec.set_defaults(run=_spec)

    names = sub.add_parser(
        "catalog",
        help="list one catalog section's names (or count each section's)",
        description="The names a grid (config/papers/*.yaml) or a target path may use, sweep "
        "variants expanded.",
    )
    names.add_argument("section", nargs="?", choices=SECTIONS)
    names.set_defaults(run=_names)

    for command in (spec, names):
        command.add_argument("--config", default=CONFIG, help="catalog file (default: %(default)s)")
    return ap


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand; a catalog error is one line on stderr and exit status 2."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in DELEGATED:
        import importlib

        return importlib.import_module(DELEGATED[argv[0]][0]).main(argv[1:])
    args = parser().parse_args(argv)
    from fedbench.config import ConfigError

    try:
        return args.run(args)
    except ConfigError as err:
        print(f"fedbench {args.command}: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
