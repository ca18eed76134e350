"""Speech Commands v0.02 (Warden 2018): 1-second keyword clips, 35 words, one client per speaker.

AAggFF's cross-device audio benchmark (aaggff.md §9.4): torchaudio's "training" subset (files in
neither validation_list.txt nor testing_list.txt), speakers with fewer than 3 clips left out
(2,005 of 2,618 remain), each clip zero-padded to 16,000 samples; M5 reads the raw waveform.

No `source: hub` (fedbench/data/hub.py): the hub's `google/speech_commands` is a loading script
(`datasets` 4+ no longer runs scripts, and its viewer has no parquet conversion), and the parquet
copies found do not document version 0.02's speakers, files and 16-bit audio; the archive comes
from Google's own storage with torchaudio's SHA-256.
"""

from __future__ import annotations

import io
import os
import tarfile
import wave
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from fedbench.data.base import ArrayDataset, RemoteFile, Source
from fedbench.data.natural import natural_dataset, natural_standin

ARCHIVE = "speech_commands_v0.02.tar.gz"
RATE = 16000
NOISE_DIR = "_background_noise_"
STATS = (2005, 42.24, 36.69)  # Table 3.5
NUM_WORDS = 35


def decode_wav(data: bytes, what: str, length: int = RATE) -> np.ndarray:
    """16-bit mono PCM at 16 kHz -> float32 in [-1, 1) (int / 32768), zero-padded to `length`."""
    try:
        with wave.open(io.BytesIO(data)) as w:
            if w.getnchannels() != 1 or w.getsampwidth() != 2 or w.getframerate() != RATE:
                raise ValueError(
                    f"{what}: expected 16-bit mono at {RATE} Hz, got {w.getnchannels()} channels, "
                    f"{8 * w.getsampwidth()} bits, {w.getframerate()} Hz"
                )
            pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    except (wave.Error, EOFError) as err:
        raise ValueError(f"{what}: not a WAV file ({err})") from None
    out = np.zeros(length, dtype=np.float32)
    clip = pcm[:length].astype(np.float32) / np.float32(32768.0)
    out[: len(clip)] = clip
    return out


def _member_key(name: str) -> str | None:
    """'word/speaker_nohash_k.wav' for a clip member, else None."""
    parts = PurePosixPath(name).parts
    parts = parts[1:] if parts and parts[0] == "." else parts
    if len(parts) != 2 or not parts[1].endswith(".wav") or parts[0] == NOISE_DIR:
        return None
    return "/".join(parts)


def speaker_of(key: str) -> str:
    """The speaker hash of 'word/<speaker>_nohash_<k>.wav'."""
    return PurePosixPath(key).name.split("_nohash_")[0]


def read_speechcommands(
    path: Path, min_samples: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str], list[str], int]:
    """(waveforms, labels, speaker ids, words, speakers, speakers dropped) of the training subset.

    Two streaming passes over the archive: the split lists and the clip names first, then the
    chosen clips' audio (the archive is not unpacked to disk).
    """
    held_out: set[str] = set()
    keys: list[str] = []
    with tarfile.open(path, "r:gz") as tar:
        for m in tar:
            base = PurePosixPath(m.name).name
            if base in ("validation_list.txt", "testing_list.txt") and m.isfile():
                held_out.update(tar.extractfile(m).read().decode().split())
            elif m.isfile() and (key := _member_key(m.name)):
                keys.append(key)
    train = sorted(k for k in keys if k not in held_out)
    if not train:
        raise ValueError(f"{path}: no training clips (archive empty or lists cover everything)")
    counts: dict[str, int] = {}
    for k in train:
        counts[speaker_of(k)] = counts.get(speaker_of(k), 0) + 1
    speakers = sorted(s for s, c in counts.items() if c >= min_samples)
    chosen = {k for k in train if counts[speaker_of(k)] >= min_samples}
    words = sorted({k.split("/")[0] for k in keys})
    order = sorted(chosen)
    row = {k: i for i, k in enumerate(order)}
    x = np.zeros((len(order), 1, RATE), dtype=np.float32)  # filled in place: no second copy
    filled = 0
    with tarfile.open(path, "r:gz") as tar:
        for m in tar:
            key = _member_key(m.name) if m.isfile() else None
            if key in row:
                x[row[key], 0] = decode_wav(tar.extractfile(m).read(), m.name)
                filled += 1
    if filled != len(order):
        raise ValueError(f"{path}: {len(order) - filled} clips vanished between the two passes")
    sid = {s: i for i, s in enumerate(speakers)}
    wid = {w: i for i, w in enumerate(words)}
    y = np.array([wid[k.split("/")[0]] for k in order], dtype=np.int64)
    g = np.array([sid[speaker_of(k)] for k in order], dtype=np.int64)
    return x, y, g, words, speakers, len(counts) - len(speakers)


