"""CINIC-10 through `datasets` (fedbench/data/cinic10.py), offline: parquet files written in the
hub copy's layout (an `image` column of PNGs, a `label` ClassLabel) and placed by hand, read by
`datasets`, converted, checked against the images written; the hub route is replaced by a failing
stand-in, so nothing touches the network."""

from __future__ import annotations

import json

import numpy as np
import pytest

datasets = pytest.importorskip("datasets")
PIL = pytest.importorskip("PIL.Image")

from fedbench.data import SOURCES, FetchError, prepare_dataset  # noqa: E402
from fedbench.data import cinic10 as mod  # noqa: E402

SIZES = {"train": 4, "validation": 3, "test": 2}


def _write_split(root, split: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A parquet file of `split` in the hub copy's schema; one image is grey (mode L)."""
    rng = np.random.default_rng(seed)
    n = SIZES[split]
    x = rng.integers(0, 256, size=(n, 32, 32, 3), dtype=np.uint8)
    x[0] = x[0, :, :, :1]  # grey: the same value in all three channels
    y = rng.integers(0, 10, size=n)
    images = [PIL.fromarray(x[0][:, :, 0], mode="L")] + [PIL.fromarray(im) for im in x[1:]]
    features = datasets.Features(
        {"image": datasets.Image(), "label": datasets.ClassLabel(names=list(mod.CLASSES))}
    )
    ds = datasets.Dataset.from_dict({"image": images, "label": y.tolist()}, features=features)
    path = root / "parquet" / mod.parquet_name(split)
    path.parent.mkdir(parents=True, exist_ok=True)
    ds.to_parquet(str(path))
    return x, y


@pytest.fixture
def no_hub(monkeypatch):
    """The hub route fails as it does offline; a call naming the hub id is recorded."""
    calls = []
    real = datasets.load_dataset

    def fake(path, *args, **kwargs):
        if path == mod.HUB_ID:
            calls.append(kwargs.get("revision"))
            raise ConnectionError("Couldn't reach the Hugging Face Hub (test)")
        return real(path, *args, **kwargs)

    monkeypatch.setattr(datasets, "load_dataset", fake)
    return calls


def test_placed_parquet_files_are_read_converted_and_kept(tmp_path, no_hub):
    want = {s: _write_split(tmp_path, s, i) for i, s in enumerate(mod.HUB_SPLITS)}
    src = SOURCES["cinic10"]
    manifest = src.fetch(tmp_path)
    assert not no_hub  # every split came from the placed files
    assert set(manifest) == {f"cinic10-{s}.npz" for s in mod.HUB_SPLITS}
    assert all("placed by hand" in e["origin"] for e in manifest.values())
    ds = src.load(tmp_path)
    x_train = np.concatenate([want["train"][0], want["validation"][0]]).transpose(0, 3, 1, 2)
    np.testing.assert_array_equal(np.rint(ds.x_train * 255).astype(np.uint8), x_train)
    np.testing.assert_array_equal(
        ds.y_train, np.concatenate([want["train"][1], want["validation"][1]])
    )
    np.testing.assert_array_equal(np.rint(ds.x_test * 255), want["test"][0].transpose(0, 3, 1, 2))
    assert ds.x_train.dtype == np.float32 and ds.num_classes == 10 and not ds.standin
    # split: train leaves valid out; a second fetch keeps the converted files
    assert len(src.load(tmp_path, split="train").y_train) == SIZES["train"]
    before = json.loads((tmp_path / "MANIFEST.json").read_text())
    (tmp_path / "parquet" / mod.parquet_name("train")).unlink()
    assert src.fetch(tmp_path) == before
    # prepare_dataset goes through the manifest check and load
    real = prepare_dataset("cinic10", {}, tmp_path, "real", np.random.default_rng(0))
    assert real.x_test.shape == (SIZES["test"], 3, 32, 32)


def test_without_network_the_error_names_each_file_and_where(tmp_path, no_hub):
    with pytest.raises(FetchError) as err:
        SOURCES["cinic10"].fetch(tmp_path)
    msg = str(err.value)
    assert no_hub == [mod.HUB_REVISION]
    assert mod.HUB_ID in msg and mod.HUB_REVISION in msg
    for split in mod.HUB_SPLITS:
        assert str(tmp_path / "parquet" / mod.parquet_name(split)) in msg
        assert mod.parquet_url(split) in msg


def test_standin_and_params():
    src = SOURCES["cinic10"]
    ds = src.standin(np.random.default_rng(0), n_train=30, n_test=10)
    assert ds.standin and ds.x_train.shape == (30, 3, 32, 32) and ds.num_classes == 10
    assert (
        src.standin(np.random.default_rng(0), n_train=5, n_test=1, resize=16).x_train.shape[2] == 16
    )
    with pytest.raises(ValueError, match="split must be one of"):
        src.check_params({"split": "valid"})
    with pytest.raises(ValueError, match="unknown|valid"):
        src.check_params({"pool": "x"})
    assert not src.needs_manual_step() and "flwrlabs/cinic10" in src.fetch_route()
