"""Sent140 (LEAF) on GloVe-6B-50d tokens, as pFedBreD uses it (pfedbred.md §3, §4).

Raw files: Sentiment140's `trainingandtestdata.zip` (Stanford; LEAF's get_data.sh source) and
`glove.6B.zip` (Stanford NLP; only `glove.6B.50d.txt` is read). Steps, each a function below:

1. LEAF: both CSVs of the zip (1.6M training + 498 manual test tweets), grouped by user (users in
   sorted order, a user's tweets in file order), label 1 for polarity "4", else 0
   (data_to_json.py); a user sample that reaches `fraction` of all tweets (sample.py's niid
   `--sf`, drawn with `sample_seed`; LEAF's default seed is the clock, so the release's users
   cannot be recovered; the last user cut to hit the number); users with fewer than
   `min_samples` tweets dropped (LEAF's `-k k` keeps users with MORE than k: min_samples = k + 1).
2. pFedBreD's prepare_train_test_niid.py: text lower-cased, tokens `[\\w']+|[.,!?;]`, the first
   `seq_len` (25) kept; words in GloVe's vocabulary get ids by frequency over the kept tweets
   (2, 3, ...), any other token the unknown id 1, padding after the tweet the id 0; the embedding
   rows of PAD and unknown are zero. The dataset holds the ids (float32 (N, seq_len), ~N*100 bytes)
   and ships the (vocab, 50) table once as `extras["embedding"]` for the model's frozen lookup
   (pre-embedded tweets would take 50x the memory: 80k tweets x 25 x 50 floats = 400 MB for
   LEAF's 5 % sample before -k).
3. pFedBreD's regrouping: LEAF users, in sample order, are dealt to `clients` clients of
   `min_users` + Dirichlet(`alpha`) shares of the rest consecutive users (numpy/random seeded
   with `regroup_seed` = 1, as the release); `groups` = client, so the `natural` partitioner gives
   those clients. `clients: null` keeps one client per LEAF user.

No `source: hub` (fedbench/data/hub.py): the hub's `stanfordnlp/sentiment140` holds only a
loading script that downloads the same Stanford zip (`datasets` 4+ no longer runs scripts; a
parquet conversion sits in an unmerged pull request), and the copies with data files that its
search shows keep no user column (LEAF's clients); GloVe would still come from Stanford.

Not as LEAF/the release: the per-client train/test split is the partition's (a seeded 10 % of
each client, `test_fraction: 0.1`), not LEAF's per-user split (`-t sample --tf 0.9`: each
user's max(1, int(0.9 n)) random tweets train, the rest test), which gives every user >= 1 test
tweet (8,692 test tweets for 7,086 users in the release's file, about 11 %).
"""

from __future__ import annotations

import csv
import io
import os
import random
import re
import zipfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from fedbench.data.base import ArrayDataset, RemoteFile, Source, check_params

SENT140_ZIP = "trainingandtestdata.zip"
SENT140_CSVS = ("training.1600000.processed.noemoticon.csv", "testdata.manual.2009.06.14.csv")
# SHA-256 of the zip (81,363,704 bytes) as TensorFlow Datasets registers and checks it for this
# URL (tensorflow_datasets/text/sentiment140/checksums.tsv); Stanford publishes none.
SENT140_SHA256 = "004a3772c8a7ff9bbfeb875880f47f0679d93fc63e5cf9cff72d54a8a6162e57"
GLOVE_ZIP = "glove.6B.zip"
GLOVE_MEMBER = "glove.6B.50d.txt"
# MD5 of glove.6B.zip that several public download scripts check; Stanford publishes none.
GLOVE_MD5 = "056ea991adb4740ac6bf1b6d9b50408b"
PAD, UNK = 0, 1
TOKEN = re.compile(r"[\w']+|[.,!?;]")

SENT140_PARAMS: dict[str, Any] = {
    "fraction": 0.05,  # LEAF --sf
    "min_samples": 4,  # LEAF -k 3 (remove_users.py keeps users with > k samples)
    "sample_seed": 0,
    "seq_len": 25,
    "clients": 10,  # pFedBreD's regrouping; None = one client per LEAF user
    "alpha": 0.5,
    "min_users": 10,
    "regroup_seed": 1,
    "embed_dim": 50,
}

Tweet = tuple[int, str]  # (label, text)


