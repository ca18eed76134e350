"""`python -m fedbench.data status`: where every grid's data stands (fedbench/data/status.py)."""

from __future__ import annotations

import argparse
import sys

from fedbench.data import status


def main(argv: list[str] | None = None) -> int:
    """Print the status table; 2 on a bad argument or an unreadable config."""
    ap = argparse.ArgumentParser(prog="fedbench data", description=__doc__)
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")
    st = sub.add_parser(
        "status",
        help="every dataset of every grid: present and verified / fetchable (how) / needs a "
        "manual step (files and URLs) / stand-in only at this scale",
    )
    st.add_argument("--scale", help="one scale for every grid (default: each grid's own)")
    st.add_argument("--markdown", action="store_true", help="a markdown table (the README's)")
    st.add_argument(
        "--by-source", action="store_true", help="one row per source, its datasets joined"
    )
    st.add_argument(
        "--summary", action="store_true", help="the sources in each state (the README's table)"
    )
    st.add_argument("--config", default="config", help="the config folder (default: config)")
    st.add_argument("--raw", default="resources/raw", help="raw files (default: resources/raw)")
    args = ap.parse_args(argv)
    try:
        table = status.rows(args.config, args.raw, args.scale)
        table = status.by_source(table) if args.by_source else table
    except (OSError, ValueError) as err:
        print(f"python -m fedbench.data status: {err}", file=sys.stderr)
        return 2
    if args.summary:
        sys.stdout.write(status.summary(table))
    else:
        sys.stdout.write(status.markdown(table) if args.markdown else status.text(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
