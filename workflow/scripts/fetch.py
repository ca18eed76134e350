"""Snakemake adapter: fetch one source's raw files (verified) into resources/raw/{source}/."""

import logging
from pathlib import Path

from fedbench.data import SOURCES

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO)  # noqa: F821
out = Path(snakemake.output[0])  # noqa: F821
SOURCES[snakemake.wildcards.source].fetch(out.parent)  # noqa: F821
