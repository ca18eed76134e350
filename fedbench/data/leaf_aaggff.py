"""LEAF's CelebA (smiling, one client per celebrity) and Reddit (next token, one client per user).

AAggFF's cross-device benchmarks (aaggff.md §9.4). CelebA is rebuilt the way LEAF's preprocessing
does it (celebrities with at least 5 aligned images, label = Smiling) from Flower Labs' hub copy
(`source: hub`, the default) or from CelebA's own files (`source: original`).
Reddit reads LEAF's preprocessed subsample (December 2017 comments), builds LEAF's 10,000-token
vocabulary (<PAD> 0, <UNK> 1, <BOS> 2, <EOS> 3, then the most frequent training tokens) and keeps
each 10-token sequence as one sample.
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from collections import Counter
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from fedbench.data.base import ArrayDataset, RemoteFile
from fedbench.data.hub import HubRepo, HubRouted, load_split
from fedbench.data.natural import (
    CheckedSource,
    check_zip_members,
    natural_dataset,
    natural_standin,
    prototype_images,
)

GDRIVE = "https://drive.google.com/uc?export=download&confirm=t&id="
CELEBA_PAGE = "https://mmlab.ie.cuhk.edu.hk/projects/CelebA.html"
IDENTITY = "identity_CelebA.txt"
ATTRS = "list_attr_celeba.txt"
IMAGES = "img_align_celeba.zip"
CELEBA_SIDE = 84
CELEBA_STATS = (9343, 21.44, 7.63)  # Table 3.5
MIN_IMAGES = 5  # LEAF keeps celebrities with >= 5 images
# Flower Labs' copy of CelebA's aligned images with identities and attributes: config
# `img_align+identity+attr`, splits train / valid / test (162,770 / 19,867 / 19,962 rows, CelebA's
# own partition), columns `image`, `celeb_id` (identity_CelebA.txt's id) and the 40 attributes as
# bools (`Smiling` among them), per the dataset card (dataset_info) and file tree at this revision.
CELEBA_HUB = HubRepo(
    "flwrlabs/celeba", "2d738f56e0e7f925ea36ae7c808ea925264aacec", config="img_align+identity+attr"
)
CELEBA_HUB_SPLITS = ("train", "valid", "test")
CELEBA_HUB_NPZ = "celeba-hub.npz"

REDDIT_ZIP = "reddit_subsampled.zip"
REDDIT_STATS = (817, 119.90, 229.85)  # Table 3.5
SPECIALS = ("<PAD>", "<UNK>", "<BOS>", "<EOS>")
VOCAB_SIZE = 10000
SEQ_LEN = 10


def read_identity(text: str) -> dict[str, int]:
    """identity_CelebA.txt: 'image.jpg celebrity_id' per line."""
    out = {}
    for i, line in enumerate(text.splitlines()):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 2 or not parts[1].isdigit():
            raise ValueError(f"{IDENTITY} line {i + 1}: expected 'image.jpg id', got {line!r}")
        out[parts[0]] = int(parts[1])
    if not out:
        raise ValueError(f"{IDENTITY}: empty")
    return out


def read_smiling(text: str) -> dict[str, int]:
    """list_attr_celeba.txt (count, 40 attribute names, one ±1 row per image) -> Smiling 0/1."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 2 or "Smiling" not in lines[1].split():
        raise ValueError(f"{ATTRS}: second line must name the attributes, with Smiling")
    names = lines[1].split()
    col = names.index("Smiling")
    out = {}
    for i, line in enumerate(lines[2:]):
        parts = line.split()
        if len(parts) != len(names) + 1 or parts[col + 1] not in ("1", "-1"):
            raise ValueError(f"{ATTRS} row {i + 1}: expected an image name and {len(names)} ±1")
        out[parts[0]] = int(parts[col + 1] == "1")
    return out


def celeba_pixels(data: bytes, what: str, side: int) -> np.ndarray:
    """An aligned image resized to side x side (PIL bicubic, LEAF's resize), uint8 (3, s, s)."""
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as img:
            arr = np.asarray(img.convert("RGB").resize((side, side), Image.Resampling.BICUBIC))
    except OSError as err:
        raise ValueError(f"{what}: cannot decode ({err})") from None
    return arr.transpose(2, 0, 1)


def celeba_image(data: bytes, what: str, side: int) -> np.ndarray:
    """`celeba_pixels` in [0, 1] as float32."""
    return np.divide(celeba_pixels(data, what, side), np.float32(255.0), dtype=np.float32)


