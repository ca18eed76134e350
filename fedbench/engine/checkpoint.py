"""Round checkpoints: a killed run resumes from its last complete round, byte for byte.

A checkpoint holds everything `run_rounds` carries from one round to the next (global parameters,
server state with any server optimiser, every client's state, the metrics records so far) plus
torch's global generator states. The run's named streams (`fedbench.rng`) are keyed by (round,
client) from the seed and hold no state, so they need none. Local optimiser state (momentum) lives
inside one client's round and never crosses a round boundary.

File format: `torch.save` bytes, then a trailer `MAGIC + sha256(bytes)`; a file whose digest does
not match (truncated, bit rot) is refused. Two generations are kept (`checkpoint.pt` and
`checkpoint.prev.pt`): a new one is written to a temporary file, and only once it is complete does
the current one become the previous one. A checkpoint of another run spec (its hash) is refused.

A checkpoint cannot run code: it is read with `torch.load(weights_only=True)` (torch's restricted
unpickler: tensors, numbers, strings, bytes, None, and dicts, lists and tuples of them; any other
global is refused before it is built), and what it returns is checked against the same list
(`ALLOWED`). The checksum guards against damage only: anyone who can write the file can write a
matching digest. A refused file is deleted with a warning and the run resumes from the previous
checkpoint or from round 0, to the same results.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import pickle
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from fedbench.engine.loop import RunState
from fedbench.io import atomic_path

log = logging.getLogger("fedbench.checkpoint")

MAGIC = b"FEDBENCH-CKPT-1\n"
# What a checkpoint may hold (leaves; containers: dict, list, tuple), checked after loading.
ALLOWED = (torch.Tensor, int, float, str, bytes, bool, type(None))
TRAILER = len(MAGIC) + 32
FORMAT = 1


@dataclass(frozen=True)
class CheckpointPolicy:
    """When to write: every `every_rounds` rounds but not within `min_seconds` of the last one
    (fast runs do not spend their time writing), and in any case once `max_seconds` have passed
    (slow rounds lose at most that much work). `every_rounds = 0` turns checkpoints off."""

    every_rounds: int = 10
    min_seconds: float = 60.0
    max_seconds: float = 600.0

    def __post_init__(self):
        if not isinstance(self.every_rounds, int) or self.every_rounds < 0:
            raise ValueError(
                f"checkpoint every_rounds must be an integer >= 0, got {self.every_rounds!r}"
            )
        if not 0 <= self.min_seconds <= self.max_seconds:
            raise ValueError(
                "checkpoint: need 0 <= min_seconds <= max_seconds, got "
                f"{self.min_seconds!r}, {self.max_seconds!r}"
            )

    def due(self, rounds_since: int, seconds_since: float) -> bool:
        """Whether to write after this round, given rounds and seconds since the last write."""
        if self.every_rounds == 0 or rounds_since < 1:
            return False
        if seconds_since >= self.max_seconds:
            return True
        return rounds_since >= self.every_rounds and seconds_since >= self.min_seconds


def spec_hash(spec: dict[str, Any]) -> str:
    """sha256 of the resolved run spec (canonical JSON): what a checkpoint must belong to."""
    text = json.dumps(spec, sort_keys=True, separators=(",", ":"), default=repr)
    return hashlib.sha256(text.encode()).hexdigest()


def default_path(metrics_path: str | os.PathLike) -> Path:
    """`checkpoint.pt` beside the run's metrics file (never a declared Snakemake output)."""
    return Path(metrics_path).parent / "checkpoint.pt"


class _HashingWriter:
    """A file object that hashes what passes through it (torch.save writes through it)."""

    def __init__(self, f):
        self.f, self.sha = f, hashlib.sha256()

    def write(self, data) -> int:
        self.sha.update(data)
        return self.f.write(data)

    def flush(self) -> None:
        self.f.flush()


def _check_leaves(tree: Any, where: str = "checkpoint") -> None:
    """ValueError naming the first entry of `tree` that is not a container of `ALLOWED`."""
    if isinstance(tree, dict):
        for k, v in tree.items():
            if not isinstance(k, (str, int)):
                raise ValueError(f"{where}: a key of type {type(k).__name__}")
            _check_leaves(v, f"{where}[{k!r}]")
    elif isinstance(tree, (list, tuple)):
        for i, v in enumerate(tree):
            _check_leaves(v, f"{where}[{i}]")
    elif not isinstance(tree, ALLOWED):
        raise ValueError(f"{where}: a {type(tree).__name__}, not a tensor, number or string")


