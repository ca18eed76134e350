"""Snakemake adapter: fetch one source's raw files (verified) into resources/raw/{source}/."""

from fedbench.jobs import fetch

fetch(  # the catalog's datasets say which routes (`source: hub | original`) to fetch
    snakemake.wildcards.source,  # noqa: F821
    snakemake.output[0],  # noqa: F821
    snakemake.log[0],  # noqa: F821
    snakemake.config["datasets"],  # noqa: F821
)
