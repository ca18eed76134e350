"""Round checkpoints: a killed, corrupted or disk-full run resumes to byte-identical metrics."""

import errno
import logging
import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from fedbench.config import load_catalog, resolve_run
from fedbench.data import prepare_dataset
from fedbench.data.base import save_dataset
from fedbench.data.partition import make_partition, save_partition
from fedbench.engine import checkpoint as ckpt_mod
from fedbench.engine import run as run_mod
from fedbench.engine.checkpoint import Checkpointer, CheckpointPolicy, spec_hash
from fedbench.engine.loop import RunState
from fedbench.engine.run import execute_run, progress_line
from fedbench.rng import Streams

ROUNDS = 6
EVERY_ROUND = CheckpointPolicy(every_rounds=1, min_seconds=0.0, max_seconds=0.0)
ROOT = Path(__file__).resolve().parents[2]


class _Slow(logging.Handler):
    """The killed child's log: each line to the parent, a pause after each round (timing only)."""

    def __init__(self, fd: int):
        super().__init__()
        self.fd = fd

    def emit(self, record):
        line = record.getMessage()
        os.write(self.fd, (line + "\n").encode())
        if line.startswith("round "):
            time.sleep(0.1)


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    root = tmp_path_factory.mktemp("ckpt")
    catalog = load_catalog(ROOT / "config" / "config.yaml")
    params = {"alpha": 1.0, "beta": 1.0, "num_clients": 6}
    ds = prepare_dataset("synthetic", params, None, "standin", np.random.default_rng(0))
    save_dataset(ds, root / "data.npz")
    spec_part = {"kind": "natural", "test_fraction": 0.2}
    part = make_partition(ds.y_train, ds.groups, spec_part, Streams(0).generator("partition"))
    save_partition(root / "part.npz", part)
    return root, catalog


def _spec(catalog, algorithm, executor="sequential", **training):
    spec = resolve_run(catalog, "smoke", "synthetic-1-1", "natural", "linear", algorithm, 0)
    spec["training"].update(
        rounds=ROUNDS, eval_every=2, clients_per_round=3, batch_size=40, executor=executor
    )
    if algorithm == "ditto":
        spec["algorithm"]["params"]["tau"] = 1  # one local-model epoch: a small test
    if executor == "vectorised":
        spec["training"]["chunk_size"] = 2  # not from free memory, which may differ on resume
    spec["training"].update(training)
    return spec


def _paths(root, tag):
    out = root / tag
    return out, (root / "data.npz", root / "part.npz", out / "metrics.jsonl", out / "run.yaml")


def _run(root, spec, tag, policy=EVERY_ROUND):
    out, paths = _paths(root, tag)
    info = execute_run(spec, *paths, checkpoint=policy)
    return (out / "metrics.jsonl").read_bytes(), info, out


class Crash(Exception):
    """Stands for the process dying right after the checkpoint of a given round."""


def _crash_after(monkeypatch, round_):
    save = Checkpointer.maybe_save

    def crashing(self, state, seconds):
        written = save(self, state, seconds)
        if state.round == round_:
            raise Crash
        return written

    monkeypatch.setattr(Checkpointer, "maybe_save", crashing)


def _kill_at_random_round(root, spec, tag, seed):
    """Train in a forked process; SIGKILL it at a seeded random round (after a seeded delay)."""
    rng = np.random.default_rng(seed)
    kill_round, delay = int(rng.integers(2, ROUNDS - 1)), float(rng.uniform(0, 0.15))
    out, paths = _paths(root, tag)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            os.close(read)
            logger = logging.getLogger("fedbench")
            logger.handlers, logger.propagate = [_Slow(write)], False
            logger.setLevel(logging.INFO)
            execute_run(spec, *paths, checkpoint=EVERY_ROUND)
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as lines:
        for line in lines:
            if line.startswith(f"round {kill_round}/"):
                time.sleep(delay)
                os.kill(pid, signal.SIGKILL)
                break
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status), "the run ended before it was killed"
    assert not (out / "metrics.jsonl").exists()
    return out