def _rng_states() -> dict[str, Any]:
    out: dict[str, Any] = {"torch_cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        out["torch_cuda"] = torch.cuda.get_rng_state_all()
    return out


def _set_rng_states(states: dict[str, Any]) -> None:
    torch.set_rng_state(states["torch_cpu"])
    if "torch_cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["torch_cuda"])


def _to(tree: Any, device: torch.device | str) -> Any:
    if isinstance(tree, torch.Tensor):
        t = tree.detach().to(device)
        if t.untyped_storage().nbytes() > t.numel() * t.element_size():
            t = t.clone()  # a view (a row of a stacked round): torch.save would write it all
        return t
    if isinstance(tree, dict):
        return {k: _to(v, device) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(_to(v, device) for v in tree)
    return tree


@dataclass
class Resumed:
    """A loaded checkpoint: the state to continue from, the wall time already spent, and the
    writer's `meta` (e.g. its git commit)."""

    state: RunState
    seconds: float
    path: Path
    meta: dict[str, Any]


class Checkpointer:
    """Writes and finds the checkpoints of one run (identified by its spec hash)."""

    def __init__(
        self,
        path: str | os.PathLike,
        run_hash: str,
        policy: CheckpointPolicy,
        meta: dict[str, Any] | None = None,
    ):
        self.meta = dict(meta or {})
        self.path = Path(path)
        self.prev = self.path.with_name(self.path.stem + ".prev" + self.path.suffix)
        self.run_hash, self.policy = run_hash, policy
        self.last_round, self.last_time = 0, time.monotonic()
        self.written = 0

    def files(self) -> list[Path]:
        """The checkpoint generations, newest first."""
        return [self.path, self.prev]

    def maybe_save(self, state: RunState, seconds: float) -> bool:
        """Write a checkpoint after `state.round` if the policy says so; True if written."""
        now = time.monotonic()
        if not self.policy.due(state.round - self.last_round, now - self.last_time):
            return False
        return self.save(state, seconds)

    def save(self, state: RunState, seconds: float) -> bool:
        """Write one checkpoint (complete or not at all); a failed write (disk full) is logged
        and training goes on with the previous checkpoints kept. True if written."""
        started = time.monotonic()
        payload = {
            "format": FORMAT,
            "spec_hash": self.run_hash,
            "round": state.round,
            "seconds": seconds,
            "global_params": _to(state.global_params, "cpu"),
            "server_state": _to(state.server_state, "cpu"),
            "client_states": _to(state.client_states, "cpu"),
            "records": state.records,
            "rng": _rng_states(),
            "meta": self.meta,
        }
        try:
            with atomic_path(self.path, suffix=".pt") as tmp:
                with open(tmp, "wb") as f:
                    w = _HashingWriter(f)
                    torch.save(payload, w)
                    f.write(MAGIC + w.sha.digest())
                    f.flush()
                    os.fsync(f.fileno())
                if self.path.exists():
                    os.replace(self.path, self.prev)
        except OSError as err:
            log.warning("checkpoint after round %d not written: %s", state.round, err)
            return False
        self.last_round, self.last_time = state.round, time.monotonic()
        self.written += 1
        log.info(
            "checkpoint round %d (%.1f MB, %.2fs)",
            state.round,
            self.path.stat().st_size / 2**20,
            self.last_time - started,
        )
        return True

    def _read(self, path: Path, device: torch.device | str) -> dict[str, Any]:
        data = path.read_bytes()
        if len(data) < TRAILER or data[-TRAILER:-32] != MAGIC:
            raise ValueError("no checkpoint trailer (truncated or not a fedbench checkpoint)")
        body = memoryview(data)[:-TRAILER]
        if hashlib.sha256(body).digest() != data[-32:]:
            raise ValueError("checksum mismatch (corrupted)")
        try:
            payload = torch.load(io.BytesIO(body), map_location=device, weights_only=True)
        except pickle.UnpicklingError as err:
            first = str(err).strip().splitlines()[-1] if str(err).strip() else type(err).__name__
            raise ValueError(
                f"it holds something other than tensors, numbers and strings (refused unread, "
                f"it could run code): {first}"
            ) from None
        _check_leaves(payload)
        if not isinstance(payload, dict) or payload.get("format") != FORMAT:
            raise ValueError(f"format {payload.get('format')!r}, this fedbench reads {FORMAT}")
        if payload["spec_hash"] != self.run_hash:
            raise ValueError("written by a different run spec")
        return payload

    def load(self, device: torch.device | str = "cpu") -> Resumed | None:
        """The newest valid checkpoint of this run, or None (each refused file is a warning).

        A damaged checkpoint needs nothing from the user: it is deleted with a warning in the
        job's log and the run goes on from the previous one, or from round 0, to the same
        results (a resumed run is byte-identical to an uninterrupted one)."""
        refused = 0
        for path in self.files():
            if not path.exists():
                continue
            try:
                payload = self._read(path, device)
            except Exception as err:  # any unreadable file means: do not resume from it
                log.warning("checkpoint %s refused (deleted): %s", path, err)
                path.unlink(missing_ok=True)  # else the next write would rotate it into .prev
                refused += 1
                continue
            _set_rng_states(payload["rng"])
            state = RunState(
                global_params=payload["global_params"],
                server_state=payload["server_state"],
                client_states=payload["client_states"],
                round=payload["round"],
                records=payload["records"],
            )
            self.last_round = state.round
            log.info("resuming from %s (round %d)", path, state.round)
            return Resumed(state, float(payload["seconds"]), path, payload["meta"])
        if refused:
            log.warning("no valid checkpoint left: the run trains from round 0 (same results)")
        return None

    def remove(self) -> None:
        """Delete every generation and any temporary file a killed write left behind."""
        for path in self.files():
            path.unlink(missing_ok=True)
        self.clean_temporaries()

    def clean_temporaries(self) -> None:
        """Remove the temporary files of writes that a kill interrupted."""
        for tmp in self.path.parent.glob(f".{self.path.name}.*.tmp"):
            tmp.unlink(missing_ok=True)
