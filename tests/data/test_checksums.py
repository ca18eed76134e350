"""Damaged workflow files are caught by checksum: prepared datasets, partitions, raw downloads."""

from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest

from fedbench.data.base import (
    ArrayDataset,
    RemoteFile,
    load_dataset,
    manifest_verifies,
    save_dataset,
)
from fedbench.data.checksum import ChecksumError, content_sha256
from fedbench.data.fetch import digests
from fedbench.data.partition import Partition, load_partition, save_partition
from fedbench.io import DamagedFile, job_targets


def _dataset() -> ArrayDataset:
    rng = np.random.default_rng(1)
    return ArrayDataset(
        name="toy",
        x_train=rng.random((40, 1, 4, 4), dtype=np.float32),
        y_train=np.arange(40, dtype=np.int64) % 4,
        x_test=rng.random((8, 1, 4, 4), dtype=np.float32),
        y_test=np.arange(8, dtype=np.int64) % 4,
        num_classes=4,
        standin=True,
        provenance="test",
    )


def _partition() -> Partition:
    train = [np.arange(0, 15), np.arange(20, 35)]
    test = [np.arange(15, 20), np.arange(35, 40)]
    return Partition(train, test, {"kind": "toy"})


def _command(path) -> str:
    """What a damaged file's message ends with outside a job: write that file again."""
    return f"snakemake --cores all {path} --forcerun {path}"


