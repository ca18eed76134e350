"""The warm worker: a job handed to it runs in a forked child exactly as it would in its own process
(working directory, environment, streams, exit status, signals), and a training job's outputs are
byte-identical to the same job run in-process."""

from __future__ import annotations

import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from fedbench import worker

ROOT = Path(__file__).resolve().parents[1]

# What Snakemake's script preamble provides: a picklable `snakemake` object with attributes.
FAKE = '''
class NS(dict):
    """A dict whose keys are also attributes (like Snakemake's named lists)."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None
'''


def _client(tmp: Path, adapter: str, job: dict, name: str = "client.py") -> Path:
    """A file that does what Snakemake's `script:` does: make `snakemake`, then run the adapter."""
    (tmp / "fakejob.py").write_text(FAKE)
    source = Path(adapter).read_text()
    head = (
        f"import sys; sys.path.insert(0, {str(tmp)!r}); from fakejob import NS; "
        f"snakemake = NS({job!r}); snakemake = NS({{k: NS(v) if isinstance(v, dict) else v "
        f"for k, v in snakemake.items()}}); __file__ = {str(adapter)!r}\n"
    )
    path = tmp / name
    path.write_text(head + source)
    return path


def _adapter(tmp: Path, body: str, name: str = "adapter.py") -> str:
    path = tmp / name
    path.write_text(
        "from fedbench.worker import delegate\n\n"
        "delegate(snakemake, __file__)  # noqa: F821\n\n" + textwrap.dedent(body)
    )
    return str(path)


def _env(warm_dir: Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, worker.DIR_ENV: str(warm_dir), worker.ENV_SWITCH: "1", **extra}
    env.pop("PYTHONPATH", None)
    return env


def _pid_job(tmp_path: Path, env: dict[str, str], stderr: str = "") -> str:
    """Run a job that writes its pid; say whether it ran in the adapter's process or elsewhere."""
    out = tmp_path / "pid.txt"
    adapter = _adapter(
        tmp_path,
        "import os; from pathlib import Path; "
        "Path(snakemake.output[0]).write_text(str(os.getpid()))  # noqa: F821\n",
        name="pid_adapter.py",
    )
    client = _client(tmp_path, adapter, {"config": {}, "output": [str(out)]}, "pid_client.py")
    proc = subprocess.Popen(
        [sys.executable, str(client)], env=env, stderr=subprocess.PIPE, text=True
    )
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert stderr in err
    return "in-process" if out.read_text() == str(proc.pid) else "elsewhere"


