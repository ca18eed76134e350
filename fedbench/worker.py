"""A warm worker for Snakemake jobs: one process with the heavy imports done forks a child per job.

A smoke-scale job trains for a fraction of a second but pays ~2-4 s of imports (torch, the
algorithms, torch.func's first call). A `script:` adapter that starts with

    from fedbench.worker import delegate
    delegate(snakemake, __file__)

hands its job to a server process that has those modules imported already (`PRELOAD`). The server
forks one child per job; the child takes the job's working directory, environment, `sys.path` and
standard streams (passed over the socket), runs the adapter file exactly as Snakemake would have,
and exits. The adapter process waits for the child and exits with its status, so Snakemake sees
the same outputs, logs, benchmark wall time, failures and resumes as with a process of its own.
Signals the adapter receives are passed on to the child, and a child whose adapter is gone (killed
with SIGKILL) kills itself.

When no server is up, the first adapter to notice starts one in the background and runs its own
job in-process, as do the jobs that come before the server is ready: the worker only ever saves
time, it never changes what a job does. The socket's name is a digest of the interpreter, the
environment and every source file of the package, so an edit (or a `pip install`) starts a new
server instead of reusing stale code (or data: the papers' values); an idle server exits after
`IDLE_SECONDS`.

This module imports only the standard library: the adapter process must stay light.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import pickle
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# The modules a job would import, imported once by the server (the union over the job kinds);
# "module:NAME" names a registry whose every entry is looked up (imported) too.
PRELOAD = (
    "snakemake.iocontainers",
    "snakemake.logging",
    "torch",
    "torch._dynamo",
    "torch.func",
    "torchvision.models.resnet",  # ResNet18GN's blocks (imported where the network is built)
    "scipy.linalg",
    "scipy.optimize",
    "scipy.signal",
    "scipy.special",
    "fedbench.engine.run",
    "fedbench.engine.checkpoint",
    "fedbench.engine.vectorised",
    "fedbench.engine.landscape",
    "fedbench.gpu",
    "fedbench.algorithms:ALGORITHMS",
    "fedbench.models:MODELS",
    "fedbench.data:SOURCES",
    "fedbench.data.partition",
    "fedbench.data.transform",
    "fedbench.jobs",
    "fedbench.grid",
    "fedbench.papers",
    "fedbench.outputs:KINDS",
    "matplotlib.pyplot",
)
IDLE_SECONDS = 120.0
CONFIG_KEY = "warm_worker"  # true | false | auto (auto: on for local CPU jobs)
ENV_SWITCH = "FEDBENCH_WARM_WORKER"  # 0/1 overrides the config key (tests, debugging)
# Where sockets live: a private folder (0700, this user's, no symlink), checked on every connect
# (default: fedbench-warm-UID in the machine's temporary folder, made so).
DIR_ENV = "FEDBENCH_WARM_DIR"
# Environment variables that differ between jobs and do not change what a module import does.
_VOLATILE_ENV = ("OLDPWD", "PWD", "SHLVL", "_", "SNAKEMAKE_PROFILE", "FEDBENCH_WARM_PLANNED")
# How many script jobs the workflow plans (its `onstart` sets it, `plan`): a server is started
# only when a later job can use it (a one-job run would pay its imports for nothing).
PLANNED_ENV = "FEDBENCH_WARM_PLANNED"

_IN_CHILD = False
_ROOT = str(Path(__file__).resolve().parent)  # this checkout's package: its servers are ours
_HEADER = struct.Struct("!Q")
_MAX_SOCKET_PATH = 100  # sockaddr_un holds 108 bytes on Linux


def wanted(config: dict[str, Any] | None, env: dict[str, str] | None = None) -> bool:
    """Whether jobs should go to the warm worker, from the config key and the machine."""
    env = os.environ if env is None else env
    if env.get(ENV_SWITCH, "").strip() in {"0", "1"}:
        return env[ENV_SWITCH].strip() == "1"
    value = (config or {}).get(CONFIG_KEY, "auto")
    if isinstance(value, bool):
        return value
    if value != "auto":
        raise ValueError(f"config key {CONFIG_KEY!r} is {value!r}; valid: true, false, auto")
    # auto: a cluster job runs once on its node, and a GPU job is long and must fork before any
    # CUDA call (untested on this project's machines): both run in a process of their own.
    device = str((config or {}).get("device", "auto"))
    gpu_present = Path("/dev/nvidiactl").exists() or Path("/proc/driver/nvidia/gpus").is_dir()
    return not env.get("SLURM_JOB_ID") and device in {"cpu", "auto"} and not gpu_present


def fingerprint(env: Mapping[str, str] | None = None) -> str:
    """A digest of what a server's imports depend on: interpreter, environment (this process's,
    or `env`), package sources. The preloaded modules are not part of it: they change how fast a
    job starts, never what it does."""
    h = hashlib.sha256()
    h.update(repr((sys.executable, sys.version, os.getuid())).encode())
    env = os.environ if env is None else env
    h.update(repr(sorted((k, v) for k, v in env.items() if k not in _VOLATILE_ENV)).encode())
    for path in sorted(Path(_ROOT).rglob("*")):  # sources and the data files beside them
        if path.is_file() and "__pycache__" not in path.parts:
            st = path.stat()
            h.update(f"{path}:{st.st_mtime_ns}:{st.st_size}\n".encode())
    for entry in sys.path:  # an installed or removed package changes its site-packages folder
        if entry.endswith("site-packages") and os.path.isdir(entry):
            h.update(f"{entry}:{os.stat(entry).st_mtime_ns}\n".encode())
    return h.hexdigest()[:20]


def socket_path(env: Mapping[str, str] | None = None) -> Path:
    """The server's socket for this interpreter, source tree and environment (this process's, or
    that of the jobs to be served, `env`)."""
    env = os.environ if env is None else env
    return Path(socket_folder(env), f"fedbench-warm-{os.getuid()}-{fingerprint(env)}.sock")


class UnsafeFolder(OSError):
    """The socket folder is not private to this user: no worker is used there."""


def socket_folder(env: Mapping[str, str] | None = None) -> Path:
    """The folder of the sockets: `FEDBENCH_WARM_DIR`, else fedbench-warm-UID in the machine's
    temporary folder (made 0700 when missing; see `check_private`)."""
    env = os.environ if env is None else env
    return Path(env.get(DIR_ENV) or Path(tempfile.gettempdir(), f"fedbench-warm-{os.getuid()}"))


def check_private(folder: Path, create: bool = False) -> None:
    """UnsafeFolder unless `folder` is a real directory (not a symbolic link) owned by this user
    and closed to everyone else (no group or other permission bits): anyone else who could
    write there could put their own socket in a job's way, or read its requests. With `create`,
    a missing folder is made with mode 0700 first."""
    if create:
        with contextlib.suppress(FileExistsError):
            os.mkdir(folder, 0o700)
    try:
        st = os.lstat(folder)
    except FileNotFoundError:
        raise UnsafeFolder(f"the socket folder {folder} does not exist") from None
    if stat.S_ISLNK(st.st_mode):
        raise UnsafeFolder(f"the socket folder {folder} is a symbolic link; remove it")
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeFolder(f"the socket folder {folder} is not a directory")
    if st.st_uid != os.getuid():
        raise UnsafeFolder(
            f"the socket folder {folder} belongs to uid {st.st_uid}, not to you ({os.getuid()}); "
            f"set {DIR_ENV} to a folder of your own"
        )
    if st.st_mode & 0o077:
        raise UnsafeFolder(
            f"the socket folder {folder} is open to others (mode {stat.S_IMODE(st.st_mode):o}); "
            f"run chmod 700 {folder}"
        )


def delegate(snakemake: Any, script: str) -> None:
    """Run this adapter's job in the warm worker and exit with its status, or return to run it here.

    Returns at once inside the worker's child (the adapter body then runs there), when the worker
    is not wanted, and when no server is ready (one is started for the jobs that follow).
    """
    if _IN_CHILD or not wanted(getattr(snakemake, "config", None)):
        return
    for fd in (0, 1, 2):  # a closed standard stream becomes /dev/null, before any socket
        if not _is_open(fd):  # could take its number and be passed on as the job's stream
            os.open(os.devnull, os.O_RDWR)  # the lowest free number: this one
    try:
        check_private(socket_folder(), create=not os.environ.get(DIR_ENV))
    except UnsafeFolder as err:
        print(f"fedbench.worker: {err}; the job runs in its own process", file=sys.stderr)
        return
    path = socket_path()
    if len(os.fsencode(path)) > _MAX_SOCKET_PATH:
        print(f"fedbench.worker: {path} is too long for a socket; set {DIR_ENV}", file=sys.stderr)
        return
    conn = _connect(path)
    if conn is None:
        if worth_starting():
            start_server(path)
        return
    code = submit(conn, script, snakemake)
    if code is not None:
        sys.exit(code)


def worth_starting(env: Mapping[str, str] | None = None) -> bool:
    """Whether a job that found no server should start one: not when the workflow plans this
    job alone (PLANNED_ENV; unset, e.g. a run with --no-hooks: yes)."""
    planned = (os.environ if env is None else env).get(PLANNED_ENV, "").strip()
    return not planned.isdigit() or int(planned) > 1


def plan(workflow: Any) -> int:
    """The workflow's `onstart`: count the script jobs it is about to run and tell them
    (PLANNED_ENV, inherited by the jobs), so that a one-job run starts no server. Returns the
    count (-1: this Snakemake does not say; the jobs then start one as before)."""
    try:
        jobs = list(workflow.dag.needrun_jobs())
    except AttributeError:
        return -1
    count = sum(1 for job in jobs if getattr(job.rule, "script", None))
    os.environ[PLANNED_ENV] = str(count)
    return count


def _connect(path: Path) -> socket.socket | None:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(str(path))
    except OSError:
        conn.close()
        return None
    return conn


def server_command(path: Path, idle: float = IDLE_SECONDS, preload=PRELOAD) -> list[str]:
    """The command line of a server for `path` (serves until `idle` seconds pass without jobs)."""
    return [sys.executable, "-m", "fedbench.worker", str(path), str(idle), *preload]


def start_server(path: Path) -> None:
    """Start a server for `path` in the background unless one is starting or running."""
    if _lock_held(path.with_suffix(".lock")):
        return
    with open(path.with_suffix(".log"), "ab") as out:
        subprocess.Popen(
            server_command(path),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )


def _lock_held(lock: Path) -> bool:
    """Whether a live server holds this lock file."""
    try:
        fd = os.open(lock, os.O_RDWR)
    except FileNotFoundError:
        return False
    except OSError:
        return True  # cannot even open the lock: do not start servers
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # closing releases the lock
    return False


def submit(conn: socket.socket, script: str, snakemake: Any) -> int | None:
    """Send one job; wait for its child; return its exit status (128 + signal if killed).

    None: the server closed the connection before starting a child (the job did not run).
    """
    request = pickle.dumps(
        {
            "script": os.path.realpath(script),
            "snakemake": pickle.dumps(snakemake),
            "cwd": os.getcwd(),
            "env": dict(os.environ),
            "path": list(sys.path),
            "argv": list(sys.argv),
        }
    )
    with conn:
        try:
            socket.send_fds(conn, [_HEADER.pack(len(request))], [0, 1, 2])
            conn.sendall(request)
        except OSError:
            return None  # the server went away: nothing ran, the job runs here
        reader = conn.makefile("r")
        child: list[int] = []
        pending: list[int] = []

        def forward(signum, _frame):
            if child:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child[0], signum)
            else:
                pending.append(signum)

        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, forward)
        for line in reader:
            kind, _, value = line.strip().partition(" ")
            if kind == "pid":
                child.append(int(value))
                for signum in pending:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(child[0], signum)
            elif kind == "exit":
                return int(value)
    if not child:
        return None
    print("fedbench.worker: the warm worker ended before the job's child did", file=sys.stderr)
    return 1


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


# --- the server ------------------------------------------------------------------------------


def serve(path: Path, idle: float, preload: tuple[str, ...]) -> None:
    """Import `preload`, then fork a child per request until `idle` seconds pass without jobs."""
    import importlib

    try:
        check_private(path.parent)  # as every job does before it connects
    except UnsafeFolder as err:
        print(f"fedbench.worker: {err}; no server started", file=sys.stderr)
        return
    lock_fd = os.open(path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return  # another server for this digest is starting or running
    # Stopped while importing (shutdown() as the workflow ends): exit through `finally`, so the
    # lock and an empty log do not stay behind in the socket folder.
    signal.signal(signal.SIGTERM, _exit_now)
    try:
        os.ftruncate(lock_fd, 0)
        os.write(lock_fd, f"{os.getpid()}\n{_ROOT}\n".encode())  # for shutdown()
        for name in preload:
            module, _, registry = name.partition(":")
            imported = importlib.import_module(module)
            # Looking an entry up imports it; plugins (a user's method) are left to each job,
            # which forks from this server and so imports their files as they are now.
            for _ in getattr(imported, registry).builtin_values() if registry else ():
                pass
        _serve_jobs(path, idle, lock_fd)
    finally:
        _remove_files(path)


def _exit_now(signum, _frame) -> None:
    raise SystemExit(128 + signum)


def _remove_files(path: Path) -> None:
    """A stopped server's files: its log, unless it says more than "job ... exit 0", its lock."""
    log = path.with_suffix(".log")
    with contextlib.suppress(OSError):
        if all(line.endswith(" exit 0") for line in log.read_text().splitlines()):
            log.unlink()
    with contextlib.suppress(OSError):
        os.unlink(path.with_suffix(".lock"))


