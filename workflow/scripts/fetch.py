"""Snakemake adapter: fetch one source's raw files (verified) into resources/raw/{source}/."""

from fedbench.jobs import fetch

fetch(snakemake.wildcards.source, snakemake.output[0], snakemake.log[0])  # noqa: F821
