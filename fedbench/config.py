"""The catalog (config/config.yaml): named datasets, partitions, models, algorithms and scales.

Validated once, when the workflow builds its DAG: a typo names the key and the valid choices.
`resolve_run` turns one run's names into the fully resolved spec that `run.yaml` records.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import functools
import hashlib
import importlib.util
import inspect
import itertools
import math
import re
import string
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from fedbench.algorithms import ALGORITHMS, build_algorithm
from fedbench.data.partition import PARTITIONERS, check_partition_spec
from fedbench.data.transform import check_transform
from fedbench.engine.train_config import TrainConfig
from fedbench.models import MODELS
from fedbench.registry import LazyRegistry, plugin_file

SECTIONS = ("datasets", "partitions", "models", "algorithms")
DATASET_KEYS = (
    "source",
    "params",
    "standin_params",
    "transform",
    "training",
    "description",
    "label",
)
TOP_KEYS = (
    "scale",
    "scales",
    "training",
    "threads",
    "device",
    "gpus_per_run",
    "checkpoint_every",
    "checkpoint_min_seconds",
    "warm_worker",
    "plugins",
    "add_rows",
    *SECTIONS,
)
# `plugins`: a user's own entries beside the built-in ones (fedbench.registry), by registry.
PLUGIN_SECTIONS = ("algorithms", "models")
DATA_MODES = ("real", "standin")
# standin_params (models and datasets): parameters merged over `params` only at scales whose data
# is generated (smoke), so a paper-sized network or image runs tiny in CI; run.yaml records them.
# An algorithm entry's `standin_params` are hyperparameters merged over its own at those scales
# (FedEvg's FID on a fixed random CNN where the paper's Inception weights are absent).
MODEL_KEYS = ("arch", "params", "standin_params", "training", "description")
# The keys of an algorithm entry that are not the algorithm's hyperparameters.
ALGORITHM_ENTRY_KEYS = ("algorithm", "training", "description", "standin_params")
SCALE_KEYS = ("data", "caps", "description", "standin_size", "training")
# What a scale may set for every run it holds: how the runs compute, never what (a scale's
# `training` block is applied last, after its caps; e.g. quick-bf16's precision).
SCALE_TRAINING_KEYS = ("precision", "eval_precision", "executor")
CAP_KEYS = (
    "rounds",
    "num_clients",
    "clients_per_round",
    "local_epochs",
    "local_steps",
    "batch_size",
    "seeds",
    "sweep_points",
    "select_points",
)
PARTITION_KINDS = tuple(PARTITIONERS)


class ConfigError(ValueError):
    """A bad configuration value, named by its key path."""


# An error lists every valid name only when there are few of them; otherwise (the catalog holds
# ~250 algorithm variants) the nearest ones, how many there are and what lists them.
SHORT_LIST = 12
# The command that lists a catalog section's names (fedbench/cli.py), named by errors.
LIST_COMMAND = "`fedbench catalog {section}`"
ALGORITHMS_LISTED = "ALGORITHMS in fedbench/algorithms/__init__.py"


def nearest(name: object, valid: Iterable[str], n: int = 3) -> list[str]:
    """Up to `n` valid names close to `name` (difflib's ratio, case ignored), closest first."""
    by_lower: dict[str, str] = {}
    for v in valid:
        by_lower.setdefault(str(v).lower(), str(v))
    close = difflib.get_close_matches(str(name).lower(), list(by_lower), n=n, cutoff=0.6)
    return [by_lower[c] for c in close]


def _nearest_text(name: object, valid: Iterable[str]) -> str:
    close = nearest(name, valid)
    return f"nearest: {', '.join(map(repr, close))}" if close else "no close match"


def unknown_name(what: str, name: object, valid: Iterable[str], listed: str | None = None) -> str:
    """'unknown {what} {name!r}' with the nearest valid names: all of them when few, else how
    many there are and `listed` (what lists them), in one short line."""
    names = sorted({str(v) for v in valid})
    head = f"unknown {what} {name!r}; {_nearest_text(name, names)}"
    if len(names) <= SHORT_LIST:
        return f"{head}; valid: {', '.join(names)}"
    return f"{head} ({len(names)} valid{f'; {listed} lists them' if listed else ''})"


def unknown_entry(catalog: dict, section: str, name: object) -> str:
    """unknown_name for a catalog section (datasets, partitions, models, algorithms, scales)."""
    return unknown_name(section[:-1], name, catalog[section], LIST_COMMAND.format(section=section))


def unknown_keys(where: str, unknown: list[str], valid: Iterable[str], what: str = "key") -> str:
    """'{where}: unknown key(s) [...]' with each one's nearest valid keys and every valid key."""
    valid = sorted(valid)
    if len(unknown) == 1:
        hints = _nearest_text(unknown[0], valid)
    else:
        hints = "; ".join(f"{k!r} -> {_nearest_text(k, valid)}" for k in unknown)
    return f"{where}: unknown {what}(s) {unknown} ({hints}); valid: {valid}"


def _keys(where: str, entry: dict, valid: tuple[str, ...] | list[str]) -> None:
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: expected a mapping, got {type(entry).__name__}")
    unknown = sorted(set(entry) - set(valid))
    if unknown:
        raise ConfigError(unknown_keys(where, unknown, valid))


def check_top_level(config: dict[str, Any]) -> None:
    """The config's top-level keys (config/config.yaml's and any set with `--config KEY=VALUE`)
    and the values of the scalar ones; the Snakefile calls it before its schema validation, so a
    typo reads as one line naming the key, not as the schema and the whole config."""
    _keys("config (config/config.yaml or --config)", config, TOP_KEYS)
    _check_top_values(config)


def load_catalog(path: str | Path) -> dict[str, Any]:
    """Read the catalog file, add the per-paper entries of catalog/*.yaml beside it, validate."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"config file {path} does not exist")
    with open(path) as f:
        catalog = yaml.safe_load(f)
    extend_catalog(catalog, catalog_files(path.parent))
    validate_catalog(catalog)
    return catalog


def catalog_files(config_dir: str | Path) -> list[Path]:
    """The per-paper catalog files (config/catalog/*.yaml), in a fixed order."""
    return sorted(Path(config_dir, "catalog").glob("*.yaml"))


def extend_catalog(catalog: dict[str, Any], paths: list[Path]) -> None:
    """Add each file's datasets/partitions/models/algorithms to `catalog` (in place).

    A paper's settings live in its own file; a name defined twice is an error naming both files.
    """
    check_structure(catalog, "config")
    if catalog.get("algorithms"):
        catalog["algorithms"] = expand_sweeps(catalog["algorithms"], "config.yaml")
    origin = {(s, n): "config.yaml" for s in SECTIONS for n in catalog.get(s, {}) or {}}
    for path in paths:
        with open(path) as f:
            extra = yaml.safe_load(f) or {}
        if not isinstance(extra, dict):
            raise ConfigError(f"{path.name}: expected a mapping")
        unknown = sorted(set(extra) - set(SECTIONS))
        if unknown:
            raise ConfigError(unknown_keys(path.name, unknown, SECTIONS))
        check_structure(extra, path.name)
        if extra.get("algorithms"):
            extra["algorithms"] = expand_sweeps(extra["algorithms"], path.name)
        for section, entries in extra.items():
            for name, entry in (entries or {}).items():
                if (section, name) in origin:
                    raise ConfigError(
                        f"{path.name}: {section}.{name} is already defined in "
                        f"{origin[(section, name)]}"
                    )
                origin[(section, name)] = path.name
                catalog.setdefault(section, {})[name] = entry


# The field of each catalog section's entries that names a registry entry (a string).
NAME_FIELDS = {
    "datasets": "source",
    "partitions": "kind",
    "models": "arch",
    "algorithms": "algorithm",
}


def check_structure(catalog: dict[str, Any], where: str) -> None:
    """The shape the later checks read: each section a mapping of string names to mappings, each
    entry's registry name a string, a scale's name a string (ConfigError naming the key)."""
    scale = catalog.get("scale")
    if scale is not None and not isinstance(scale, str):
        raise ConfigError(f"{where}.scale: expected a scale name (a string), got {scale!r}")
    for section in (*SECTIONS, "scales"):
        entries = catalog.get(section)
        if entries is None:
            if section in catalog:
                catalog[section] = {}  # an empty section (`algorithms:` with nothing under it)
            continue
        if not isinstance(entries, dict):
            raise ConfigError(f"{where}.{section}: expected a mapping of names to entries")
        for name, entry in entries.items():
            if not isinstance(name, str):
                raise ConfigError(f"{where}.{section}: entry name {name!r} is not a string")
            if not isinstance(entry, dict):
                raise ConfigError(f"{where}.{section}.{name}: expected a mapping, got {entry!r}")
            field = NAME_FIELDS.get(section)
            if field in entry and not isinstance(entry[field], str):
                raise ConfigError(
                    f"{where}.{section}.{name}.{field}: expected a name (a string), "
                    f"got {entry[field]!r}"
                )


# A variant name, and so a run folder: letters, digits, '.', '_', '-' (no '/', no spaces).
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def sweep_tag(value: Any) -> str:
    """A swept value as a variant name shows it: 30 and 30.0 -> '30', 0.05 -> '0.05'."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"a swept value must be a finite number, got {value!r}")
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def sweep_fields(template: str) -> list[str]:
    """The placeholders of a sweep's name template, e.g. ['lam', 'eta'] of 'x-l{lam}-e{eta}'."""
    try:
        return [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    except ValueError as err:
        raise ValueError(f"bad name template {template!r}: {err}") from None


def sweep_name(template: str, point: dict[str, Any]) -> str:
    """The variant name of one point of a sweep (template placeholders filled by sweep_tag)."""
    return template.format(**{k: sweep_tag(v) for k, v in point.items()})


def expand_sweeps(entries: dict[str, Any], where: str) -> dict[str, Any]:
    """Algorithm entries with a `sweep: {param: [values]}` become one named variant per point
    of the values' cross product, named by the entry's name template ('pfedbred-mh-l{lam}-e{eta}'
    -> 'pfedbred-mh-l30-e0.1'; a swept value replaces the entry's own, e.g. one merged in by a
    YAML anchor); other entries pass through, order kept."""
    out: dict[str, Any] = {}
    for name, entry in entries.items():
        if not isinstance(entry, dict) or "sweep" not in entry:
            out[name] = entry
            continue
        place = f"{where}: algorithms.{name}.sweep"
        sweep = entry["sweep"]
        if not isinstance(sweep, dict) or not sweep:
            raise ConfigError(f"{place}: expected a mapping of parameter -> list of values")
        cls = ALGORITHMS.get(entry.get("algorithm"))
        if cls is None:
            raise ConfigError(
                f"{where}: algorithms.{name}.algorithm: "
                + unknown_name("algorithm", entry.get("algorithm"), ALGORITHMS, ALGORITHMS_LISTED)
            )
        fields = {f.name: str(f.type) for f in dataclasses.fields(cls)}
        for key, values in sweep.items():
            if key not in fields:
                raise ConfigError(
                    f"{place}.{key}: not a parameter of {cls.name} "
                    f"({_nearest_text(key, fields)}); valid: {sorted(fields)}"
                )
            if not isinstance(values, list) or not values:
                raise ConfigError(f"{place}.{key}: expected a non-empty list, got {values!r}")
            try:
                tags = [sweep_tag(v) for v in values]
            except ValueError as err:
                raise ConfigError(f"{place}.{key}: {err}") from None
            if len(set(tags)) != len(tags):
                raise ConfigError(f"{place}.{key}: repeated value(s) in {values!r}")
            bad = next((v for v in values if _type_mismatch(fields[key], v)), None)
            if bad is not None:
                why = _type_mismatch(fields[key], bad)
                raise ConfigError(f"{place}.{key}: must be {why} (got {bad!r})")
        try:
            placeholders = sweep_fields(name)
        except ValueError as err:
            raise ConfigError(f"{place}: {err}") from None
        if sorted(placeholders) != sorted(sweep):
            raise ConfigError(
                f"{place}: the name's placeholders {placeholders} must be the swept "
                f"parameters {list(sweep)}, each once"
            )
        base = {k: v for k, v in entry.items() if k != "sweep"}
        for combo in itertools.product(*sweep.values()):
            point = {
                k: float(v) if fields[k] == "float" else v
                for k, v in zip(sweep, combo, strict=True)
            }
            variant = sweep_name(name, point)
            if not SAFE_NAME.fullmatch(variant):
                raise ConfigError(f"{place}: variant name {variant!r} is not path-safe")
            if variant in entries or variant in out:
                raise ConfigError(f"{place}: variant {variant!r} is already defined")
            out[variant] = {**base, **point}
    return out


def validate_catalog(catalog: dict[str, Any]) -> None:
    """Check every entry: known keys, known kinds, buildable algorithms and training blocks."""
    from fedbench.data import SOURCES  # local: the data layer is heavier to import

    _keys("config", catalog, TOP_KEYS)
    for section in SECTIONS:
        if section not in catalog or not isinstance(catalog[section], dict):
            raise ConfigError(f"config: missing section {section!r}")
    _check_top_values(catalog)
    scales = catalog.get("scales", {})
    if not isinstance(scales, dict) or not scales:
        raise ConfigError("config: 'scales' must be a non-empty mapping of scale names")
    for name, sc in scales.items():
        _keys(f"scales.{name}", sc, SCALE_KEYS)
        if sc.get("data", "real") not in DATA_MODES:
            raise ConfigError(f"scales.{name}.data: must be one of {DATA_MODES}")
        _keys(f"scales.{name}.caps", sc.get("caps", {}), CAP_KEYS)
        _keys(f"scales.{name}.standin_size", sc.get("standin_size", {}), ("n_train", "n_test"))
        _keys(f"scales.{name}.training", sc.get("training", {}), SCALE_TRAINING_KEYS)
        for key, value in sc.get("caps", {}).items():
            if not _is_int(value) or value < 1:
                raise ConfigError(
                    f"scales.{name}.caps.{key}: must be a positive integer, got {value!r}"
                )
        for key, value in sc.get("standin_size", {}).items():
            if not _is_int(value) or value < 10:
                raise ConfigError(
                    f"scales.{name}.standin_size.{key}: must be an integer >= 10, got {value!r}"
                )
    if catalog.get("scale") is not None and catalog["scale"] not in scales:
        raise ConfigError(f"scale: {unknown_entry(catalog, 'scales', catalog['scale'])}")
    for name, e in catalog["datasets"].items():
        _keys(f"datasets.{name}", e, DATASET_KEYS)
        if e.get("source") not in SOURCES:
            raise ConfigError(
                f"datasets.{name}.source: "
                + unknown_name(
                    "source", e.get("source"), SOURCES, "SOURCES in fedbench/data/__init__.py"
                )
            )
        for key in ("params", "standin_params"):
            if not isinstance(e.get(key, {}), dict):
                raise ConfigError(f"datasets.{name}.{key}: expected a mapping, got {e[key]!r}")
            try:
                SOURCES[e["source"]].check_params({**e.get("params", {}), **e.get(key, {})})
            except ValueError as err:
                raise ConfigError(f"datasets.{name}.{key}: {err}") from None
        try:
            check_transform(name, e.get("transform"))
        except ValueError as err:
            raise ConfigError(f"datasets.{name}.transform: {err}") from None
    for name, e in catalog["partitions"].items():
        if not isinstance(e, dict) or e.get("kind") not in PARTITION_KINDS:
            kind = e.get("kind") if isinstance(e, dict) else e
            raise ConfigError(
                f"partitions.{name}.kind: " + unknown_name("partition kind", kind, PARTITION_KINDS)
            )
        try:
            check_partition_spec({k: v for k, v in e.items() if k != "training"})
        except ValueError as err:
            raise ConfigError(f"partitions.{name}: {err}") from None
    for name, e in catalog["models"].items():
        _keys(f"models.{name}", e, MODEL_KEYS)
        if e.get("arch") not in MODELS:
            raise ConfigError(
                f"models.{name}.arch: "
                + unknown_name(
                    "arch", e.get("arch"), MODELS, "MODELS in fedbench/models/__init__.py"
                )
            )
        valid = _model_params(MODELS[e["arch"]])
        for key in ("params", "standin_params"):
            if not isinstance(e.get(key, {}), dict):
                raise ConfigError(f"models.{name}.{key}: expected a mapping, got {e[key]!r}")
            unknown = sorted(set(e.get(key, {})) - valid) if valid is not None else []
            if unknown:
                raise ConfigError(unknown_keys(f"models.{name}.{key}", unknown, valid, "parameter"))
    for name, e in catalog["algorithms"].items():
        if not isinstance(e, dict) or "algorithm" not in e:
            raise ConfigError(f"algorithms.{name}: needs an 'algorithm' key")
        cls = ALGORITHMS.get(e["algorithm"])
        if cls is None:
            raise ConfigError(
                f"algorithms.{name}.algorithm: "
                + unknown_name("algorithm", e["algorithm"], ALGORITHMS, ALGORITHMS_LISTED)
            )
        _check_algorithm_entry(name, e, cls)
    # Every training block must be valid on its own: its keys, the type and range of each value.
    for section in SECTIONS:
        for name, e in catalog[section].items():
            if "training" in e:
                try:
                    _check_training_block(e["training"])
                except ValueError as err:
                    raise ConfigError(f"{section}.{name}.{err}") from None
    try:
        _check_training_block(catalog.get("training", {}))
    except ValueError as err:
        raise ConfigError(str(err)) from None


def _check_algorithm_entry(name: str, e: dict, cls: type) -> None:
    """An algorithm entry's hyperparameters (and its stand-in ones, alone and merged over them):
    known fields of the right type, and an algorithm that builds."""
    fields = {f.name: str(f.type) for f in dataclasses.fields(cls)}
    standin = e.get("standin_params", {})
    if not isinstance(standin, dict):
        raise ConfigError(f"algorithms.{name}.standin_params: expected a mapping, got {standin!r}")
    for where, params in ((name, _algo_params(e)), (f"{name}.standin_params", standin)):
        unknown = sorted(set(params) - set(fields))
        if unknown:
            raise ConfigError(
                unknown_keys(
                    f"algorithms.{where} ({e['algorithm']})", unknown, fields, "hyperparameter"
                )
            )
        for key, value in params.items():
            why = _type_mismatch(fields.get(key, ""), value)
            if why is not None:
                raise ConfigError(f"algorithms.{where}.{key}: must be {why} (got {value!r})")
    for where, params in ((name, _algo_params(e)), (f"{name}.standin_params", standin)):
        try:
            build_algorithm(e["algorithm"], **{**_algo_params(e), **params})
        except (ValueError, TypeError) as err:
            raise ConfigError(f"algorithms.{where}: {err}") from None


DEVICE_RE = re.compile(r"auto|cpu|cuda(:[0-9]+)?")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check_top_values(catalog: dict) -> None:
    """threads, gpus_per_run, device, scale (also set from the command line with --config)."""
    if "threads" in catalog and (not _is_int(catalog["threads"]) or catalog["threads"] < 1):
        raise ConfigError(f"threads: must be a positive integer, got {catalog['threads']!r}")
    gpus = catalog.get("gpus_per_run", 0)
    if not _is_int(gpus) or gpus < 0:
        raise ConfigError(f"gpus_per_run: must be an integer >= 0, got {gpus!r}")
    device = catalog.get("device", "auto")
    if not isinstance(device, str) or not DEVICE_RE.fullmatch(device):
        raise ConfigError(f"device: must be auto, cpu, cuda or cuda:N, got {device!r}")
    every = catalog.get("checkpoint_every", 10)
    if not _is_int(every) or every < 0:
        raise ConfigError(f"checkpoint_every: must be an integer >= 0 (0 = off), got {every!r}")
    least = catalog.get("checkpoint_min_seconds", 60)
    if isinstance(least, bool) or not isinstance(least, (int, float)) or not 0 <= least <= 600:
        raise ConfigError(
            f"checkpoint_min_seconds: must be a number of seconds in [0, 600], got {least!r}"
        )
    warm = catalog.get("warm_worker", "auto")
    if not (isinstance(warm, bool) or warm == "auto"):
        raise ConfigError(
            f"warm_worker: must be true, false or auto, got {catalog['warm_worker']!r}"
        )
    if catalog.get("scale") is not None and not isinstance(catalog["scale"], str):
        raise ConfigError(f"scale: must be a scale name or null, got {catalog['scale']!r}")


# A neutral complete block: each catalog block is checked over it, so its own values are judged
# whether or not the defaults it will be merged with are valid.
_NEUTRAL_TRAINING = {"rounds": 1, "batch_size": 1, "lr": 1.0, "local_epochs": 1}
_EXCLUSIVE = (("local_epochs", "local_steps"), ("clients_per_round", "participation"))


def _check_training_block(block: dict) -> None:
    """A training block's keys, value types (from TrainConfig's annotations) and ranges."""
    if not isinstance(block, dict):
        raise ValueError(f"training: expected a mapping, got {block!r}")
    fields = {f.name: f for f in dataclasses.fields(TrainConfig)}
    unknown = sorted(set(block) - set(fields))
    if unknown:
        raise ValueError(unknown_keys("training", unknown, fields))
    for key, value in block.items():
        why = _type_mismatch(str(fields[key].type), value)
        if why is not None:
            raise ValueError(f"training.{key}: must be {why} (got {value!r})")
    base = dict(_NEUTRAL_TRAINING)
    if "local_steps" in block:
        base.pop("local_epochs")
    if "participation" not in block:
        base["clients_per_round"] = 1
    TrainConfig.from_dict({**base, **block})


def _type_mismatch(annotation: str, value: Any) -> str | None:
    """Why `value` does not fit a TrainConfig field annotation (None = fits or not checked)."""
    optional = annotation.endswith("| None")
    if value is None:
        return None if optional or annotation.startswith("Augment") else "set (not null)"
    base = annotation.removesuffix("| None").strip()
    if base == "int":
        return None if _is_int(value) else "an integer"
    if base == "float":
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        return None if number and math.isfinite(value) else "a finite number"
    if base == "str":
        return None if isinstance(value, str) else "a string"
    if base == "bool":
        return None if isinstance(value, bool) else "true or false"
    return None


def _model_params(cls: type) -> set[str] | None:
    """The constructor's parameter names a catalog may set (None: it takes any keyword)."""
    params = inspect.signature(cls).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    return {p.name for p in params} - {"input_shape", "num_classes"}


def _algo_params(entry: dict) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k not in ALGORITHM_ENTRY_KEYS}


def resolve_algorithm(catalog: dict, name: str, scale: str) -> dict[str, Any]:
    """Algorithm entry with its hyperparameters; at stand-in scales `standin_params` override
    them and are also recorded on their own (run.yaml shows what was swapped)."""
    a = _entry(catalog, "algorithms", name)
    out = {"name": name, "algorithm": a["algorithm"], "params": _algo_params(a)}
    if data_mode(catalog, scale) == "standin" and a.get("standin_params"):
        out["params"].update(a["standin_params"])
        out["standin_params"] = dict(a["standin_params"])
    plugin = plugin_provenance(ALGORITHMS, a["algorithm"])
    if plugin is not None:
        out["plugin"] = plugin
    return out


def _entry(catalog: dict, section: str, name: str) -> dict[str, Any]:
    if name not in catalog[section]:
        raise ConfigError(unknown_entry(catalog, section, name))
    return catalog[section][name]


def scale_entry(catalog: dict, scale: str) -> dict[str, Any]:
    """The scale's settings (data mode and caps)."""
    if scale not in catalog["scales"]:
        raise ConfigError(unknown_entry(catalog, "scales", scale))
    return catalog["scales"][scale]


def standin_size(catalog: dict, scale: str) -> dict[str, int]:
    """Sizes of generated stand-ins at this scale ({} = each source's default)."""
    return dict(scale_entry(catalog, scale).get("standin_size", {}))


def data_mode(catalog: dict, scale: str) -> str:
    """ "real" or "standin" data at this scale."""
    return scale_entry(catalog, scale).get("data", "real")


def resolve_dataset(catalog: dict, name: str, scale: str | None = None) -> dict[str, Any]:
    """Dataset entry with its source and params (with `standin_params` over them, and recorded,
    at a stand-in scale)."""
    e = _entry(catalog, "datasets", name)
    out = {"name": name, "source": e["source"], "params": dict(e.get("params", {}))}
    if scale is not None and data_mode(catalog, scale) == "standin" and e.get("standin_params"):
        out["params"].update(e["standin_params"])
        out["standin_params"] = dict(e["standin_params"])
    if e.get("transform"):
        out["transform"] = check_transform(name, e["transform"])
    return out


def resolve_partition(catalog: dict, name: str, scale: str) -> dict[str, Any]:
    """Partition spec for `make_partition`, with the scale's client cap applied."""
    e = copy.deepcopy(_entry(catalog, "partitions", name))
    e.pop("training", None)
    e.pop("description", None)
    cap = scale_entry(catalog, scale).get("caps", {}).get("num_clients")
    if cap is not None and "num_clients" in e:
        e["num_clients"] = min(e["num_clients"], cap)
    elif cap is not None and e["kind"] == "natural":
        # A natural split keeps every group unless told otherwise; a stand-in may have many
        # small groups (one per 5 samples), so the cap keeps a seeded subset of them.
        e["num_clients"] = cap
    return e


def resolve_model(catalog: dict, name: str, scale: str) -> dict[str, Any]:
    """Model entry with its constructor params; at stand-in scales `standin_params` override
    them and are also recorded on their own (run.yaml shows what was shrunk)."""
    e = _entry(catalog, "models", name)
    out = {"name": name, "arch": e["arch"], "params": dict(e.get("params", {}))}
    if data_mode(catalog, scale) == "standin" and e.get("standin_params"):
        out["params"].update(e["standin_params"])
        out["standin_params"] = dict(e["standin_params"])
    plugin = plugin_provenance(MODELS, e["arch"])
    if plugin is not None:
        out["plugin"] = plugin
    return out


def resolve_training(
    catalog: dict, dataset: str, partition: str, model: str, algorithm: str, scale: str
) -> dict[str, Any]:
    """Training settings: defaults <- dataset <- partition <- model <- algorithm <- scale caps."""
    t = dict(catalog.get("training", {}))
    for section, name in (
        ("datasets", dataset),
        ("partitions", partition),
        ("models", model),
        ("algorithms", algorithm),
    ):
        block = _entry(catalog, section, name).get("training", {})
        for exclusive in (("local_epochs", "local_steps"), ("clients_per_round", "participation")):
            if any(k in block for k in exclusive):
                for k in exclusive:
                    t.pop(k, None)
        t.update(block)
    caps = scale_entry(catalog, scale).get("caps", {})
    for key in ("rounds", "clients_per_round", "local_epochs", "local_steps", "batch_size"):
        if key in caps and t.get(key) is not None:
            t[key] = min(t[key], caps[key])
    t.update(scale_entry(catalog, scale).get("training", {}))
    TrainConfig.from_dict(t)  # validates
    return t


def resolve_run(
    catalog: dict,
    scale: str,
    dataset: str,
    partition: str,
    model: str,
    algorithm: str,
    seed: int,
) -> dict[str, Any]:
    """The fully resolved spec of one run (what run.yaml records)."""
    a = _entry(catalog, "algorithms", algorithm)
    return {
        "scale": scale,
        "data_mode": data_mode(catalog, scale),
        "seed": int(seed),
        "dataset": resolve_dataset(catalog, dataset, scale),
        "partition": {"name": partition, **resolve_partition(catalog, partition, scale)},
        "model": resolve_model(catalog, model, scale),
        "algorithm": resolve_algorithm(catalog, algorithm, scale),
        "training": _check_objective(
            _check_participants(
                resolve_training(catalog, dataset, partition, model, algorithm, scale),
                resolve_partition(catalog, partition, scale),
                partition,
                scale,
            ),
            algorithm,
            a["algorithm"],
        ),
    }


def _check_objective(training: dict, name: str, kind: str) -> dict[str, Any]:
    """The run's training.objective must be one its algorithm is defined for."""
    try:
        ALGORITHMS[kind].check_objective(
            training.get("objective", "cross_entropy"), f"algorithm {name!r} ({kind})"
        )
    except ValueError as err:
        raise ConfigError(str(err)) from None
    return training


def _check_participants(training: dict, part: dict, name: str, scale: str) -> dict[str, Any]:
    """clients_per_round may not exceed the partition's num_clients (after the scale's caps)."""
    k, m = part.get("num_clients"), training.get("clients_per_round")
    if k is not None and m is not None and m > k:
        raise ConfigError(
            f"training.clients_per_round: {m} exceeds the {k} clients of partition {name!r} "
            f"at scale {scale}; valid: 1..{k}"
        )
    return training


# -- plugins: a user's algorithms and models, named by a config overlay -------------------------


def _registry(section: str) -> LazyRegistry:
    return {"algorithms": ALGORITHMS, "models": MODELS}[section]  # type: ignore[return-value]


def register_plugins(config: dict[str, Any]) -> None:
    """Add the config's `plugins` (`{algorithms: {name: "path/to/file.py:Class"}, models: ...}`,
    or `"module:attribute"`) to the registries, before the catalog's entries are checked against
    them. A file path is relative to the folder snakemake runs in."""
    plugins = config.get("plugins") or {}
    if not isinstance(plugins, dict):
        raise ConfigError(f"plugins: expected a mapping of {list(PLUGIN_SECTIONS)} to entries")
    _keys("plugins", plugins, PLUGIN_SECTIONS)
    for section, entries in plugins.items():
        if not isinstance(entries, dict) or not all(isinstance(t, str) for t in entries.values()):
            raise ConfigError(
                f"plugins.{section}: expected a mapping of names to 'path/to/file.py:Class' "
                "(or 'module:attribute')"
            )
        for name, target in entries.items():
            where = f"plugins.{section}.{name}"
            if ":" not in target:
                raise ConfigError(f"{where}: {target!r} is not 'path/to/file.py:Class'")
            path = plugin_file(target)
            if path is not None and not path.is_file():
                raise ConfigError(
                    f"{where}: no file {path} (a path is relative to the folder snakemake runs "
                    "in; give it from there, or as an absolute path)"
                )
            _registry(section).add(str(name), target, origin=f"config key {where}")


def plugin_provenance(registry: Any, name: str) -> dict[str, str] | None:
    """What a run records of a plugin entry (None for a built-in): where it is imported from and
    the sha256 of its file, so editing the file changes the runs' specs (and only theirs)."""
    if not registry.is_plugin(name):
        return None
    target = registry.target(name)
    path = plugin_file(target)
    if path is None:
        found = importlib.util.find_spec(target.rpartition(":")[0])
        path = Path(found.origin) if found is not None and found.origin else None
    digest = "" if path is None else _file_sha256(str(path), *_stamp(path))
    return {"target": target, "file": str(path or ""), "sha256": digest}


def _stamp(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_mtime_ns, st.st_size


@functools.lru_cache(maxsize=64)
def _file_sha256(path: str, mtime_ns: int, size: int) -> str:
    """A plugin file's sha256, read once per version of the file (every run of the grid asks)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def register_spec_plugins(spec: dict[str, Any]) -> None:
    """In a job's own process: register the plugins its resolved spec names (a file plugin is
    known only to the process that read the overlay; an entry point is found anyway)."""
    for section, key in (("algorithms", "algorithm"), ("models", "arch")):
        entry = spec.get(section[:-1], {})
        plugin = entry.get("plugin")
        if plugin is not None and entry[key] not in _registry(section):
            _registry(section).add(entry[key], plugin["target"], origin="the run's spec")