@pytest.mark.parametrize(
    "algorithm,executor",
    [
        ("fedavg", "sequential"),
        ("scaffold", "sequential"),  # server and client control variates
        ("ditto", "sequential"),  # a personal local model per client
        ("ditto", "vectorised"),
    ],
)
def test_sigkill_then_resume_is_byte_identical(prepared, algorithm, executor):
    root, catalog = prepared
    spec = _spec(catalog, algorithm, executor)
    tag = f"{algorithm}-{executor}"
    reference, _, _ = _run(root, spec, f"{tag}-ref")
    out = _kill_at_random_round(root, spec, f"{tag}-killed", seed=len(tag))
    # A kill between a save's two renames (current -> prev, new -> current) leaves only
    # checkpoint.prev.pt, which resuming falls back to: either file is a state to resume from.
    assert {"checkpoint.pt", "checkpoint.prev.pt"} & {p.name for p in out.iterdir()}
    resumed, info, _ = _run(root, spec, f"{tag}-killed")
    assert resumed == reference
    assert info["resumed"] is True and 1 <= info["resumed_from_round"] < ROUNDS
    assert yaml.safe_load((out / "run.yaml").read_text())["resumed"] is True
    assert sorted(p.name for p in out.iterdir()) == ["metrics.jsonl", "run.yaml"]


def _corrupt(path: Path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def test_corrupt_checkpoint_falls_back_to_previous_then_to_scratch(prepared, monkeypatch, caplog):
    root, catalog = prepared
    spec = _spec(catalog, "scaffold")
    reference, _, _ = _run(root, spec, "corrupt-ref")
    for tag, corrupt, expect in (
        ("one", ["checkpoint.pt"], 3),
        ("both", ["checkpoint.pt", "checkpoint.prev.pt"], None),
    ):
        with monkeypatch.context() as m:
            _crash_after(m, 4)
            with pytest.raises(Crash):
                _run(root, spec, tag)
        out = root / tag
        for name in corrupt:
            _corrupt(out / name)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="fedbench.checkpoint"):
            got, info, _ = _run(root, spec, tag)
        assert got == reference
        assert info["resumed_from_round"] == expect and info["resumed"] is (expect is not None)
        refused = [r for r in caplog.records if "refused" in r.getMessage()]
        assert len(refused) == len(corrupt)


def test_kill_between_the_renames_resumes_from_previous(prepared, monkeypatch):
    """A save renames current -> prev, then new -> current: killed in between, only the previous
    checkpoint is on disk, and the run resumes from it (one round earlier), byte-identical."""
    root, catalog = prepared
    spec = _spec(catalog, "scaffold")
    reference, _, _ = _run(root, spec, "window-ref")
    with monkeypatch.context() as m:
        _crash_after(m, 4)
        with pytest.raises(Crash):
            _run(root, spec, "window")
    out = root / "window"
    (out / "checkpoint.pt").unlink()
    got, info, _ = _run(root, spec, "window")
    assert got == reference
    assert info["resumed"] is True and info["resumed_from_round"] == 3


def test_checkpoint_of_another_spec_is_refused(prepared, monkeypatch, caplog):
    root, catalog = prepared
    spec, other = _spec(catalog, "fedavg"), _spec(catalog, "fedavg", lr=0.02)
    reference, _, _ = _run(root, other, "other-ref")
    with monkeypatch.context() as m:
        _crash_after(m, 3)
        with pytest.raises(Crash):
            _run(root, spec, "other")
    with caplog.at_level(logging.WARNING, logger="fedbench.checkpoint"):
        got, info, _ = _run(root, other, "other")
    assert got == reference and info["resumed"] is False
    assert any("different run spec" in r.getMessage() for r in caplog.records)


