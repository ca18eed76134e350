"""One GPU per job on a multi-GPU machine (profiles/multigpu).

Snakemake's `gpu` resource caps how many jobs run at once but does not say which device a job
gets. `claim_gpu` picks one: it takes an exclusive, non-blocking lock on one of N lock files
(`{lock_dir}/gpu{i}.lock`, in the machine's own temporary folder) and pins the process to GPU i
with CUDA_VISIBLE_DEVICES. The lock is the operating system's (flock), so it is released when the
job ends, even if it crashes. It must run before torch initialises CUDA (the first CUDA call).
Under SLURM (SLURM_JOB_ID set) the scheduler has already pinned the job, so it changes nothing.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

ENV = "CUDA_VISIBLE_DEVICES"
# Node-local on purpose: GPU ids are per machine, and flock on a shared filesystem would make
# jobs on different machines wait for each other.
DEFAULT_LOCK_DIR = Path(tempfile.gettempdir(), f"fedbench-gpu-locks-{os.getuid()}")


class NoFreeGPU(RuntimeError):
    """Every GPU lock is held: more jobs than GPUs (check the profile's `resources: gpu=`)."""


def visible_gpus(env: dict[str, str] | None = None) -> list[str]:
    """The GPU ids this process may use: CUDA_VISIBLE_DEVICES if set, else 0..count-1.

    Counted without torch: once CUDA is initialised in a process (torch.cuda.device_count()
    may do so) a later CUDA_VISIBLE_DEVICES is ignored, so the pin would not take.
    """
    env = os.environ if env is None else env
    if env.get(ENV, "").strip():
        return [g.strip() for g in env[ENV].split(",") if g.strip()]
    proc = Path("/proc/driver/nvidia/gpus")  # one folder per GPU (Linux driver)
    if proc.is_dir():
        return [str(i) for i in range(sum(1 for _ in proc.iterdir()))]
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return []
    return [str(i) for i in range(sum(line.startswith("GPU ") for line in out.stdout.splitlines()))]


@contextlib.contextmanager
def claim_gpu(
    gpus: list[str] | None = None,
    lock_dir: str | os.PathLike = DEFAULT_LOCK_DIR,
    env: dict[str, str] | None = None,
) -> Iterator[str | None]:
    """Hold one free GPU of `gpus` (default: the visible ones) for the block; yield its id.

    Sets `env[CUDA_VISIBLE_DEVICES]` (default os.environ) to that id and restores it afterwards.
    With no GPU at all it yields None and changes nothing (a CPU run); under SLURM it yields the
    first visible GPU, which the scheduler allocated to this job, and changes nothing either.
    """
    env = os.environ if env is None else env
    gpus = visible_gpus(env) if gpus is None else list(gpus)
    if not gpus or "SLURM_JOB_ID" in env:
        yield (gpus[0] if gpus else None)
        return
    Path(lock_dir).mkdir(parents=True, exist_ok=True)
    for gpu in gpus:
        f = open(Path(lock_dir, f"gpu{gpu}.lock"), "a+")  # noqa: SIM115 (held for the block)
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.close()
            continue
        before = env.get(ENV)
        env[ENV] = gpu
        try:
            yield gpu
        finally:
            if before is None:
                env.pop(ENV, None)
            else:
                env[ENV] = before
            fcntl.flock(f, fcntl.LOCK_UN)
            f.close()
        return
    raise NoFreeGPU(
        f"all {len(gpus)} GPUs ({','.join(gpus)}) are held by other jobs (locks in {lock_dir}); "
        "the profile's `resources: gpu=` must not exceed the number of GPUs"
    )