def _check(source: str, p: dict[str, Any]) -> None:
    if not (isinstance(p["fraction"], (int, float)) and 0.0 < p["fraction"] <= 1.0):
        raise ValueError(f"{source}: fraction must be in (0, 1], got {p['fraction']!r}")
    for key, low in (("min_samples", 1), ("seq_len", 1), ("min_users", 1), ("embed_dim", 1)):
        v = p[key]
        if isinstance(v, bool) or not isinstance(v, int) or v < low:
            raise ValueError(f"{source}: {key} must be an integer >= {low}, got {v!r}")
    c = p["clients"]
    if c is not None and (isinstance(c, bool) or not isinstance(c, int) or c < 1):
        raise ValueError(f"{source}: clients must be a positive integer or None, got {c!r}")
    if not (isinstance(p["alpha"], (int, float)) and p["alpha"] > 0):
        raise ValueError(f"{source}: alpha must be > 0, got {p['alpha']!r}")


def tokenize(text: str, seq_len: int) -> list[str]:
    """pFedBreD's tokens of a tweet: lower-cased words (with apostrophes) and . , ! ? ;"""
    return TOKEN.findall(text.lower())[:seq_len]


def _csv_rows(zip_path: Path) -> Iterator[tuple[str, int, str]]:
    """(user, label, text) of every row of both CSVs, training first (LEAF's combine_data.py)."""
    try:
        with zipfile.ZipFile(zip_path) as z:
            names = set(z.namelist())
            missing = [n for n in SENT140_CSVS if n not in names]
            if missing:
                raise ValueError(f"{zip_path}: {missing} not in the zip (not Sentiment140's?)")
            for member in SENT140_CSVS:
                with z.open(member) as raw:
                    text = io.TextIOWrapper(raw, encoding="ISO-8859-1", newline="")
                    for line, row in enumerate(csv.reader(text), start=1):
                        if len(row) != 6:
                            raise ValueError(
                                f"{zip_path}:{member} line {line}: {len(row)} fields, expected 6 "
                                "(polarity, id, date, query, user, text)"
                            )
                        yield row[4], 1 if row[0] == "4" else 0, row[5]
    except (zipfile.BadZipFile, OSError) as err:
        raise ValueError(f"{zip_path}: not a readable zip ({err})") from None


def leaf_users(
    counts: dict[str, int], fraction: float, min_samples: int, seed: int
) -> list[tuple[str, int]]:
    """LEAF's niid user sample as (user, tweets kept): users in sorted order, shuffled with
    `seed`, taken until they hold int(fraction * all tweets), the last one cut to its first
    tweets to hit that number exactly (sample.py); then users with fewer than `min_samples`
    kept tweets dropped (remove_users.py), the order kept."""
    users = sorted(counts)
    target = max(int(fraction * sum(counts.values())), 1)
    taken, total = [], 0
    for i in np.random.default_rng(seed).permutation(len(users)):
        if total >= target:
            break
        n = min(counts[users[i]], target - total)
        taken.append((users[i], n))
        total += n
    return [(u, n) for u, n in taken if n >= min_samples]


def regroup(n_users: int, clients: int, alpha: float, min_users: int, seed: int) -> list[int]:
    """LEAF users per client, as pFedBreD's prepare_train_test_niid.py deals them.

    min_users each plus int(Dirichlet(alpha) shares of the rest), numpy's legacy generator seeded
    with `seed`; each user left over goes to a client drawn by Python's random(seed).
    """
    if n_users < clients * min_users:
        raise ValueError(
            f"sent140: {n_users} LEAF users cannot give {clients} clients {min_users} users each"
        )
    props = np.random.RandomState(seed).dirichlet([alpha] * clients)
    parts = [min_users + int((n_users - clients * min_users) * p) for p in props]
    pick = random.Random(seed)
    for _ in range(n_users - sum(parts)):
        parts[pick.randint(0, clients - 1)] += 1
    return parts


