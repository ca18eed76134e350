"""Medical Question Pairs (Curai, McCreery et al. 2020): 3,048 pairs, similar or not, 11 doctors.

AAggFF's cross-silo text benchmark (aaggff.md §9.4): each pair becomes one DistilBERT input,
`[CLS] q1 [SEP] q2 [SEP]`, padded / truncated to 200 tokens with distilbert-base-uncased's
WordPiece vocabulary; a sample is (2, 200): input ids and attention mask (as float32).
"""

from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import Any

import numpy as np

from fedbench.data.base import ArrayDataset, RemoteFile
from fedbench.data.natural import CheckedSource, natural_dataset, natural_standin
from fedbench.data.wordpiece import encode_pair, read_vocab

MQP_CSV = "mqp.csv"
VOCAB = "vocab.txt"
VOCAB_SIZE = 30522
MAX_LEN = 200
STATS = (11, 277.09, 63.25)  # Table 3.5


def read_mqp(path: Path) -> list[tuple[str, str, str, int]]:
    """Rows (doctor id, question 1, question 2, label) of the header-less CSV."""
    rows = []
    with open(path, newline="", encoding="utf-8") as f:
        for i, row in enumerate(csv.reader(f)):
            if len(row) != 4:
                raise ValueError(f"{path}: row {i + 1} has {len(row)} fields, expected 4")
            doctor, q1, q2, label = row
            if label.strip() not in ("0", "1"):
                raise ValueError(f"{path}: row {i + 1} label {label!r} is not 0 or 1")
            rows.append((doctor.strip(), q1, q2, int(label)))
    if not rows:
        raise ValueError(f"{path}: no rows")
    return rows


class MQP(CheckedSource):
    """MQP pairs as DistilBERT token ids; groups = labelling doctor (11 clients).

    Files: mqp.csv from Curai's GitHub repository (the AAggFF release cites an MD5 for it) and
    distilbert-base-uncased's vocab.txt from the Hugging Face hub; neither has a published
    SHA-256, so fetch checks the CSV's four columns and the vocabulary's size and special-token
    ids ([PAD] 0, [UNK] 100, [CLS] 101, [SEP] 102). Tokenisation is fedbench's own WordPiece
    (`fedbench.data.wordpiece`), done once in `load` and cached in the prepared .npz.
    """

    name = "mqp"
    input_shape = (2, MAX_LEN)
    num_classes = 2
    params = {"max_length": MAX_LEN}
    files = [
        RemoteFile(
            MQP_CSV,
            (
                "https://raw.githubusercontent.com/curai/medical-question-pair-dataset/master/"
                + MQP_CSV,
            ),
        ),
        RemoteFile(
            VOCAB, ("https://huggingface.co/distilbert-base-uncased/resolve/main/vocab.txt",)
        ),
    ]
    cited_md5 = {MQP_CSV: ("06c0121fe60cefa3cdf4d49a637dcaa6", "AAggFF release, mqp.py")}

    def check_file(self, filename: str, path: Path) -> None:
        """CSV: 4 columns, 0/1 labels; vocab: BERT-uncased size and special ids."""
        if filename == MQP_CSV:
            read_mqp(path)
            return
        vocab = read_vocab(path)
        expect = {"[PAD]": 0, "[UNK]": 100, "[CLS]": 101, "[SEP]": 102}
        if len(vocab) != VOCAB_SIZE or any(vocab[t] != i for t, i in expect.items()):
            raise ValueError(f"not BERT-uncased's vocabulary ({len(vocab)} tokens)")

    def load(self, raw_dir: str | os.PathLike, **params: Any) -> ArrayDataset:
        """Every pair tokenised; groups = doctor ids in sorted order."""
        params = self.check_params(params)
        max_length = int(params["max_length"])
        rows = read_mqp(self._path(raw_dir, MQP_CSV))
        vocab = read_vocab(self._path(raw_dir, VOCAB))
        doctors = sorted({r[0] for r in rows}, key=lambda d: (len(d), d))
        index = {d: k for k, d in enumerate(doctors)}
        x = np.zeros((len(rows), 2, max_length), dtype=np.float32)
        for i, (_, q1, q2, _) in enumerate(rows):
            ids, mask = encode_pair(q1, q2, vocab, max_length)
            x[i, 0], x[i, 1] = ids, mask
        return natural_dataset(
            self.name,
            x,
            np.array([r[3] for r in rows], dtype=np.int64),
            np.array([index[r[0]] for r in rows], dtype=np.int64),
            self.num_classes,
            f"mqp: {raw_dir}/{MQP_CSV}, {len(rows)} pairs, doctors {doctors}; WordPiece "
            f"(distilbert-base-uncased vocab.txt), max_length={max_length}",
        )

    def standin(
        self, rng: np.random.Generator, *, n_train: int = 2000, n_test: int = 500, **params: Any
    ) -> ArrayDataset:
        """Token-id pairs of random length; the label is carried by a few marker tokens."""
        params = self.check_params(params)
        max_length = int(params["max_length"])

        def draw(r: np.random.Generator, groups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            n = len(groups)
            y = r.integers(0, 2, n).astype(np.int64)
            lengths = r.integers(12, min(60, max_length) + 1, n)
            x = np.zeros((n, 2, max_length), dtype=np.float32)
            markers = np.array([[2000, 2001, 2002], [3000, 3001, 3002]])
            for i in range(n):
                ids = r.integers(1996, VOCAB_SIZE, lengths[i])
                ids[r.integers(1, lengths[i] - 1, 3)] = markers[y[i]]
                ids[0], ids[-1] = 101, 102
                x[i, 0, : lengths[i]], x[i, 1, : lengths[i]] = ids, 1
            return x, y

        return natural_standin(
            self.name,
            rng,
            n_train,
            STATS,
            None,
            draw,
            self.num_classes,
            f"random WordPiece ids framed by [CLS]/[SEP] with class marker tokens, "
            f"max_length={max_length}",
        )
