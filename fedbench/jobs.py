"""What each Snakemake job does, in plain arguments.

Each `workflow/scripts/*.py` adapter unpacks `snakemake` and calls one function here, so the
adapters stay a few lines and every job runs (and is tested) without Snakemake. Imports are local
to each job: a training job started without the warm worker imports what training needs, not the
report's plotting libraries.
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator

LOG_FORMAT = "%(asctime)s %(levelname)s %(message)s"


@contextlib.contextmanager
def _job(log: str | Path | None, targets: list, fmt: str = LOG_FORMAT) -> Iterator[None]:
    """Run a job's body logging to its `log` file (Snakemake's `log:`); `targets` are files it
    writes (naming them to snakemake reruns it). A failure goes to the log with its traceback,
    then, as the log's last line, what to do; and is raised on, so the terminal shows it too."""
    from fedbench.io import job_targets, rerun_command

    root = logging.getLogger()
    level, handler = root.level, None
    if log is not None:
        handler = logging.FileHandler(log)
        handler.setFormatter(logging.Formatter(fmt))
        root.addHandler(handler)
        root.setLevel(logging.INFO)
        logging.captureWarnings(True)
    try:
        with job_targets(*targets):
            yield
    except Exception as err:
        logging.exception("the job failed:")
        advice = getattr(err, "advice", None) or (
            "fix the cause of the error above, then run this job again with: "
            + rerun_command(*targets)
        )
        logging.error("what to do: %s", advice)
        raise
    finally:
        if handler is not None:  # a job called in a longer process (a test) leaves no trace
            logging.captureWarnings(False)
            root.removeHandler(handler)
            root.setLevel(level)
            handler.close()


def fetch(
    source: str, out: str | Path, log: str | Path, datasets: dict[str, Any] | None = None
) -> None:
    """Fetch one source's raw files (verified) into the folder of `out` (its MANIFEST.json).

    A source with `source: hub | original` gets the routes that the catalog's `datasets` of
    that source name (`fedbench.data.hub.fetch_routes`; with none given, its default route):
    a grid whose dataset says `source: original` downloads no hub copy first.
    """
    from fedbench.data import SOURCES
    from fedbench.data.hub import fetch_routes

    with _job(log, [out]):
        src = SOURCES[source]
        for route in fetch_routes(src, (datasets or {}).values()):
            if route is not None:
                logging.info("%s: route %s (a catalog dataset names it)", source, route)
            src.fetch(Path(out).parent, **({} if route is None else {"source": route}))


def prepare(
    spec: dict[str, Any],
    raw_file: str | None,
    mode: str,
    standin_size: dict[str, Any],
    out: str | Path,
    log: str | Path,
) -> None:
    """Load (or generate a stand-in for) one dataset and save it prepared; `raw_file` is its
    fetched manifest (None for stand-ins and generated sets)."""
    from fedbench.data import prepare_dataset
    from fedbench.data.base import save_dataset
    from fedbench.data.transform import apply_transform
    from fedbench.rng import Streams

    with _job(log, [out]):
        raw = Path(raw_file).parent if raw_file else None
        # Data generation is fixed per dataset (not per run seed): every seed's partition draws
        # from it.
        rng = Streams(0).generator("standin")
        params = spec["params"]
        if mode == "standin":
            params = {**params, **standin_size}
        ds = apply_transform(
            prepare_dataset(spec["source"], params, raw, mode, rng), spec.get("transform")
        )
        save_dataset(ds, out)
        logging.info("%s: %s", spec["name"], ds.provenance)


def partition(data: str | Path, spec: dict[str, Any], seed: int, out: str | Path, log) -> None:
    """Split a prepared dataset into clients with the seed's partition stream."""
    from fedbench.data.base import load_dataset
    from fedbench.data.partition import make_partition, save_partition
    from fedbench.rng import Streams

    with _job(log, [out]):
        ds = load_dataset(data)
        rng = Streams(int(seed)).generator("partition")
        part = make_partition(
            ds.y_train, ds.groups, spec, rng, ds.num_classes, official_test=ds.official_test
        )
        save_partition(out, part)
        logging.info("%d clients, sizes %s", len(part.train), [len(t) for t in part.train])