class SpeechCommands(Source):
    """Speech Commands v0.02, training subset, clients = speakers with >= min_samples clips.

    The archive's SHA-256 is the one torchaudio's SPEECHCOMMANDS dataset checks (2,428,923,189
    bytes); the 35 words are numbered in sorted order. The full pool is 84,700 x 16,000 float32
    (about 5.4 GB).
    """

    name = "speechcommands"
    input_shape = (1, RATE)
    num_classes = NUM_WORDS
    params = {"min_samples": 3}
    files = [
        RemoteFile(
            ARCHIVE,
            (
                "http://download.tensorflow.org/data/" + ARCHIVE,
                "https://storage.googleapis.com/download.tensorflow.org/data/" + ARCHIVE,
            ),
            sha256="af14739ee7dc311471de98f5f9d2c9191b18aedfe957f4a6ff791c709868ff58",
        )
    ]

    def load(self, raw_dir: str | os.PathLike, **params: Any) -> ArrayDataset:
        """Waveforms (1, 16000), word labels, groups = speaker."""
        params = self.check_params(params)
        path = self._path(raw_dir, ARCHIVE)
        try:
            x, y, g, words, speakers, dropped = read_speechcommands(path, params["min_samples"])
        except (tarfile.TarError, OSError, EOFError) as err:
            raise ValueError(f"{path}: not a readable Speech Commands archive ({err})") from None
        if len(words) > NUM_WORDS:
            raise ValueError(f"{path}: {len(words)} words, expected at most {NUM_WORDS}")
        return natural_dataset(
            self.name,
            x,
            y,
            g,
            self.num_classes,
            f"speechcommands: {path}; training subset, {len(speakers)} speakers with >= "
            f"{params['min_samples']} clips ({dropped} dropped), {len(y)} clips zero-padded to "
            f"{RATE} samples; words {words}",
        )

    def standin(
        self, rng: np.random.Generator, *, n_train: int = 2000, n_test: int = 500, **params: Any
    ) -> ArrayDataset:
        """1-second clips: a word-specific two-tone chirp with a speaker pitch shift, plus noise."""
        params = self.check_params(params)
        t = np.arange(RATE, dtype=np.float32) / RATE

        def draw(r: np.random.Generator, groups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            n, k = len(groups), int(groups.max()) + 1
            y = r.integers(0, NUM_WORDS, n).astype(np.int64)
            base = r.uniform(200.0, 1200.0, (NUM_WORDS, 2)).astype(np.float32)
            pitch = r.uniform(0.85, 1.15, k).astype(np.float32)
            f = base[y] * pitch[groups, None]
            x = 0.3 * np.sin(2 * np.pi * f[:, :1] * t) + 0.2 * np.sin(2 * np.pi * f[:, 1:] * t)
            x += r.normal(0.0, 0.05, x.shape)
            return x[:, None, :].astype(np.float32), y

        return natural_standin(
            self.name,
            rng,
            n_train,
            STATS,
            None,
            draw,
            self.num_classes,
            "two sine tones per word, speaker pitch factor, Gaussian noise; (1, 16000)",
            minimum=max(5, params["min_samples"]),  # >= 1 test clip per speaker at 20 %
        )