def _serve_jobs(path: Path, idle: float, lock_fd: int) -> None:
    """Listen on `path` and fork a child per request until `idle` seconds pass without jobs."""
    import selectors

    # SIGTERM (shutdown()) retires the socket at once but waits for the running jobs.
    stop: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, _: stop.append(signum))
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(tmp))
    os.chmod(tmp, 0o600)  # only this user's jobs may connect (and SO_PEERCRED is checked)
    listener.listen(64)
    os.replace(tmp, path)  # appears ready, all at once
    inode = os.stat(path).st_ino
    wake_r, wake_w = socket.socketpair()
    wake_r.setblocking(False)
    wake_w.setblocking(False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w.fileno())
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, "accept")
    sel.register(wake_r, selectors.EVENT_READ, "wake")
    children: dict[int, tuple[socket.socket, str]] = {}
    last = time.monotonic()

    def retire() -> None:  # take no more jobs: later adapters start a new server or run here
        sel.unregister(listener)
        listener.close()
        with contextlib.suppress(OSError):
            if os.stat(path).st_ino == inode:  # still ours, not a newer server's
                os.unlink(path)

    try:
        while children or (not stop and time.monotonic() - last < idle):
            for key, _ in sel.select(timeout=max(0.1, idle - (time.monotonic() - last))):
                if key.data == "wake":
                    _drain(wake_r)
                    continue
                conn, _ = listener.accept()
                if not _same_user(conn):
                    conn.close()
                    continue
                closing = (listener, wake_r, wake_w, lock_fd, *(c for c, _ in children.values()))
                pid, script = _fork_job(conn, closing)
                if pid is not None:
                    children[pid] = (conn, script)
                    conn.sendall(f"pid {pid}\n".encode())
            for pid, status in _reap():
                if pid in children:
                    conn, script = children.pop(pid)
                    code = os.waitstatus_to_exitcode(status)
                    print(f"{time.strftime('%H:%M:%S')} {pid} {script} exit {code}", flush=True)
                    with conn:
                        try:
                            conn.sendall(f"exit {code if code >= 0 else 128 - code}\n".encode())
                        except OSError:
                            pass  # the adapter is gone; its child already killed itself
            if children:
                last = time.monotonic()
            if stop and listener.fileno() >= 0:
                retire()
    finally:
        if listener.fileno() >= 0:
            retire()