class _FullDisk:
    """A file whose first write stores half its bytes, then fails as a full disk does."""

    def __init__(self, f):
        self.f = f

    def write(self, data):
        self.f.write(data[: len(data) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def __getattr__(self, name):
        return getattr(self.f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()


def _full_disk_open(path, mode="r", *args, **kwargs):
    f = open(path, mode, *args, **kwargs)
    return _FullDisk(f) if "w" in mode else f


def test_full_disk_at_the_end_leaves_no_output_and_the_checkpoint(prepared, monkeypatch):
    root, catalog = prepared
    spec = _spec(catalog, "fedavg")
    reference, _, _ = _run(root, spec, "full-ref")
    out, paths = _paths(root, "full")
    with monkeypatch.context() as m:
        m.setattr("fedbench.io.open", _full_disk_open, raising=False)
        with pytest.raises(OSError) as err:
            execute_run(spec, *paths, checkpoint=EVERY_ROUND, params_path=out / "params.pt")
    assert err.value.errno == errno.ENOSPC
    # no half-written (or complete) output, no temporary file; the last checkpoint is kept
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint.prev.pt", "checkpoint.pt"]
    got, info, _ = _run(root, spec, "full")
    assert got == reference and info["resumed_from_round"] == ROUNDS - 1


def test_full_disk_while_checkpointing_keeps_training(prepared, monkeypatch, caplog):
    root, catalog = prepared
    spec = _spec(catalog, "fedavg")
    reference, _, _ = _run(root, spec, "ckfull-ref")
    with monkeypatch.context() as m:
        m.setattr(ckpt_mod, "open", _full_disk_open, raising=False)
        with caplog.at_level(logging.WARNING, logger="fedbench.checkpoint"):
            got, info, out = _run(root, spec, "ckfull")
    assert got == reference and info["resumed"] is False
    assert sum("not written" in r.getMessage() for r in caplog.records) == ROUNDS - 1
    assert sorted(p.name for p in out.iterdir()) == ["metrics.jsonl", "run.yaml"]


def test_checkpoint_restores_torch_global_generator(tmp_path):
    state = RunState(global_params={"w": torch.ones(2)}, server_state={}, client_states={})
    ck = Checkpointer(tmp_path / "checkpoint.pt", spec_hash({"a": 1}), EVERY_ROUND)
    ck.save(state, 0.0)
    first = torch.rand(4)
    loaded = ck.load()
    assert torch.equal(torch.rand(4), first)
    assert torch.equal(loaded.state.global_params["w"], torch.ones(2))


class _RunsCode:
    """Unpickling this calls os.system: what a checkpoint swapped on a shared disk could hold."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _forge(path: Path, payload) -> None:
    """A checkpoint file with a valid trailer and checksum around `payload`."""
    import hashlib
    import io

    buf = io.BytesIO()
    torch.save(payload, buf)
    body = buf.getvalue()
    path.write_bytes(body + ckpt_mod.MAGIC + hashlib.sha256(body).digest())


@pytest.mark.parametrize("where", ["payload", "leaf"])
def test_a_checkpoint_that_would_run_code_is_refused_and_the_run_resumes(tmp_path, caplog, where):
    """With a matching checksum, a checkpoint whose pickle calls os.system (or holds any object
    other than tensors, numbers and strings) is refused unread, deleted with a warning, and the
    run resumes from the previous checkpoint; under weights_only=False it would have run."""
    marker = tmp_path / "ran"
    ck = Checkpointer(tmp_path / "checkpoint.pt", spec_hash({"a": 1}), EVERY_ROUND)
    good = RunState(global_params={"w": torch.ones(2)}, server_state={}, client_states={}, round=3)
    ck.save(good, 0.0)
    ck.save(good, 0.0)  # two generations: checkpoint.pt and checkpoint.prev.pt
    evil = _RunsCode(marker)
    payload = {"format": ckpt_mod.FORMAT, "spec_hash": ck.run_hash, "round": 5}
    _forge(ck.path, evil if where == "payload" else {**payload, "global_params": {"w": evil}})
    with caplog.at_level(logging.WARNING, logger="fedbench.checkpoint"):
        resumed = Checkpointer(ck.path, ck.run_hash, EVERY_ROUND).load()
    assert not marker.exists()
    assert resumed is not None and resumed.state.round == 3 and resumed.path == ck.prev
    warning = " ".join(r.getMessage() for r in caplog.records)
    assert "refused" in warning and "could run code" in warning, warning
    assert not ck.path.exists()
    # The same bytes under the old reading would have run the command: the test can fail.
    import io

    torch.load(io.BytesIO(ck.prev.read_bytes()), weights_only=False)  # a good file loads
    body = io.BytesIO()
    torch.save(evil, body)
    torch.load(io.BytesIO(body.getvalue()), weights_only=False)
    assert marker.exists()


def test_a_checkpoint_of_an_unlisted_type_is_refused(tmp_path, caplog):
    """A checkpoint holding an allowed-by-torch type outside `ALLOWED` (a torch.dtype) is refused
    after loading, naming the entry."""
    ck = Checkpointer(tmp_path / "checkpoint.pt", spec_hash({"a": 1}), EVERY_ROUND)
    payload = {"format": ckpt_mod.FORMAT, "spec_hash": ck.run_hash, "round": 1, "x": torch.float32}
    _forge(ck.path, payload)
    with caplog.at_level(logging.WARNING, logger="fedbench.checkpoint"):
        assert ck.load() is None
    assert "checkpoint['x']: a dtype" in caplog.text


def test_policy_rounds_and_wall_time():
    p = CheckpointPolicy(every_rounds=10, min_seconds=60, max_seconds=600)
    assert not p.due(9, 100)  # too few rounds
    assert p.due(10, 60)  # enough rounds, enough time
    assert not p.due(25, 59)  # fast rounds: at most one checkpoint a minute
    assert p.due(1, 600)  # slow rounds: at least one every ten minutes
    assert not CheckpointPolicy(every_rounds=0).due(100, 1e9)
    with pytest.raises(ValueError, match="min_seconds"):
        CheckpointPolicy(min_seconds=10, max_seconds=5)


def test_progress_line_format():
    record = {"summary": {"global": {"top1": {"wmean": 0.81234}}}, "global_test": None}
    line = progress_line(12, 200, 0.43121, record, 3725.4)
    assert line == "round 12/200 loss 0.4312 acc 0.8123 eta 1:02:05"
    assert progress_line(13, 200, 0.5, None, 59.6) == "round 13/200 loss 0.5000 acc - eta 0:01:00"


def test_run_module_uses_the_default_checkpoint_path():
    assert run_mod.default_path("a/b/metrics.jsonl") == Path("a/b/checkpoint.pt")


def test_resume_under_another_commit_is_recorded(prepared, monkeypatch, caplog):
    root, catalog = prepared
    spec = _spec(catalog, "fedavg")
    with monkeypatch.context() as m:
        m.setattr(run_mod, "git_commit", lambda: "aaaa")
        _crash_after(m, 2)
        with pytest.raises(Crash):
            _run(root, spec, "commit")
    monkeypatch.setattr(run_mod, "git_commit", lambda: "bbbb")
    with caplog.at_level(logging.WARNING, logger="fedbench.run"):
        _, info, _ = _run(root, spec, "commit")
    assert info["git_commit"] == "bbbb" and info["resumed_from_commit"] == "aaaa"
    assert any("aaaa" in r.getMessage() for r in caplog.records)


def test_truncated_checkpoint_and_stale_temporary_are_cleaned(prepared, monkeypatch, caplog):
    root, catalog = prepared
    spec = _spec(catalog, "fedavg")
    reference, _, _ = _run(root, spec, "trunc-ref")
    with monkeypatch.context() as m:
        _crash_after(m, 2)
        with pytest.raises(Crash):
            _run(root, spec, "trunc")
    out = root / "trunc"
    data = (out / "checkpoint.pt").read_bytes()
    (out / "checkpoint.pt").write_bytes(data[: len(data) // 3])  # as a torn write would
    (out / ".checkpoint.pt.k1ll3d.pt.tmp").write_bytes(data[:100])  # a write killed mid-file
    with caplog.at_level(logging.WARNING, logger="fedbench.checkpoint"):
        got, info, _ = _run(root, spec, "trunc")
    assert got == reference and info["resumed_from_round"] == 1
    assert any("trailer" in r.getMessage() for r in caplog.records)
    assert sorted(p.name for p in out.iterdir()) == ["metrics.jsonl", "run.yaml"]


def test_crash_then_resume_with_per_class_loss_is_byte_identical(prepared, monkeypatch):
    root, catalog = prepared
    spec = _spec(catalog, "ditto", per_class_loss=True)
    reference, _, _ = _run(root, spec, "perclass-ref")
    assert b'"per_class_loss"' in reference.splitlines()[-1]
    with monkeypatch.context() as m:
        _crash_after(m, 4)
        with pytest.raises(Crash):
            _run(root, spec, "perclass")
    resumed, info, _ = _run(root, spec, "perclass")
    assert resumed == reference and info["resumed_from_round"] == 4
