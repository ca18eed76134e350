"""`python -m fedbench`: the `fedbench` command (fedbench/cli.py)."""

from fedbench.cli import main

if __name__ == "__main__":  # guarded: .ci/import_all.py imports every module
    raise SystemExit(main())