def _arrays(path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _rewrite(path, change) -> None:
    """Rewrite the .npz as a valid zip (fresh CRCs) with `change` applied to its arrays and the
    stored checksum kept: content altered behind the checksum's back."""
    arrays = _arrays(path)
    change(arrays)
    with open(path, "wb") as f:
        np.savez(f, **arrays)


SAVE_LOAD = {
    "dataset": (_dataset, save_dataset, load_dataset, "prepare"),
    "partition": (_partition, save_partition, load_partition, "partition"),
}


def _save(kind, path):
    make, save, *_ = SAVE_LOAD[kind]
    if kind == "dataset":
        save(make(), path)
    else:
        save(path, make())


@pytest.mark.parametrize("kind", SAVE_LOAD)
def test_writer_stores_a_checksum_of_the_content(tmp_path, kind):
    _, _, load, _ = SAVE_LOAD[kind]
    path = tmp_path / f"{kind}.npz"
    _save(kind, path)
    arrays = _arrays(path)
    assert "sha256" in arrays and len(str(arrays["sha256"])) == 64
    load(path)  # an intact file verifies
    # The digest depends on every array's content, dtype and shape.
    base = content_sha256(arrays)
    for key in ("meta", *[k for k in arrays if k not in ("sha256", "meta")][:2]):
        changed = dict(arrays)
        changed[key] = np.array(str(arrays[key]) + " ") if key == "meta" else arrays[key][:-1]
        assert content_sha256(changed) != base
    as_int64 = {**arrays, "y": np.zeros(3, np.int64)}
    assert content_sha256(as_int64) != content_sha256({**arrays, "y": np.zeros(6, np.int32)})


@pytest.mark.parametrize("kind", SAVE_LOAD)
def test_altered_content_is_named_with_how_to_regenerate(tmp_path, kind):
    _, _, load, rule = SAVE_LOAD[kind]
    path = tmp_path / f"{kind}.npz"
    _save(kind, path)
    key = "x_train" if kind == "dataset" else "train"

    def bump(arrays):
        arrays[key] = arrays[key].copy()
        arrays[key].flat[3] += 1

    _rewrite(path, bump)
    with pytest.raises(ChecksumError) as info:
        load(path)
    message = str(info.value)
    assert str(path) in message and "sha256" in message
    assert message.endswith(f"run this to write it again (its {rule} rule): {_command(path)}")


@pytest.mark.parametrize("kind", SAVE_LOAD)
@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_flipped_or_truncated_file_is_named(tmp_path, kind, damage):
    _, _, load, rule = SAVE_LOAD[kind]
    path = tmp_path / f"{kind}.npz"
    _save(kind, path)
    data = bytearray(path.read_bytes())
    if damage == "flip":
        # A byte near the end of the first array's data: past the local zip header (30 bytes,
        # the name, the extra field) and the .npy header, at the member's last bytes.
        with zipfile.ZipFile(path) as z:
            info = z.infolist()[0]
        start = info.header_offset + 30 + len(info.filename)
        start += int.from_bytes(data[info.header_offset + 28 : info.header_offset + 30], "little")
        data[start + info.compress_size - 3] ^= 0xFF
    else:
        data = data[: len(data) * 2 // 3]
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError) as err:
        load(path)
    assert str(path) in str(err.value)
    assert str(err.value).endswith(
        f"run this to write it again (its {rule} rule): {_command(path)}"
    )
    assert isinstance(err.value, DamagedFile) and err.value.advice in str(err.value)


@pytest.mark.parametrize("kind", SAVE_LOAD)
def test_missing_file_is_named_with_the_command_that_writes_it(tmp_path, kind):
    _, _, load, rule = SAVE_LOAD[kind]
    path = tmp_path / f"{kind}.npz"
    with pytest.raises(FileNotFoundError) as err:
        load(path)
    advice = f"run this to write it again (its {rule} rule): {_command(path)}"
    assert str(err.value) == f"{kind} file {path} does not exist; {advice}"


@pytest.mark.parametrize("kind", SAVE_LOAD)
def test_inside_a_job_the_command_reruns_the_job_that_read_the_file(tmp_path, kind):
    """A job's targets (what `fedbench.jobs` sets) come first: `--forcerun` takes every word
    after it. Naming the job's output reruns it even where Snakemake, its outputs removed on the
    failure and a table made from them still there, would find nothing to do."""
    _, _, load, rule = SAVE_LOAD[kind]
    path = tmp_path / f"{kind}.npz"
    path.write_bytes(b"PK\x03\x04")
    with job_targets("results/runs/a b/metrics.jsonl"), pytest.raises(DamagedFile) as err:
        load(path)
    command = f"snakemake --cores all 'results/runs/a b/metrics.jsonl' --forcerun {path}"
    assert str(err.value).endswith(command)
    assert (
        f"(its {rule} rule) and rerun the job that read it, then run your own" in err.value.advice
    )


@pytest.mark.parametrize("kind", SAVE_LOAD)
def test_files_from_before_checksums_still_load(tmp_path, kind):
    _, _, load, _ = SAVE_LOAD[kind]
    path = tmp_path / f"{kind}.npz"
    _save(kind, path)
    _rewrite(path, lambda arrays: arrays.pop("sha256"))
    load(path)


def test_raw_file_with_one_flipped_byte_fails_its_manifest(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "a.bin").write_bytes(bytes(range(256)) * 4)
    d = digests(raw / "a.bin")
    (raw / "MANIFEST.json").write_text(
        json.dumps({"a.bin": {"bytes": 1024, "sha256": d["sha256"]}})
    )
    files = [RemoteFile("a.bin", ("http://127.0.0.1:9/a.bin",))]
    assert manifest_verifies(raw, files)
    data = bytearray((raw / "a.bin").read_bytes())
    data[500] ^= 0x01  # same size: only the checksum can tell
    (raw / "a.bin").write_bytes(bytes(data))
    assert not manifest_verifies(raw, files)


@pytest.mark.parametrize("text", ["[1, 2]", "{not json", None])
def test_a_missing_or_malformed_manifest_means_fetch_again(tmp_path, text):
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "a.bin").write_bytes(b"x" * 16)
    if text is not None:
        (raw / "MANIFEST.json").write_text(text)
    assert not manifest_verifies(raw, [RemoteFile("a.bin", ("http://127.0.0.1:9/a.bin",))])