def train(
    spec: dict[str, Any],
    data: str | Path,
    partition: str | Path,
    outputs: dict[str, Any],
    log: str | Path,
    threads: int,
    device: str,
    gpus: int,
    checkpoint_every: int,
    checkpoint_min_seconds: float = 60.0,
) -> None:
    """Train one run: `outputs` maps metrics, run (and params, when the rule names it) to paths.
    A job that asked for a GPU holds one of the machine's GPUs (profiles/multigpu: one per GPU)."""
    from fedbench.config import register_spec_plugins
    from fedbench.engine.checkpoint import CheckpointPolicy
    from fedbench.engine.run import execute_run
    from fedbench.gpu import claim_gpu

    gpu = claim_gpu() if device != "cpu" and gpus > 0 else contextlib.nullcontext()
    with _job(log, [outputs["metrics"]]), gpu:
        register_spec_plugins(spec)  # a user's method named by a config overlay's file
        execute_run(
            spec,
            data,
            partition,
            outputs["metrics"],
            outputs["run"],
            threads=threads,
            device=device,
            params_path=outputs.get("params"),  # absent in a workflow parsed before it existed
            checkpoint=CheckpointPolicy(
                every_rounds=int(checkpoint_every), min_seconds=float(checkpoint_min_seconds)
            ),
        )


def landscape(
    run: str | Path,
    params: str | Path,
    data: str | Path,
    out: str | Path,
    settings: dict[str, Any],
    threads: int,
    device: str,
    log: str | Path,
) -> None:
    """The loss landscape of one run's final global model as .npz."""
    from fedbench.engine.landscape import compute_run_landscape
    from fedbench.landscape_file import LandscapeSettings

    with _job(log, [out], "%(asctime)s %(message)s"):
        how = LandscapeSettings(**settings)
        compute_run_landscape(run, params, data, out, how, threads, device)


def incentive(settings: dict[str, Any], out: str | Path, log: str | Path) -> None:
    """The numbers of one incentive-game output (the q-FFL preprint's game or bound) as JSON."""
    from fedbench.outputs.incentive import write_game

    with _job(log, [out]):
        write_game(settings, out)
        logging.info("%s: wrote %s", settings["show"], out)


def render(
    grid,
    section: str,
    name: str,
    catalog: dict,
    scale: str,
    out_file: str | Path,
    log: str | Path | None = None,
):
    """One table or figure of a grid, whatever its kind, as `out_file` with each of its
    section's extensions; returns the paths written."""
    from fedbench.config import register_plugins
    from fedbench.grid import output_kind

    with _job(log, [out_file]):
        register_plugins(catalog)  # a user's methods named by a config overlay (their classes)
        kind = output_kind(grid, section, name)
        return kind.render(kind.spec(grid, name, catalog, scale), Path(out_file).with_suffix(""))


def choice(grid, name: str, catalog: dict, scale: str, out: str | Path, log: str | Path) -> None:
    """What one selection table chose, from its runs, as JSON (`fedbench.outputs.chosen`)."""
    from fedbench.config import register_plugins
    from fedbench.grid import output_kind
    from fedbench.outputs.chosen import write_choice

    with _job(log, [out]):
        register_plugins(catalog)
        record = write_choice(output_kind(grid, "tables", name), grid, name, catalog, scale, out)
        for by, groups in record["choices"].items():
            logging.info("%s: %s", by, {g: c["algorithm"] for g, c in groups.items()})


def claims_page(
    work: str, catalog: dict, scale: str, out_file: str | Path, log=None, config_dir="config"
) -> list:
    """A work's claims page (.md, .html, .csv beside `out_file`) at `scale`: each claim on the
    paper's printed values, on the paper grid's runs finished so far, on the quick grid's (the
    grids in `config_dir`/papers)."""
    from fedbench.claims import load_claims
    from fedbench.claims.page import evaluate_work, write_page
    from fedbench.config import register_plugins

    with _job(log, [out_file]):
        register_plugins(catalog)  # an overlay's catalog entries name them; claims ignore its rows
        cf = load_claims(work, catalog, Path(config_dir) / "config.yaml")
        page = evaluate_work(cf, catalog, scale)
        return write_page(page, Path(out_file).with_suffix(""))


def landing(out_file: str | Path, log=None) -> None:
    """A scale's landing page (results/{scale}/index.html) from what is built under its folder."""
    from fedbench.io import write_text
    from fedbench.report.landing import landing_page

    with _job(log, [out_file]):
        write_text(out_file, landing_page(Path(out_file).parent))


def claims_index(pages: list, scale: str, out_file: str | Path, log=None) -> list:
    """The claims page across works (.md, .html, .csv beside `out_file`), from their pages' CSVs."""
    from fedbench.claims.page import read_page_csv, write_index

    with _job(log, [out_file]):
        summary = [read_page_csv(p) for p in pages if str(p).endswith(".csv")]  # .json beside
        return write_index(summary, scale, Path(out_file).with_suffix(""))
