"""LEAF Shakespeare `source: hub` (fedbench/data/shakespeare.py) offline: a Gutenberg-layout
text and a CSV copy of flwrlabs/shakespeare made from it by LEAF's rules (per-role text, newlines
to spaces, runs of spaces collapsed, every 80-character window and its next character) give the
same clients and samples; the hub's limits (seq_len 80, layout concat) fail with the fix named;
offline, the message names the dataset and what to place."""

from __future__ import annotations

import re
import socket
import zipfile

import numpy as np
import pytest

datasets = pytest.importorskip("datasets")

from fedbench.data import SOURCES, FetchError, hub  # noqa: E402
from fedbench.data import shakespeare as sh  # noqa: E402

LINES = [
    "To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer",
    "the slings and arrows of outrageous fortune, or to take arms against a sea of troubles",
    "and by opposing end them. To die: to sleep; no more; and by a sleep to say we end",
    "the heart-ache and the thousand natural shocks that flesh is heir to.",
]


def gutenberg() -> str:
    """Two plays in the 1994 edition's layout: four speakers, one with only two lines."""
    out = ["The Project Gutenberg Etext", "contents", "THE SONNETS", "", "by William Shakespeare"]
    out += ["", "  1. From fairest creatures"] + ["  sonnet line"] * 6
    out += ["THE TRAGEDY OF HAMLET", "", BYLINE, ""]
    for k, line in enumerate(LINES * 2):
        out.append(f"  HAMLET. {line}" if k % 2 == 0 else f"    {line}")
    out += ["  OPHELIA. Good my lord,", "    how does your honour for this many a day?"]
    out += [f"  POLONIUS. {line[:50]}" for line in LINES]
    out += ["THE TEMPEST", "", BYLINE, ""]
    out += [f"  PROSPERO. {line}" for line in LINES[::-1]]
    out += [f"  MIRANDA. {line[10:]}" for line in LINES[1:]]
    return "\n".join(out) + "\n"


BYLINE = "by William Shakespeare"


def leaf_rows(clients: sh.Clients) -> dict[str, list[str]]:
    """LEAF's samples of each role with > 2 lines, as its scripts make them (shake_utils)."""
    rows: dict[str, list[str]] = {"character_id": [], "x": [], "y": []}
    for (play, role), lines in clients.items():
        if len(lines) <= 2:
            continue
        text = re.sub(r"   *", " ", "".join(line + "\n" for line in lines).replace("\n", " "))
        for i in range(len(text) - 80):
            rows["character_id"].append(sh.client_name(play, role))
            rows["x"].append(text[i : i + 80])
            rows["y"].append(text[i + 80])
    return rows


@pytest.fixture
def hf_cache(tmp_path, monkeypatch):
    """`datasets`' cache in a temporary folder; the hub offline; any socket connect recorded."""
    monkeypatch.setattr(hub, "CACHE_DIR", str(tmp_path / "hf-cache"))
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    calls = []

    def refuse(self, *args):
        calls.append(args)
        raise OSError("no network in tests")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    return calls


@pytest.fixture
def both(tmp_path):
    """(raw dir holding the Gutenberg zip, raw dir holding a copy of the hub repo)."""
    orig, raw = tmp_path / "orig", tmp_path / "raw"
    orig.mkdir()
    text = gutenberg()
    with zipfile.ZipFile(orig / sh.GUTENBERG_ZIP, "w") as z:
        z.writestr("100.txt", text)
    rows = leaf_rows(sh.parse_gutenberg(text))
    # Roles interleaved at random in the copy; a role's own rows stay in LEAF's order.
    ids = rows["character_id"]
    queues = {c: [i for i in range(len(ids)) if ids[i] == c] for c in dict.fromkeys(ids)}
    rng, order = np.random.default_rng(0), []
    while queues:
        c = list(queues)[rng.integers(len(queues))]
        order.append(queues[c].pop(0))
        if not queues[c]:
            del queues[c]
    shuffled = {k: [v[i] for i in order] for k, v in rows.items()}
    copy = raw / hub.LOCAL_COPY
    copy.mkdir(parents=True)
    datasets.Dataset.from_dict(shuffled).to_csv(str(copy / "shakespeare.csv"), index=False)
    (copy / "README.md").write_text(
        "---\nconfigs:\n- config_name: default\n  data_files:\n  - split: train\n"
        "    path: shakespeare.csv\n---\n# a copy in flwrlabs/shakespeare's layout\n"
    )
    return orig, raw


PARAMS = [
    {"min_samples": 1},
    {"min_samples": 1, "vocab": "printable100"},
    {"min_samples": 1, "stride": 7},
    {"min_samples": 200},
    {"min_samples": 1, "max_clients": 2, "seed": 5},
]


def test_hub_copy_and_gutenberg_text_give_the_same_clients_and_samples(both, hf_cache):
    orig, raw = both
    src = SOURCES["leaf_shakespeare"]
    manifest = src.fetch(raw)
    assert list(manifest) == [sh.HUB_NPZ] and "placed by hand" in manifest[sh.HUB_NPZ]["origin"]
    for params in PARAMS:
        a = src.load(raw, **params)
        b = src.load(orig, source="original", **params)
        assert a.groups.tolist() == b.groups.tolist(), params
        np.testing.assert_array_equal(a.y_train, b.y_train)
        np.testing.assert_array_equal(a.x_train, b.x_train)
        assert a.num_classes == b.num_classes
    # HAMLET, POLONIUS (4 lines) and the TEMPEST's two: OPHELIA has 2 lines.
    assert len(np.unique(src.load(raw, min_samples=1).groups)) == 4
    assert "source hub" in src.load(raw, min_samples=1).provenance
    assert not hf_cache


def test_hub_limits_name_the_original_route(both, hf_cache):
    _, raw = both
    src = SOURCES["leaf_shakespeare"]
    src.fetch(raw)
    for params in ({"seq_len": 20}, {"layout": "line"}):
        with pytest.raises(ValueError, match="source: original"):
            src.load(raw, **params)
    src.check_params({"seq_len": 20})  # allowed in the catalog: stand-ins cut any windows


def test_offline_without_a_copy_names_the_dataset_and_what_to_place(tmp_path, hf_cache):
    with pytest.raises(FetchError) as err:
        SOURCES["leaf_shakespeare"].fetch(tmp_path)
    msg = str(err.value)
    assert msg.startswith("leaf_shakespeare: datasets.load_dataset('flwrlabs/shakespeare'")
    assert str(tmp_path / hub.LOCAL_COPY) in msg and sh.SHAKESPEARE_HUB.revision in msg
    assert "hf download flwrlabs/shakespeare --repo-type dataset" in msg
    assert "source: original" in msg
    assert not hf_cache


def test_shakespeare_plays_has_no_route():
    assert "source" not in SOURCES["shakespeare_plays"].params  # the quick grid's data
    assert SOURCES["leaf_shakespeare"].check_params({})["source"] == "hub"
