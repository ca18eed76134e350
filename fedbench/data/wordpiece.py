"""BERT's uncased WordPiece tokenizer (basic split + greedy longest-match), for DistilBERT inputs.

Written from the published algorithm (Devlin et al. 2019; the vocab.txt of distilbert-base-uncased):
lower-case, strip accents, split on whitespace and punctuation (CJK characters on their own),
then each word into the longest vocabulary prefixes, continuations marked "##"; a word with no
split, or longer than 100 characters, is [UNK].
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

PAD, UNK, CLS, SEP = "[PAD]", "[UNK]", "[CLS]", "[SEP]"
MAX_WORD_CHARS = 100


def read_vocab(path: Path) -> dict[str, int]:
    """vocab.txt: one token per line, id = line number; the special tokens must be present."""
    tokens = path.read_text(encoding="utf-8").split("\n")
    if tokens and tokens[-1] == "":
        tokens.pop()
    vocab = {t: i for i, t in enumerate(tokens)}
    missing = [t for t in (PAD, UNK, CLS, SEP) if t not in vocab]
    if missing:
        raise ValueError(f"{path}: vocabulary lacks {missing}")
    return vocab


def _is_punct(ch: str) -> bool:
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(cp: int) -> bool:
    ranges = (
        (0x4E00, 0x9FFF),
        (0x3400, 0x4DBF),
        (0x20000, 0x2A6DF),
        (0x2A700, 0x2B73F),
        (0x2B740, 0x2B81F),
        (0x2B820, 0x2CEAF),
        (0xF900, 0xFAFF),
        (0x2F800, 0x2FA1F),
    )
    return any(a <= cp <= b for a, b in ranges)


def basic_tokens(text: str) -> list[str]:
    """Lower-cased, accent-free words and single punctuation / CJK characters."""
    clean = []
    for ch in text:
        cp = ord(ch)
        if (
            cp == 0
            or cp == 0xFFFD
            or (unicodedata.category(ch).startswith("C") and ch not in "\t\n\r")
        ):
            continue
        if ch.isspace():
            clean.append(" ")
        elif _is_cjk(cp):
            clean.append(f" {ch} ")
        else:
            clean.append(ch)
    out = []
    for word in "".join(clean).split():
        word = unicodedata.normalize("NFD", word.lower())
        word = "".join(c for c in word if unicodedata.category(c) != "Mn")
        piece = ""
        for ch in word:
            if _is_punct(ch):
                if piece:
                    out.append(piece)
                out.append(ch)
                piece = ""
            else:
                piece += ch
        if piece:
            out.append(piece)
    return out


def wordpiece(word: str, vocab: dict[str, int]) -> list[str]:
    """Greedy longest-prefix split of one word; [UNK] when some rest has no vocabulary prefix."""
    if len(word) > MAX_WORD_CHARS:
        return [UNK]
    pieces, start = [], 0
    while start < len(word):
        end = len(word)
        while end > start:
            sub = word[start:end] if start == 0 else "##" + word[start:end]
            if sub in vocab:
                pieces.append(sub)
                break
            end -= 1
        if end == start:
            return [UNK]
        start = end
    return pieces


def tokenize(text: str, vocab: dict[str, int]) -> list[int]:
    """Token ids of a text, without special tokens."""
    return [vocab[p] for w in basic_tokens(text) for p in wordpiece(w, vocab)]


def encode_pair(
    a: str, b: str, vocab: dict[str, int], max_length: int
) -> tuple[list[int], list[int]]:
    """[CLS] a [SEP] b [SEP], truncated longest-first to max_length, padded; (ids, mask)."""
    ta, tb = tokenize(a, vocab), tokenize(b, vocab)
    budget = max_length - 3
    while len(ta) + len(tb) > budget:
        if len(ta) > len(tb):
            ta.pop()
        else:
            tb.pop()
    ids = [vocab[CLS], *ta, vocab[SEP], *tb, vocab[SEP]]
    mask = [1] * len(ids) + [0] * (max_length - len(ids))
    return ids + [vocab[PAD]] * (max_length - len(ids)), mask