def keep_celebs(counts: dict[int, int], params: dict[str, Any]) -> list[int]:
    """Celebrities with >= MIN_IMAGES images (sorted ids), then a seeded max_clients of them."""
    celebs = sorted(c for c, n in counts.items() if n >= MIN_IMAGES)
    if params["max_clients"] is not None and params["max_clients"] < len(celebs):
        pick = np.random.default_rng(params["seed"]).choice(
            len(celebs), params["max_clients"], replace=False
        )
        celebs = [celebs[i] for i in np.sort(pick)]
    return celebs


def hub_celeba(splits: list[Any], side: int) -> dict[str, np.ndarray]:
    """The hub copy's splits (in order) as uint8 images resized like the original route's, the
    celebrity and Smiling of each row, and each image's file name ('' when the copy names none).
    The images are read as stored (`decode=False`) and decoded here, as `celeba_image` does."""
    import datasets  # Hugging Face's library: imported only to fetch

    n = sum(len(ds) for ds in splits)
    x = np.empty((n, 3, side, side), dtype=np.uint8)
    celeb, smiling, names = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64), []
    for ds in splits:
        missing = sorted({"image", "celeb_id", "Smiling"} - set(ds.column_names))
        if missing:
            raise ValueError(f"leaf_celeba: the hub copy lacks the column(s) {missing}")
        ds = ds.select_columns(["image", "celeb_id", "Smiling"])
        for batch in ds.cast_column("image", datasets.Image(decode=False)).iter(batch_size=1024):
            for img, c, s in zip(batch["image"], batch["celeb_id"], batch["Smiling"], strict=True):
                name = PurePosixPath(img.get("path") or "").name
                i = len(names)
                x[i] = celeba_pixels(img["bytes"], f"hub row {i} {name}".strip(), side)
                celeb[i], smiling[i] = int(c), int(bool(s))
                names.append(name)
    return {"x": x, "celeb": celeb, "smiling": smiling, "names": np.asarray(names, dtype=str)}


