"""One GPU per job: exclusive locks pin concurrent jobs to distinct devices."""

from __future__ import annotations

import pytest

from fedbench.gpu import ENV, NoFreeGPU, claim_gpu, visible_gpus


def test_concurrent_claims_get_distinct_gpus_and_release_them(tmp_path):
    env_a, env_b, env_c = {}, {}, {ENV: "7"}
    with claim_gpu(["0", "1"], tmp_path, env_a) as a, claim_gpu(["0", "1"], tmp_path, env_b) as b:
        assert {a, b} == {"0", "1"}
        assert (env_a[ENV], env_b[ENV]) == (a, b)
        with pytest.raises(NoFreeGPU, match="all 2 GPUs"):
            with claim_gpu(["0", "1"], tmp_path, env_c):
                pass
        assert env_c == {ENV: "7"}  # a failed claim leaves the environment alone
    assert ENV not in env_a and ENV not in env_b  # restored on release
    with claim_gpu(["0", "1"], tmp_path, env_c) as again:
        assert again == "0" and env_c[ENV] == "0"
    assert env_c == {ENV: "7"}


def test_no_gpu_is_a_cpu_run(tmp_path):
    env = {}
    with claim_gpu([], tmp_path, env) as gpu:
        assert gpu is None and env == {}


def test_visible_gpus_follow_the_environment():
    assert visible_gpus({ENV: "2, 5"}) == ["2", "5"]


def test_a_slurm_job_keeps_the_gpu_the_scheduler_gave_it(tmp_path):
    env = {ENV: "0", "SLURM_JOB_ID": "42"}
    with claim_gpu(["0"], tmp_path, env) as a, claim_gpu(["0"], tmp_path, env) as b:
        assert a == b == "0"  # two jobs on one node, each seeing its own GPU as 0: no lock
    assert env == {ENV: "0", "SLURM_JOB_ID": "42"} and not list(tmp_path.iterdir())