def encode(
    tweets: list[list[str]], vectors: dict[str, np.ndarray], seq_len: int, embed_dim: int
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Token ids (N, seq_len) float32, the embedding table (vocab, embed_dim), the vocabulary.

    Words with a vector get ids 2, 3, ... by frequency over all tweets (ties by the word);
    other tokens the unknown id 1; PAD 0 after the tweet. PAD and unknown rows are zero.
    """
    freq = Counter(t for toks in tweets for t in toks if t in vectors)
    vocab = sorted(freq, key=lambda w: (-freq[w], w))
    index = {w: i + 2 for i, w in enumerate(vocab)}
    x = np.full((len(tweets), seq_len), PAD, dtype=np.float32)
    for row, toks in enumerate(tweets):
        x[row, : len(toks)] = [index.get(t, UNK) for t in toks]
    table = np.zeros((len(vocab) + 2, embed_dim), dtype=np.float32)
    for w, i in index.items():
        table[i] = vectors[w]
    return x, table, ["<pad>", "<unk>", *vocab]


def read_glove(zip_path: Path, words: set[str], embed_dim: int) -> dict[str, np.ndarray]:
    """Vectors of `words` from glove.6B.50d.txt inside the zip (other rows are skipped)."""
    out: dict[str, np.ndarray] = {}
    try:
        with zipfile.ZipFile(zip_path) as z:
            if GLOVE_MEMBER not in z.namelist():
                raise ValueError(f"{zip_path}: {GLOVE_MEMBER} not in the zip")
            with z.open(GLOVE_MEMBER) as raw:
                for line_no, line in enumerate(io.TextIOWrapper(raw, encoding="utf-8"), 1):
                    word, _, rest = line.rstrip("\n").partition(" ")
                    if word in words:
                        vec = np.array(rest.split(" "), dtype=np.float32)
                        if vec.shape != (embed_dim,):
                            raise ValueError(
                                f"{zip_path}:{GLOVE_MEMBER} line {line_no}: {vec.size} numbers, "
                                f"expected {embed_dim}"
                            )
                        out[word] = vec
    except (zipfile.BadZipFile, OSError) as err:
        raise ValueError(f"{zip_path}: not a readable zip ({err})") from None
    return out


def build_dataset(
    name: str,
    users: list[list[Tweet]],
    vectors: dict[str, np.ndarray],
    params: dict[str, Any],
    standin: bool,
    provenance: str,
) -> ArrayDataset:
    """Encode the users' tweets, regroup the users into clients; every sample in the pool."""
    tokens = [tokenize(text, params["seq_len"]) for tweets in users for _, text in tweets]
    x, table, vocab = encode(tokens, vectors, params["seq_len"], params["embed_dim"])
    y = np.array([label for tweets in users for label, _ in tweets], dtype=np.int64)
    sizes = np.array([len(t) for t in users], dtype=np.int64)
    if params["clients"] is None:
        per_client = np.ones(len(users), dtype=np.int64)
    else:
        per_client = np.array(
            regroup(
                len(users),
                params["clients"],
                params["alpha"],
                params["min_users"],
                params["regroup_seed"],
            )
        )
    user_client = np.repeat(np.arange(len(per_client), dtype=np.int64), per_client)
    groups = np.repeat(user_client, sizes)
    known = int((x >= 2).sum())
    return ArrayDataset(
        name=name,
        x_train=x,
        y_train=y,
        x_test=np.zeros((0, params["seq_len"]), dtype=np.float32),
        y_test=np.zeros(0, dtype=np.int64),
        num_classes=2,
        standin=standin,
        provenance=(
            f"{provenance}; {len(users)} users, {len(y)} tweets ({int(y.sum())} positive), "
            f"{len(per_client)} clients of {per_client.tolist()[:20]} users; vocabulary "
            f"{len(vocab) - 2} words + PAD/unk, {known} of {int((x != PAD).sum())} tokens "
            f"have a vector; params={params}"
        ),
        groups=groups,
        extras={"embedding": table},
    )


class Sent140(Source):
    """Sentiment140 tweets as LEAF samples them, GloVe-50 token ids, pFedBreD's 10 clients."""

    name = "sent140"
    input_shape = (25,)
    num_classes = 2
    params = SENT140_PARAMS
    files = [
        RemoteFile(
            SENT140_ZIP,
            (
                "https://cs.stanford.edu/people/alecmgo/" + SENT140_ZIP,
                "http://cs.stanford.edu/people/alecmgo/" + SENT140_ZIP,
            ),
            sha256=SENT140_SHA256,
        ),
        RemoteFile(
            GLOVE_ZIP,
            (
                "https://nlp.stanford.edu/data/" + GLOVE_ZIP,
                "https://downloads.cs.stanford.edu/nlp/data/" + GLOVE_ZIP,
            ),
            md5=GLOVE_MD5,
        ),
    ]

    def check_params(self, params: dict[str, Any]) -> dict[str, Any]:
        """Defaults filled in, unknown names and bad values rejected."""
        out = check_params(self.name, params, self.params)
        _check(self.name, out)
        return out

    def offline_dir(self) -> Path | None:
        """FEDBENCH_SENT140_DIR: a folder holding both zips (checked on fetch), if set."""
        folder = os.environ.get("FEDBENCH_SENT140_DIR")
        return Path(folder) if folder else None

    def load(self, raw_dir: str | os.PathLike, **params: Any) -> ArrayDataset:
        """LEAF's user sample of the zip's tweets, encoded with the GloVe zip's 50-d vocabulary."""
        p = self.check_params(params)
        tweets_zip, glove_zip = self._path(raw_dir, SENT140_ZIP), self._path(raw_dir, GLOVE_ZIP)
        counts = Counter(user for user, _, _ in _csv_rows(tweets_zip))
        kept = dict(leaf_users(counts, p["fraction"], p["min_samples"], p["sample_seed"]))
        if not kept:
            raise ValueError(f"{self.name}: no user with min_samples={p['min_samples']} sampled")
        by_user: dict[str, list[Tweet]] = {u: [] for u in kept}
        for user, label, text in _csv_rows(tweets_zip):
            if user in kept and len(by_user[user]) < kept[user]:
                by_user[user].append((label, text))
        users = list(by_user.values())
        words = {t for tweets in users for _, text in tweets for t in tokenize(text, p["seq_len"])}
        vectors = read_glove(glove_zip, words, p["embed_dim"])
        return build_dataset(
            self.name,
            users,
            vectors,
            p,
            False,
            f"sent140: {tweets_zip} ({len(counts)} users, {sum(counts.values())} tweets) + "
            f"{glove_zip}:{GLOVE_MEMBER}; LEAF niid sample, -k {p['min_samples'] - 1}",
        )

    def standin(
        self, rng: np.random.Generator, *, n_train: int = 2000, n_test: int = 500, **params: Any
    ) -> ArrayDataset:
        """GENERATED tweets, never real: Zipf-distributed words of a 300-word vocabulary with
        random 50-d vectors, whose first coordinate is the word's sentiment; a tweet is positive
        when its words' mean sentiment (centred) plus its user's bias and noise is > 0. Users
        hold 3 or more tweets with a heavy tail (as LEAF's users), about n_train tweets in all;
        n_test is unused (the partition splits each client)."""
        p = self.check_params(params)
        clients = p["clients"] or 1
        # Small stand-ins (cost probes) lower min_users so each user still has 3 tweets.
        p["min_users"] = max(1, min(p["min_users"], n_train // (3 * clients)))
        n_users = max(n_train // 5, clients * p["min_users"])
        if n_train < 3 * n_users:
            raise ValueError(
                f"{self.name}: stand-in needs n_train >= {3 * n_users} (3 tweets for each of "
                f"{n_users} users)"
            )
        weights = rng.lognormal(0.0, 1.0, n_users)
        sizes = 3 + rng.multinomial(n_train - 3 * n_users, weights / weights.sum())
        words = [f"w{i}" for i in range(300)]
        sentiment = rng.normal(0.0, 1.0, len(words))
        vec = rng.normal(0.0, 0.4, (len(words), p["embed_dim"])).astype(np.float32)
        vec[:, 0] = sentiment
        zipf = 1.0 / np.arange(1, len(words) + 1)
        zipf /= zipf.sum()
        centre = float(zipf @ sentiment)  # a typical tweet's mean sentiment: about half positive
        users: list[list[Tweet]] = []
        for size in sizes:
            bias = rng.normal(0.0, 0.3)
            tweets = []
            for _ in range(int(size)):
                ids = rng.choice(len(words), size=int(rng.integers(3, p["seq_len"] + 1)), p=zipf)
                score = sentiment[ids].mean() - centre + bias + rng.normal(0.0, 0.2)
                tweets.append((int(score > 0), " ".join(words[i] for i in ids)))
            users.append(tweets)
        return build_dataset(
            self.name,
            users,
            {w: vec[i] for i, w in enumerate(words)},
            p,
            True,
            f"generated stand-in for {self.name}: random Zipf word tweets, label from a hidden "
            f"per-word sentiment (learnable from the tokens), n_train={n_train}",
        )