class LeafCelebA(HubRouted, CheckedSource):
    """CelebA smiling / not, one client per celebrity with >= 5 images (LEAF: 9,343 clients).

    Hub (`source: hub`, the default): `flwrlabs/celeba` (CELEBA_HUB) through `datasets`, all
    three splits, converted once to celeba-hub.npz (uint8 at 84 x 84, 4.3 GB; the download is
    about 11.7 GB of parquet, and `datasets` keeps an Arrow copy in its cache). The default
    because the original's identity and attribute files sit on Google Drive, whose links stop at
    a quota page; the hub serves the same celebrities (`celeb_id`) and labels (`Smiling`). Rows
    are ordered as the original route orders them, by each image's file name when the copy
    keeps one, else by its row order (train, valid, test: CelebA's own image order); a test
    writes both formats from one set of images and gets the same clients and samples. Where
    they can differ: whether the copy's images are the JPEGs of img_align_celeba.zip is not
    stated on its card (at about 58 KB a row they may be CelebA's PNG version, whose pixels
    differ slightly from the JPEGs'); `side` other than 84 needs the original route.

    Original (`source: original`): CelebA's files live on Google Drive behind the authors' page,
    which asks users to agree to non-commercial research use; fetch tries Drive (identity and
    attribute files) and the mirror the AAggFF release uses for the images (whose MD5 it cites),
    then checks each file's format.

    Images are resized to 84 x 84 and kept in [0, 1]; the release's normalisation
    ((x - 0.5) / 0.5) is the catalog's `transform: {standardise: half}`. `max_clients` keeps a
    seeded subset of celebrities (quick runs); the full pool is about 17 GB as float32.
    """

    name = "leaf_celeba"
    input_shape = (3, CELEBA_SIDE, CELEBA_SIDE)
    num_classes = 2
    params = {"source": "hub", "max_clients": None, "seed": 0, "side": CELEBA_SIDE}
    hub = CELEBA_HUB
    hub_file = CELEBA_HUB_NPZ
    original_files = [
        RemoteFile(IDENTITY, (GDRIVE + "1_ee_0u7vcNLOfNLegJRHmolfH5ICW-XS",)),
        RemoteFile(ATTRS, (GDRIVE + "0B7EVK8r0v71pblRyaVFSWGxPY0U",)),
        RemoteFile(IMAGES, ("https://cseweb.ucsd.edu/~weijian/static/datasets/celeba/" + IMAGES,)),
    ]
    cited_md5 = {IMAGES: ("00d2c5bc6d35e252742224ab0c1e8fcb", "AAggFF release, leaf_utils.py")}
    hand_hints = {
        IDENTITY: f"{CELEBA_PAGE} -> Google Drive, Anno/{IDENTITY}",
        ATTRS: f"{CELEBA_PAGE} -> Google Drive, Anno/{ATTRS}",
        IMAGES: f"{CELEBA_PAGE} -> Google Drive, Img/{IMAGES} (aligned and cropped JPEGs)",
    }

    def check_file(self, filename: str, path: Path) -> None:
        """The two text files parse; the zip holds JPEGs."""
        if filename == IDENTITY:
            read_identity(path.read_text())
        elif filename == ATTRS:
            read_smiling(path.read_text())
        else:
            with zipfile.ZipFile(path) as z:
                if not any(n.endswith(".jpg") for n in z.namelist()):
                    raise ValueError("no .jpg in the zip")

    def convert_hub(self, raw_dir: Path) -> tuple[dict[str, np.ndarray], str]:
        """All three splits of the hub copy, resized to 84 x 84 (uint8)."""
        splits, origins = [], []
        for split in CELEBA_HUB_SPLITS:
            ds, origin = load_split(
                self.name, self.hub, split, raw_dir, "CelebA's files from Google Drive"
            )
            splits.append(ds)
            origins.append(origin)
        return hub_celeba(splits, CELEBA_SIDE), "; ".join(origins)

    def load(self, raw_dir: str | os.PathLike, **params: Any) -> ArrayDataset:
        """Images of the kept celebrities (sorted ids), groups = celebrity."""
        params = self.check_params(params)
        if params["source"] == "hub":
            return self._load_hub(raw_dir, params)
        identity = read_identity(self._path(raw_dir, IDENTITY).read_text())
        smiling = read_smiling(self._path(raw_dir, ATTRS).read_text())
        by_celeb: dict[int, list[str]] = {}
        for img, celeb in identity.items():
            by_celeb.setdefault(celeb, []).append(img)
        celebs = keep_celebs({c: len(imgs) for c, imgs in by_celeb.items()}, params)
        zpath = self._path(raw_dir, IMAGES)
        chosen = [(img, k) for k, celeb in enumerate(celebs) for img in sorted(by_celeb[celeb])]
        if not chosen:
            raise ValueError(f"{self.name}: no celebrity has {MIN_IMAGES} images")
        side = params["side"]
        x = np.empty((len(chosen), 3, side, side), dtype=np.float32)  # no second copy
        try:
            with zipfile.ZipFile(zpath) as z:
                member = {PurePosixPath(n).name: n for n in z.namelist() if n.endswith(".jpg")}
                for i, (img, _) in enumerate(chosen):
                    if img not in member or img not in smiling:
                        raise ValueError(f"{img} is missing from {IMAGES} or {ATTRS}")
                    x[i] = celeba_image(z.read(member[img]), img, side)
        except zipfile.BadZipFile as err:
            raise ValueError(f"{zpath}: not a zip ({err})") from None
        return natural_dataset(
            self.name,
            x,
            np.array([smiling[img] for img, _ in chosen], dtype=np.int64),
            np.array([k for _, k in chosen], dtype=np.int64),
            self.num_classes,
            f"leaf_celeba: source original, {raw_dir}; {len(celebs)} celebrities with >= "
            f"{MIN_IMAGES} images, {len(chosen)} images resized to {side}x{side}, label Smiling; "
            f"params={params}",
        )

    def _load_hub(self, raw_dir: str | os.PathLike, params: dict[str, Any]) -> ArrayDataset:
        """The kept celebrities' rows of celeba-hub.npz, each celebrity's images by file name
        (row order when the copy names none)."""
        if params["side"] != CELEBA_SIDE:
            raise ValueError(
                f"{self.name}: the hub copy is converted at {CELEBA_SIDE}x{CELEBA_SIDE}, not "
                f"side={params['side']}; set the dataset's params `source: original` for "
                "another size"
            )
        path = self._path(raw_dir, CELEBA_HUB_NPZ)
        with np.load(path) as z:
            x8, celeb, smiling, names = z["x"], z["celeb"], z["smiling"], z["names"]
        named = bool(len(names)) and all(names) and len(set(names.tolist())) == len(names)
        key = names if named else np.arange(len(celeb))
        ids, counts = np.unique(celeb, return_counts=True)
        celebs = keep_celebs(dict(zip(ids.tolist(), counts.tolist(), strict=True)), params)
        if not celebs:
            raise ValueError(f"{self.name}: no celebrity has {MIN_IMAGES} images")
        order = np.lexsort((key, celeb))
        starts = np.searchsorted(celeb[order], celebs)
        sizes = dict(zip(ids.tolist(), counts.tolist(), strict=True))
        rows = np.concatenate(
            [order[s : s + sizes[c]] for s, c in zip(starts, celebs, strict=True)]
        )
        x = np.empty((len(rows), *x8.shape[1:]), dtype=np.float32)  # no second copy
        for at in range(0, len(rows), 4096):
            x[at : at + 4096] = np.divide(
                x8[rows[at : at + 4096]], np.float32(255.0), dtype=np.float32
            )
        groups = np.repeat(np.arange(len(celebs), dtype=np.int64), [sizes[c] for c in celebs])
        return natural_dataset(
            self.name,
            x,
            smiling[rows],
            groups,
            self.num_classes,
            f"leaf_celeba: source hub, {self.hub.repo_id}@{self.hub.revision} through datasets, "
            f"converted in {path}; {len(celebs)} celebrities with >= {MIN_IMAGES} images, "
            f"{len(rows)} images resized to {CELEBA_SIDE}x{CELEBA_SIDE}, label Smiling, each "
            f"celebrity's images by {'file name' if named else 'row order'}; params={params}",
        )

    def standin(
        self, rng: np.random.Generator, *, n_train: int = 2000, n_test: int = 500, **params: Any
    ) -> ArrayDataset:
        """3 x 84 x 84 images, two classes, clients sized like LEAF's celebrities."""
        params = self.check_params(params)
        shape = (3, params["side"], params["side"])

        def draw(r: np.random.Generator, groups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            x, y = prototype_images(r, len(groups), shape, 2)
            tint = r.uniform(0.8, 1.0, (int(groups.max()) + 1, 3, 1, 1))
            return (x * tint[groups]).astype(np.float32), y

        return natural_standin(
            self.name,
            rng,
            n_train,
            CELEBA_STATS,
            params["max_clients"],
            draw,
            self.num_classes,
            f"two smooth class prototypes plus noise, a colour tint per client, shape {shape}",
        )


def _sequences(item: Any) -> list[list[str]]:
    """A LEAF reddit x / target_tokens entry as a list of token sequences."""
    if isinstance(item, dict):
        item = item.get("target_tokens")
    if isinstance(item, list) and item and all(isinstance(t, str) for t in item):
        return [item]
    if isinstance(item, list) and all(
        isinstance(s, list) and all(isinstance(t, str) for t in s) for s in item
    ):
        return item
    raise ValueError(f"not a token sequence or a list of them: {str(item)[:80]}")


def read_reddit(path: Path) -> tuple[dict[str, list[tuple[list[str], list[str]]]], list[str]]:
    """user -> [(input tokens, target tokens)] over every LEAF json in the zip, and the input
    tokens of the training files (paths with 'train'), from which the vocabulary is built."""
    users: dict[str, list[tuple[list[str], list[str]]]] = {}
    train_tokens: list[str] = []
    with zipfile.ZipFile(path) as z:
        names = sorted(n for n in z.namelist() if n.endswith(".json"))
        if not names:
            raise ValueError(f"{path}: no .json files")
        for name in names:
            try:
                data = json.loads(z.read(name))
                in_train = any("train" in part for part in PurePosixPath(name).parts)
                for u in data["users"]:
                    block = data["user_data"][u]
                    for xi, yi in zip(block["x"], block["y"], strict=True):
                        for xs, ys in zip(_sequences(xi), _sequences(yi), strict=True):
                            users.setdefault(u, []).append((xs, ys))
                            if in_train:
                                train_tokens.extend(xs)
            except (KeyError, TypeError, ValueError) as err:
                raise ValueError(f"{path}:{name}: not a LEAF reddit json ({err})") from None
    return users, train_tokens


def build_vocab(tokens: list[str], size: int) -> dict[str, int]:
    """The four special tokens, then the size - 4 most frequent others (ties: alphabetical)."""
    counts = Counter(t for t in tokens if t not in SPECIALS)
    common = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[: size - len(SPECIALS)]
    return {t: i for i, t in enumerate([*SPECIALS, *(t for t, _ in common)])}


def encode(seq: list[str], vocab: dict[str, int], length: int) -> list[int]:
    """Token ids, cut or padded with <PAD> to `length`; unknown tokens -> <UNK>."""
    ids = [vocab.get(t, 1) for t in seq[:length]]
    return ids + [0] * (length - len(ids))


class LeafReddit(CheckedSource):
    """LEAF Reddit: 10-token sequences, next-token targets, one client per user (817 users).

    A sample's x is (2, 10) float32: row 0 the input ids, row 1 the target ids (the input shifted
    by one). The release's loss and metric (spec §9.4) use every position whose target is not a
    special token (0-3): the `token_ce` objective reads them from x row 1 (the catalog's
    default for Reddit). y is the last target that is a word (not <PAD>/<UNK>/<BOS>/<EOS>): the
    label of the `last_word` option (one position per sequence, plain cross-entropy), and what
    the partition sees. LEAF's own train/test
    files are merged and each user is re-split by the partition (AAggFF kept LEAF's split). The
    zip lives on Google Drive (LEAF's README link); no checksum is published, fetch checks that
    it holds LEAF json files.
    """

    name = "leaf_reddit"
    input_shape = (2, SEQ_LEN)
    num_classes = VOCAB_SIZE
    params = {"max_clients": None, "seed": 0}
    files = [RemoteFile(REDDIT_ZIP, (GDRIVE + "1ISzp69JmaIJqBpQCX-JJ8-kVyUns8M7o",))]
    hand_hints = {
        REDDIT_ZIP: "LEAF's data/reddit README -> Google Drive link to reddit_subsampled.zip "
        "(https://github.com/TalwalkarLab/leaf/tree/master/data/reddit)"
    }

    def check_file(self, filename: str, path: Path) -> None:
        """A zip with at least one json file."""
        check_zip_members(path, [])
        with zipfile.ZipFile(path) as z:
            if not any(n.endswith(".json") for n in z.namelist()):
                raise ValueError("no .json file in the zip")

    def load(self, raw_dir: str | os.PathLike, **params: Any) -> ArrayDataset:
        """Every user's sequences as ids; groups = user (sorted names)."""
        params = self.check_params(params)
        path = self._path(raw_dir, REDDIT_ZIP)
        try:
            users, train_tokens = read_reddit(path)
        except zipfile.BadZipFile as err:
            raise ValueError(f"{path}: not a zip ({err})") from None
        if not train_tokens:  # no 'train' folder: count every file's tokens
            train_tokens = [t for seqs in users.values() for inp, _ in seqs for t in inp]
        vocab = build_vocab(train_tokens, VOCAB_SIZE)
        names = sorted(users)
        if params["max_clients"] is not None and params["max_clients"] < len(names):
            pick = np.random.default_rng(params["seed"]).choice(
                len(names), params["max_clients"], replace=False
            )
            names = [names[i] for i in np.sort(pick)]
        xs, gs = [], []
        for k, u in enumerate(names):
            for inp, tgt in users[u]:
                xs.append([encode(inp, vocab, SEQ_LEN), encode(tgt, vocab, SEQ_LEN)])
                gs.append(k)
        x = np.array(xs, dtype=np.float32)
        return natural_dataset(
            self.name,
            x,
            last_targets(x),
            np.array(gs, dtype=np.int64),
            self.num_classes,
            f"leaf_reddit: {path}; {len(names)} users, {len(xs)} sequences of {SEQ_LEN}; "
            f"vocabulary {len(vocab)} (specials {SPECIALS}); params={params}",
        )

    def standin(
        self, rng: np.random.Generator, *, n_train: int = 2000, n_test: int = 500, **params: Any
    ) -> ArrayDataset:
        """Sequences from a random first-order Markov chain over a Zipf vocabulary."""
        params = self.check_params(params)

        def draw(r: np.random.Generator, groups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            n = len(groups)
            words = 4 + np.minimum(r.zipf(1.3, (n, SEQ_LEN + 1)), VOCAB_SIZE - 5)
            words[:, 0] = 2  # <BOS>
            ends = r.integers(2, SEQ_LEN + 1, n)  # where <EOS> goes; <PAD> after it
            pos = np.arange(SEQ_LEN + 1)
            words[pos == ends[:, None]] = 3
            words[pos > ends[:, None]] = 0
            x = np.stack([words[:, :-1], words[:, 1:]], axis=1).astype(np.float32)
            return x, last_targets(x)

        return natural_standin(
            self.name,
            rng,
            n_train,
            REDDIT_STATS,
            params["max_clients"],
            draw,
            self.num_classes,
            "Zipf-distributed token ids after <BOS>, ended by <EOS>, padded with <PAD>",
        )


def last_targets(x: np.ndarray) -> np.ndarray:
    """Per sequence, the last target (x row 1) that is a word, not a special token (id >= 4);
    the first target when the sequence has none."""
    targets = x[:, 1].astype(np.int64)
    word = targets >= len(SPECIALS)
    last = np.where(word.any(axis=1), word.shape[1] - 1 - np.argmax(word[:, ::-1], axis=1), 0)
    return targets[np.arange(len(x)), last]