def _same_user(conn: socket.socket) -> bool:
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return uid == os.getuid()


def _drain(sock: socket.socket) -> None:
    try:
        while sock.recv(4096):
            pass
    except BlockingIOError:
        pass


def _reap() -> list[tuple[int, int]]:
    done = []
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return done
        if pid == 0:
            return done
        done.append((pid, status))


def _recv_request(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    head, fds, _, _ = socket.recv_fds(conn, _HEADER.size, 3)
    while len(head) < _HEADER.size:
        more = conn.recv(_HEADER.size - len(head))
        if not more:
            raise ConnectionError("request cut short")
        head += more
    (size,) = _HEADER.unpack(head)
    body = bytearray()
    while len(body) < size:
        chunk = conn.recv(min(1 << 20, size - len(body)))
        if not chunk:
            raise ConnectionError("request cut short")
        body += chunk
    return pickle.loads(bytes(body)), fds


def _fork_job(conn: socket.socket, closing: tuple) -> tuple[int | None, str]:
    conn.settimeout(30.0)  # an adapter sends its request at once; never let one stall the server
    try:
        request, fds = _recv_request(conn)
    except (OSError, ConnectionError, pickle.UnpicklingError):
        conn.close()
        return None, ""
    conn.settimeout(None)
    sys.stdout.flush()
    pid = os.fork()
    if pid:
        for fd in fds:
            os.close(fd)
        return pid, request["script"]
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        for item in closing:
            os.close(item) if isinstance(item, int) else item.close()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        code = _run_child(conn, request)
    except BaseException:  # noqa: BLE001 - the child reports every failure as an exit status
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _run_child(conn: socket.socket, request: dict[str, Any]) -> int:
    """Inside the forked child: become the job's process and run its adapter file."""
    global _IN_CHILD
    import logging
    import threading

    _IN_CHILD = True
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.path[:] = request["path"]
    sys.argv[:] = request["argv"]
    # stdio were opened by the server; rebind Python's streams to the job's descriptors.
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115

    def watch() -> None:  # the adapter process died (e.g. SIGKILL): nobody waits for us
        try:
            while conn.recv(1):
                pass
        except OSError:
            pass
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, daemon=True).start()
    script = request["script"]
    globs = {
        "__name__": "__main__",
        "__file__": script,
        "__builtins__": __builtins__,
        "snakemake": pickle.loads(request["snakemake"]),
    }
    try:
        exec(compile(Path(script).read_bytes(), script, "exec"), globs)
    except SystemExit as stop:
        code = stop.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    finally:
        logging.shutdown()
    return 0