def _wait_for(check, timeout: float = 60.0, what: str = "condition") -> None:
    end = time.monotonic() + timeout
    while not check():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # the process may be reaped between the two looks
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def _start_server(tmp_path: Path, env: dict[str, str], *preload: str, **server_env: str):
    """A server for the socket that clients with `env` look for, itself started with `server_env`
    (so a test can tell the job's environment from the server's)."""
    path = worker.socket_path(env)
    log = open(tmp_path / "server.log", "w")  # noqa: SIM115 - closed by the caller's fixture
    proc = subprocess.Popen(
        worker.server_command(path, 60, preload),
        env={**env, **server_env},
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    _wait_for(path.exists, timeout=120, what="the server's socket")
    return path, proc, log


@pytest.fixture
def warm_dir():
    """A short folder for sockets (a socket's path must fit in 108 bytes; pytest's do not)."""
    folder = Path(tempfile.mkdtemp(prefix="fbw", dir="/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def server(tmp_path, warm_dir):
    """A light server (nothing preloaded beyond the standard library) and its clients' env."""
    env = _env(warm_dir, JOB_VALUE="from-the-job")
    path, proc, log = _start_server(tmp_path, env, "json", JOB_VALUE="the-server's")
    yield env, path, proc
    proc.terminate()
    proc.wait(timeout=10)
    log.close()
    assert not path.exists()  # a stopped server removes its socket


def test_job_runs_in_a_forked_child_with_the_callers_cwd_env_and_streams(tmp_path, server):
    env, _, proc = server
    work = tmp_path / "work"
    work.mkdir()
    adapter = _adapter(
        tmp_path,
        """
        import os, sys
        from pathlib import Path
        Path(snakemake.output[0]).write_text(  # noqa: F821
            f"{os.getpid()} {os.getppid()} {os.getcwd()} {os.environ['JOB_VALUE']}"
        )
        print("to stdout", snakemake.params.word)  # noqa: F821
        print("to stderr", file=sys.stderr)
        """,
    )
    out = tmp_path / "out.txt"
    client = _client(
        tmp_path, adapter, {"config": {}, "output": [str(out)], "params": {"word": "w"}}
    )
    run = subprocess.run(
        [sys.executable, str(client)], cwd=work, env=env, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    pid, ppid, cwd, value = out.read_text().split()
    assert ppid == str(proc.pid)  # forked by the server, not run by the client
    assert int(pid) != proc.pid
    assert (cwd, value) == (str(work), "from-the-job")
    assert run.stdout == "to stdout w\n"
    assert run.stderr == "to stderr\n"


@pytest.mark.parametrize(
    ("body", "code", "message"),
    [
        ("raise ValueError('boom')", 1, "ValueError: boom"),
        ("import sys; sys.exit(3)", 3, ""),
        ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", 128 + 9, ""),
    ],
)
def test_exit_status_and_traceback_reach_the_adapter(tmp_path, server, body, code, message):
    env, _, _ = server
    client = _client(tmp_path, _adapter(tmp_path, body), {"config": {}})
    run = subprocess.run([sys.executable, str(client)], env=env, capture_output=True, text=True)
    assert run.returncode == code
    assert message in run.stderr


def test_a_failed_jobs_traceback_and_advice_reach_its_log_file(tmp_path, server):
    """Snakemake says "check log file(s) for error details": the child's job logs its error with
    the traceback and, last, the command to run (the terminal still gets the traceback)."""
    env, _, _ = server
    data, out, log = tmp_path / "data.npz", tmp_path / "part.npz", tmp_path / "job.log"
    data.write_bytes(b"PK\x03\x04 cut short")
    job = {
        "config": {},
        "input": [str(data)],
        "params": {"spec": {}},
        "wildcards": {"seed": "0"},
        "output": [str(out)],
        "log": [str(log)],
    }
    client = _client(tmp_path, str(ROOT / "workflow" / "scripts" / "partition.py"), job)
    run = subprocess.run([sys.executable, str(client)], env=env, capture_output=True, text=True)
    assert run.returncode == 1
    assert re.search(r"\d+ \S+partition\.py exit 1$", (tmp_path / "server.log").read_text(), re.M)
    text = log.read_text()
    command = f"snakemake --cores all {out} --forcerun {data}"
    assert "Traceback (most recent call last)" in text and f"dataset file {data} is corrupt" in text
    assert text.splitlines()[-1].endswith(command) and "what to do:" in text.splitlines()[-1]
    assert "Traceback" in run.stderr and command in run.stderr


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_signalled_adapter_takes_its_child_with_it(tmp_path, server, sig):
    env, _, proc = server
    pid_file = tmp_path / "child.pid"
    adapter = _adapter(
        tmp_path,
        f"""
        import os, time
        from pathlib import Path
        Path({str(pid_file)!r}).write_text(str(os.getpid()))
        time.sleep(60)
        """,
    )
    client = subprocess.Popen(
        [sys.executable, str(_client(tmp_path, adapter, {"config": {}}))], env=env
    )
    _wait_for(lambda: pid_file.exists() and pid_file.read_text(), what="the child's pid")
    child = int(pid_file.read_text())
    assert child != client.pid
    client.send_signal(sig)
    assert client.wait(timeout=20) == (128 + sig if sig == signal.SIGTERM else -sig)
    _wait_for(lambda: not _alive(child), timeout=20, what="the child to stop")
    assert proc.poll() is None  # the server itself carries on


def test_without_a_server_the_job_runs_in_process_and_starts_one(tmp_path, warm_dir):
    env = _env(warm_dir)
    assert _pid_job(tmp_path, env) == "in-process"
    _wait_for(lambda: any(warm_dir.glob("*.sock")), timeout=120, what="the started server")
    sock = next(warm_dir.glob("*.sock"))
    assert worker.shutdown(sock) == 1
    _wait_for(lambda: not any(warm_dir.glob("*.sock")), what="the server to stop")


def test_switched_off_the_job_runs_in_process_and_starts_nothing(tmp_path, warm_dir):
    assert _pid_job(tmp_path, {**_env(warm_dir), worker.ENV_SWITCH: "0"}) == "in-process"
    assert list(warm_dir.iterdir()) == []


def test_a_job_the_workflow_plans_alone_starts_no_server(tmp_path, warm_dir):
    """A one-job run: its server would import for nothing and compete with the job for a core."""
    env = {**_env(warm_dir), worker.PLANNED_ENV: "1"}
    assert _pid_job(tmp_path, env) == "in-process"
    time.sleep(0.5)  # a server would have made its lock and log by now
    assert list(warm_dir.iterdir()) == []
    assert worker.worth_starting({worker.PLANNED_ENV: "2"})
    assert worker.worth_starting({})  # not told (Snakemake --no-hooks): start one, as before
    assert not worker.worth_starting({worker.PLANNED_ENV: "0"})
    # the count is not part of the socket's name: the jobs of runs of any size share a server
    assert worker.socket_path(env) == worker.socket_path({**env, worker.PLANNED_ENV: "7"})


def test_plan_counts_the_script_jobs_snakemake_will_run(monkeypatch):
    from types import SimpleNamespace as NS

    monkeypatch.delenv(worker.PLANNED_ENV, raising=False)
    jobs = [NS(rule=NS(script="a.py")), NS(rule=NS(script=None)), NS(rule=NS(script="b.py"))]
    flow = NS(dag=NS(needrun_jobs=lambda: iter(jobs)))
    assert worker.plan(flow) == 2 and os.environ[worker.PLANNED_ENV] == "2"
    assert worker.plan(NS()) == -1  # a Snakemake without the DAG there: the jobs decide


def test_a_server_stopped_while_importing_leaves_nothing_behind(tmp_path, warm_dir):
    """shutdown() at the end of a short run lands while the server still imports: it exits
    without its socket, lock or (empty) log."""
    (tmp_path / "slowmod.py").write_text("import time\ntime.sleep(30)\n")
    env = {**_env(warm_dir), "PYTHONPATH": str(tmp_path)}
    path = worker.socket_path(env)
    with open(path.with_suffix(".log"), "ab") as out:  # as start_server opens it
        proc = subprocess.Popen(
            worker.server_command(path, 60, ("slowmod",)),
            env=env,
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    _wait_for(lambda: worker._lock_held(path.with_suffix(".lock")), what="the server's lock")
    assert worker.shutdown(path) == 1
    proc.wait(timeout=20)
    assert list(warm_dir.iterdir()) == []


def test_wanted_follows_the_config_key_the_switch_and_the_machine(monkeypatch):
    no_gpu = {}
    assert worker.wanted({worker.CONFIG_KEY: False}, no_gpu) is False
    assert worker.wanted({worker.CONFIG_KEY: True, "device": "cuda"}, no_gpu) is True
    assert worker.wanted({worker.CONFIG_KEY: True}, {worker.ENV_SWITCH: "0"}) is False
    assert worker.wanted({worker.CONFIG_KEY: False}, {worker.ENV_SWITCH: "1"}) is True
    # auto: never under SLURM, never for a CUDA device
    assert worker.wanted({}, {"SLURM_JOB_ID": "7"}) is False
    assert worker.wanted({"device": "cuda:1"}, no_gpu) is False
    with pytest.raises(ValueError, match="warm_worker.*valid: true, false, auto"):
        worker.wanted({worker.CONFIG_KEY: "sometimes"}, no_gpu)


def test_a_socket_path_too_long_runs_the_job_in_process(tmp_path):
    deep = tmp_path / ("d" * 60)
    deep.mkdir(mode=0o700)  # private: the folder check passes, the length check does not
    assert _pid_job(tmp_path, _env(deep), stderr="too long for a socket") == "in-process"
    assert list(deep.iterdir()) == []


def test_the_socket_name_changes_with_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(worker.DIR_ENV, str(tmp_path))
    first = worker.socket_path()
    assert first == worker.socket_path()
    monkeypatch.setenv("HF_HUB_OFFLINE", "0" if os.environ.get("HF_HUB_OFFLINE") == "1" else "1")
    assert worker.socket_path() != first
    assert first.parent == tmp_path


def test_the_train_adapter_in_the_worker_is_byte_identical_to_its_own_process(tmp_path, warm_dir):
    """The real workflow/scripts/train.py, once in-process and once in a forked child."""
    from fedbench.config import load_catalog, resolve_run
    from fedbench.data import prepare_dataset
    from fedbench.data.base import save_dataset
    from fedbench.data.partition import make_partition, save_partition
    from fedbench.rng import Streams

    ds = prepare_dataset(
        "synthetic",
        {"alpha": 1.0, "beta": 1.0, "num_clients": 6},
        None,
        "standin",
        np.random.default_rng(0),
    )
    save_dataset(ds, tmp_path / "data.npz")
    part = make_partition(
        ds.y_train,
        ds.groups,
        {"kind": "natural", "test_fraction": 0.2},
        Streams(0).generator("partition"),
    )
    save_partition(tmp_path / "part.npz", part)
    catalog = load_catalog(ROOT / "config" / "config.yaml")
    spec = resolve_run(catalog, "smoke", "synthetic-1-1", "natural", "linear", "scaffold", 0)
    env = _env(warm_dir)
    path, proc, log = _start_server(tmp_path, env, "fedbench.engine.run")
    try:
        outputs = {}
        for mode, switch in (("in_process", "0"), ("warm", "1")):
            out = tmp_path / mode
            out.mkdir()  # Snakemake makes the folders of a job's outputs and log
            job = {
                "config": {},
                "input": {
                    "data": str(tmp_path / "data.npz"),
                    "partition": str(tmp_path / "part.npz"),
                },
                "output": {
                    "metrics": str(out / "metrics.jsonl"),
                    "run": str(out / "run.yaml"),
                    "params": str(out / "params.pt"),
                },
                "log": [str(out / "train.log")],
                "params": {"spec": spec, "device": "cpu", "checkpoint_every": 0},
                "resources": {},
                "threads": 1,
            }
            client = _client(tmp_path, str(ROOT / "workflow/scripts/train.py"), job, f"{mode}.py")
            run = subprocess.run(
                [sys.executable, str(client)],
                env={**env, worker.ENV_SWITCH: switch},
                capture_output=True,
                text=True,
            )
            assert run.returncode == 0, run.stderr
            outputs[mode] = (out / "metrics.jsonl").read_bytes()
            assert "round 2/2" in (out / "train.log").read_text()
        assert outputs["warm"] == outputs["in_process"]
        assert outputs["warm"].count(b"\n") >= 1
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()
    # exactly one job went through the server: the warm one
    assert (tmp_path / "server.log").read_text().count("train.py exit 0") == 1


def test_shutdown_retires_the_socket_at_once_and_lets_running_jobs_finish(tmp_path, server):
    env, path, proc = server
    started, done = tmp_path / "started", tmp_path / "done"
    adapter = _adapter(
        tmp_path,
        f"""
        import time
        from pathlib import Path
        Path({str(started)!r}).write_text("")
        time.sleep(1.0)
        Path({str(done)!r}).write_text("")
        """,
    )
    client = subprocess.Popen(
        [sys.executable, str(_client(tmp_path, adapter, {"config": {}}))], env=env
    )
    _wait_for(started.exists, what="the job to start")
    assert worker.shutdown(path) == 1
    _wait_for(lambda: not path.exists(), what="the socket to go")
    assert client.wait(timeout=30) == 0 and done.exists()
    assert proc.wait(timeout=30) == 0


def test_shutdown_stops_every_server_of_this_checkout_and_no_other(tmp_path, warm_dir, monkeypatch):
    # Snakemake gives each job OMP_NUM_THREADS etc. from its threads: one server per thread count.
    servers = []
    for n in (1, 2):
        (tmp_path / str(n)).mkdir()
        servers.append(
            _start_server(tmp_path / str(n), _env(warm_dir, OMP_NUM_THREADS=str(n)), "json")
        )
    other = warm_dir / f"fedbench-warm-{os.getuid()}-0123456789abcdef0123.lock"
    other.write_text(
        "1\n/elsewhere/fedbench\n"
    )  # another checkout's (pid 1: must not be signalled)
    monkeypatch.setenv(worker.DIR_ENV, str(warm_dir))
    assert worker.shutdown() == 2
    for path, proc, log in servers:
        assert proc.wait(timeout=30) == 0
        log.close()
        assert not path.exists() and not path.with_suffix(".lock").exists()
    assert other.exists()


def test_the_socket_name_changes_when_a_package_file_changes(monkeypatch, tmp_path):
    root = tmp_path / "pkg"
    root.mkdir()
    (root / "a.py").write_text("x = 1\n")
    (root / "values.yaml").write_text("a: 1\n")
    monkeypatch.setattr(worker, "_ROOT", str(root))
    first = worker.socket_path()
    assert worker.socket_path() == first
    (root / "values.yaml").write_text("a: 22\n")  # a paper's values, not only code
    assert worker.socket_path() != first


def test_a_job_without_stdin_runs_with_dev_null(tmp_path, server):
    env, _, _ = server
    out = tmp_path / "out.txt"
    adapter = _adapter(
        tmp_path,
        "import sys; from pathlib import Path; "
        "Path(snakemake.output[0]).write_text(repr(sys.stdin.read()))  # noqa: F821\n",
    )
    client = _client(tmp_path, adapter, {"config": {}, "output": [str(out)]})
    run = subprocess.run(
        ["sh", "-c", f'exec "{sys.executable}" "{client}" <&-'], env=env, capture_output=True
    )
    assert run.returncode == 0, run.stderr
    assert out.read_text() == "''"


@pytest.mark.parametrize("unsafe", ["symlink", "open", "other_user", "missing"])
def test_a_socket_folder_that_is_not_private_is_refused(tmp_path, warm_dir, unsafe):
    """The job runs in its own process, says why, and nothing is made in or through the folder:
    a symbolic link (to a folder that is private), a folder open to others, one of another user,
    and a named folder that does not exist."""
    folder = warm_dir / "sock"
    if unsafe == "symlink":
        real = warm_dir / "real"
        real.mkdir(mode=0o700)
        folder.symlink_to(real)
        needle = "is a symbolic link"
    elif unsafe == "open":
        folder.mkdir()
        folder.chmod(0o755)
        needle = "is open to others (mode 755); run chmod 700"
    elif unsafe == "other_user":
        if os.getuid() != 0:
            pytest.skip("needs root to give a folder to another user")
        folder.mkdir(mode=0o700)
        os.chown(folder, 65534, 65534)
        needle = "belongs to uid 65534"
    else:
        needle = "does not exist"
    assert _pid_job(tmp_path, _env(folder), stderr=needle) == "in-process"
    time.sleep(0.5)  # a server would have made its lock and log by now
    if unsafe == "symlink":
        assert list((warm_dir / "real").iterdir()) == []
    elif unsafe in ("open", "other_user"):
        assert list(folder.iterdir()) == []
    else:
        assert not folder.exists()
    with pytest.raises(worker.UnsafeFolder, match=needle.split(" (")[0]):
        worker.check_private(folder)


def test_the_default_socket_folder_is_made_private(monkeypatch, tmp_path):
    monkeypatch.delenv(worker.DIR_ENV, raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    folder = worker.socket_folder()
    assert folder == tmp_path / f"fedbench-warm-{os.getuid()}" and not folder.exists()
    worker.check_private(folder, create=True)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700 and folder.stat().st_uid == os.getuid()
    assert worker.socket_path().parent == folder
