"""Fuzzed run files (issue 42): a run's metrics.jsonl or run.yaml truncated, bit-flipped, with a
line dropped or doubled. What reads them for `fedbench record` and the table builder
(`load_run`, `collect_runs`) either reads the run or raises RunDataError naming the file; never
another exception."""

from __future__ import annotations

import shutil

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fedbench.report.collect import RunDataError, collect_runs, load_run

EXAMPLES = 200
SEEN: dict[str, int] = {}


@st.composite
def damage(draw):
    name = draw(st.sampled_from(["metrics.jsonl", "run.yaml"]))
    op = draw(st.sampled_from(["truncate", "flip", "drop_line", "double_line"]))
    return name, op, draw(st.integers(min_value=0, max_value=2**32)), draw(st.integers(0, 7))


def _damage(data: bytes, op: str, at: int, bit: int) -> bytes:
    if not data:
        return data
    i = at % len(data)
    if op == "truncate":
        return data[:i]
    if op == "flip":
        return data[:i] + bytes([data[i] ^ (1 << bit)]) + data[i + 1 :]
    lines = data.splitlines(keepends=True)
    j = at % len(lines)
    if op == "drop_line":
        return b"".join(lines[:j] + lines[j + 1 :])
    return b"".join(lines[: j + 1] + lines[j:])


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=damage())
def test_a_damaged_run_file_is_read_or_named(make, tmp_path, case):
    name, op, at, bit = case
    run = make(seed=0)
    path = run / name
    path.write_bytes(_damage(path.read_bytes(), op, at, bit))
    try:
        load_run(run)
        collect_runs([run])
    except RunDataError as err:
        assert str(path) in str(err) or str(run) in str(err), str(err)
        SEEN["refused"] = SEEN.get("refused", 0) + 1
    else:
        SEEN["read"] = SEEN.get("read", 0) + 1
    finally:
        shutil.rmtree(tmp_path / "results", ignore_errors=True)


def test_the_fuzzing_ran_and_reached_both_outcomes():
    """Runs after the property (file order): both outcomes occurred, so neither branch is dead."""
    if sum(SEEN.values()) == 0:  # run alone (-k): nothing to check
        return
    assert SEEN.get("refused", 0) > 0 and SEEN.get("read", 0) > 0, SEEN