def shutdown(path: Path | None = None) -> int:
    """Stop servers now (they also stop by themselves when idle): the one of `path`, or else every
    server of this package's source tree in the socket folder, whatever the environment it serves
    (Snakemake gives each job OMP_NUM_THREADS and the like from its `threads`, so jobs of different
    thread counts have servers of their own). Returns how many were asked to stop."""
    if path is not None:
        locks = [path.with_suffix(".lock")]
    else:
        folder = socket_folder()
        locks = sorted(folder.glob(f"fedbench-warm-{os.getuid()}-*.lock"))
    stopped = 0
    for lock in locks:
        try:
            pid, root = lock.read_text().split("\n")[:2]
        except (OSError, ValueError):
            continue
        if path is None and root != _ROOT:
            continue  # another checkout's server
        if not _lock_held(lock):
            with contextlib.suppress(OSError):
                lock.unlink()  # left by a server that was killed
            continue
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGTERM)
            stopped += 1
    return stopped


if __name__ == "__main__":
    # Through the package's module, not __main__: the children's adapters import fedbench.worker
    # and must see the `_IN_CHILD` flag that `_run_child` sets there.
    from fedbench.worker import serve as _serve

    _serve(Path(sys.argv[1]), float(sys.argv[2]), tuple(sys.argv[3:]))
