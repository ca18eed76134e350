"""AAggFF's sources (Berka, MQP, ISIC 2019, CelebA, Reddit, Speech Commands, Heart): loaders on
tiny files written here in the real formats, fetch against a local HTTP server, stand-ins."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import wave
import zipfile
from pathlib import Path

import numpy as np
import pytest

from fedbench.data import SOURCES
from fedbench.data.base import MANIFEST, FetchError, RemoteFile
from fedbench.data.wordpiece import basic_tokens, encode_pair, wordpiece

# ---------------------------------------------------------------------------------------------
# tiny files in the real formats


def _zip(entries: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in entries.items():
            z.writestr(name, data)
    return buf.getvalue()


def _jpeg(rgb: tuple[int, int, int], size: tuple[int, int]) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", size, rgb).save(buf, format="JPEG", quality=95)
    return buf.getvalue()


def _wav(samples: list[int]) -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(np.array(samples, dtype="<i2").tobytes())
    return buf.getvalue()


BERKA_TABLES = {
    "district.asc": (
        '"A1";"A2";"A3";"A4";"A5";"A6";"A7";"A8";"A9";"A10";"A11";"A12";"A13";"A14";"A15";"A16"\n'
        '1;"Hl.m. Praha";"Prague";1204953;0;0;0;1;1;100.0;12541;0.29;0.43;167;85677;99107\n'
        '2;"Benesov";"central Bohemia";88884;80;26;6;2;5;46.7;8507;1.67;1.85;132;2159;2674\n'
        '3;"Liberec";"north Bohemia";159617;29;19;8;1;6;72.8;9198;1.9;2.31;123;?;4432\n'
    ),
    "account.asc": (
        '"account_id";"district_id";"frequency";"date"\n'
        '10;1;"POPLATEK MESICNE";930101\n'
        '20;2;"POPLATEK TYDNE";930201\n'
        '30;1;"POPLATEK PO OBRATU";930301\n'
        '40;3;"POPLATEK MESICNE";930101\n'
        '50;2;"POPLATEK MESICNE";930101\n'
    ),
    "loan.asc": (
        '"loan_id";"account_id";"date";"amount";"duration";"payments";"status"\n'
        '1;10;930111;1000;12;83.33;"A"\n'
        '2;20;930301;2000;24;83.33;"B"\n'
        '3;30;940301;3000;36;83.33;"D"\n'
        '4;40;930201;4000;12;333.33;"C"\n'
        '5;50;930102;5000;12;416.67;"C"\n'
    ),
    "order.asc": (
        '"order_id";"account_id";"bank_to";"account_to";"amount";"k_symbol"\n'
        '1;10;"AB";1;100.0;"SIPO"\n'
        '2;10;"CD";2;300.0;"UVER"\n'
        '3;20;"EF";3;50.0;""\n'
        '4;30;"GH";4;70.0;"SIPO"\n'
        '5;40;"IJ";5;10.0;"SIPO"\n'
    ),
    "trans.asc": (
        '"trans_id";"account_id";"date";"type";"operation";"amount";"balance";"k_symbol";"bank";'
        '"account"\n'
        '1;10;930101;"PRIJEM";"VKLAD";500.0;500.0;"";"";\n'
        '2;10;930105;"VYDAJ";"VYBER";100.0;400.0;"";"";\n'
        '3;20;930201;"PRIJEM";"VKLAD";900.0;900.0;"";"";\n'
        '4;30;930301;"PRIJEM";"VKLAD";300.0;300.0;"";"";\n'
        '5;30;930302;"PRIJEM";"VKLAD";600.0;900.0;"";"";\n'
        '6;30;930303;"PRIJEM";"VKLAD";900.0;1800.0;"";"";\n'
        '7;40;930101;"PRIJEM";"VKLAD";10.0;10.0;"";"";\n'
        '8;50;930101;"PRIJEM";"VKLAD";1000.0;1000.0;"";"";\n'
    ),
}


def berka_files() -> dict[str, bytes]:
    return {
        "data_berka.zip": _zip({f"data_berka/{k}": v.encode() for k, v in BERKA_TABLES.items()})
    }


HEART_ROWS = {
    "processed.cleveland.data": (
        "63.0,1.0,1.0,145.0,233.0,1.0,2.0,150.0,0.0,2.3,3.0,0.0,6.0,0\n"
        "67.0,1.0,4.0,160.0,?,0.0,0.0,108.0,1.0,1.5,2.0,?,3.0,2\n"
    ),
    "processed.hungarian.data": "28,1,2,130,132,0,2,185,0,0,?,?,?,0\n",
    "processed.switzerland.data": "32,1,1,95,0,?,0,127,0,.7,1,?,?,1\n",
    "processed.va.data": "63,1,4,140,260,0,1,112,1,3,2,?,?,2\n",
}


def heart_files() -> dict[str, bytes]:
    return {k: v.encode() for k, v in HEART_ROWS.items()}


MQP_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "what", "is", "a", "fever", "##s", "are", "?"]


def mqp_files() -> dict[str, bytes]:
    csv_text = (
        "1,What is a fever?,Fevers are what?,1\n"
        '10,"What is a cough, then?",Is a fever a cough?,0\n'
        "2,What are fevers?,What is a fever?,1\n"
    )
    return {"mqp.csv": csv_text.encode(), "vocab.txt": ("\n".join(MQP_VOCAB) + "\n").encode()}


def speech_files() -> dict[str, bytes]:
    clips = {
        "./yes/aaa_nohash_0.wav": _wav([16384] * 8000),
        "./yes/aaa_nohash_1.wav": _wav([-16384] * 16000),
        "./no/aaa_nohash_2.wav": _wav([8192] * 100),
        "./no/bbb_nohash_0.wav": _wav([1] * 100),  # bbb: one training clip, dropped
        "./no/ccc_nohash_0.wav": _wav([2] * 100),  # in testing_list: not training
        "./no/ccc_nohash_1.wav": _wav([3] * 100),  # in validation_list
        "./_background_noise_/white.wav": _wav([5] * 100),
    }
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in [
            *clips.items(),
            ("./testing_list.txt", b"no/ccc_nohash_0.wav\n"),
            ("./validation_list.txt", b"no/ccc_nohash_1.wav\n"),
        ]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return {"speech_commands_v0.02.tar.gz": buf.getvalue()}


def celeba_files() -> dict[str, bytes]:
    images = [f"{i:06d}.jpg" for i in range(1, 8)]
    celeb = [5, 5, 5, 5, 5, 9, 9]  # celebrity 9 has fewer than 5 images
    smile = [1, -1, 1, 1, -1, 1, 1]
    identity = "".join(f"{im} {c}\n" for im, c in zip(images, celeb, strict=True))
    attrs = "7\n5_o_Clock_Shadow Smiling Young \n" + "".join(
        f"{im}  -1  {s}  1\n" for im, s in zip(images, smile, strict=True)
    )
    colours = [(10 * i, 200 - 10 * i, 128) for i in range(7)]
    zipped = _zip(
        {
            f"img_align_celeba/{im}": _jpeg(c, (12, 14))
            for im, c in zip(images, colours, strict=True)
        }
    )
    return {
        "identity_CelebA.txt": identity.encode(),
        "list_attr_celeba.txt": attrs.encode(),
        "img_align_celeba.zip": zipped,
    }


def _leaf(users: dict[str, list[list[str]]]) -> bytes:
    data = {
        "users": list(users),
        "num_samples": [len(v) for v in users.values()],
        "user_data": {
            u: {"x": [[s[:-1]] for s in seqs], "y": [{"target_tokens": [s[1:]]} for s in seqs]}
            for u, seqs in users.items()
        },
    }
    return json.dumps(data).encode()


def reddit_files() -> dict[str, bytes]:
    a = ["<BOS>", "i", "like", "cats", "<EOS>", "<PAD>"]
    b = ["<BOS>", "i", "like", "birds", "<EOS>", "<PAD>"]
    t = ["<BOS>", "cats", "like", "dogs", "<EOS>", "<PAD>"]
    return {
        "reddit_subsampled.zip": _zip(
            {
                "reddit/train/train_data.json": _leaf({"u1": [a], "u2": [b]}),
                "reddit/test/test_data.json": _leaf({"u1": [t]}),
            }
        )
    }


ISIC_CLASSES = "MEL,NV,BCC,AK,BKL,DF,VASC,SCC,UNK"


def isic_files() -> dict[str, bytes]:
    onehot = {"NV": "0,1,0,0,0,0,0,0,0", "MEL": "1,0,0,0,0,0,0,0,0", "SCC": "0,0,0,0,0,0,0,1,0"}
    onehot["BKL"] = "0,0,0,0,1,0,0,0,0"
    rows = [("ISIC_1", "NV"), ("ISIC_2", "MEL"), ("ISIC_3", "SCC"), ("ISIC_4", "NV")]
    rows += [("ISIC_5", "BKL"), ("ISIC_6", "NV"), ("ISIC_0029564", "NV")]
    truth = f"image,{ISIC_CLASSES}\n" + "".join(f"{i},{onehot[c]}\n" for i, c in rows)
    meta = (
        "image,age_approx,anatom_site_general,lesion_id,sex\n"
        "ISIC_1,55,anterior torso,BCN_0001,male\n"
        "ISIC_2,30,,HAM_0002,female\n"
        "ISIC_3,40,head/neck,MSK4_0003,male\n"
        "ISIC_4,40,head/neck,,male\n"
        "ISIC_5,70,back,HAM_0005,female\n"
        "ISIC_6,70,back,MSK1_0006,female\n"
        "ISIC_0029564,70,back,BCN_0007,female\n"
    )
    ham = (
        "lesion_id,image_id,dx,dx_type,age,sex,localization,dataset\n"
        "HAM_0002,ISIC_2,mel,histo,30,female,back,vidir_modern\n"
        "HAM_0005,ISIC_5,bkl,histo,70,female,back,rosendahl\n"
    )
    colours = {f"ISIC_{i}": (40 * i, 100, 250 - 40 * i) for i in range(1, 7)}
    colours["ISIC_0029564"] = (0, 0, 0)
    images = _zip(
        {f"ISIC_2019_Training_Input/{k}.jpg": _jpeg(c, (16, 12)) for k, c in colours.items()}
    )
    return {
        "ISIC_2019_Training_Input.zip": images,
        "ISIC_2019_Training_GroundTruth.csv": truth.encode(),
        "ISIC_2019_Training_Metadata.csv": meta.encode(),
        "HAM10000_metadata.csv": ham.encode(),
    }


def mqp_fetch_files() -> dict[str, bytes]:
    """The CSV, and a vocabulary of BERT-uncased's size with its special-token ids."""
    tokens = ["[PAD]", *(f"[unused{i}]" for i in range(99)), "[UNK]", "[CLS]", "[SEP]"]
    tokens += [f"tok{i}" for i in range(30522 - len(tokens))]
    return {**mqp_files(), "vocab.txt": ("\n".join(tokens) + "\n").encode()}


FAKES = {
    "berka": berka_files,
    "heart": heart_files,
    "mqp": mqp_fetch_files,
    "speechcommands": speech_files,
    "leaf_celeba": celeba_files,
    "leaf_reddit": reddit_files,
    "isic2019": isic_files,
}


def _write(folder: Path, files: dict[str, bytes]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return folder


# ---------------------------------------------------------------------------------------------
# loaders


def test_berka_features_by_hand(tmp_path):
    raw = _write(tmp_path, berka_files())
    ds = SOURCES["berka"].load(raw, standardise="none", district_mean="thesis")
    assert ds.x_train.shape == (4, 15) and not ds.standin  # loan 4 is in north Bohemia
    row = {int(r[0]): (r, y, g) for r, y, g in zip(ds.x_train, ds.y_train, ds.groups, strict=True)}
    x1, y1, g1 = row[1000]
    # amount duration payments date_between inhabitants salary entrepreneurs unemployment crime
    # order num_trans trans_amount balance freq_1 freq_2
    want = [1000, 12, 83.33, 10, 1204953, 12541, 167, 0.36, 92392, 200, 2, 300, 450, 0, 0]
    np.testing.assert_allclose(x1, want, rtol=1e-6)
    assert (y1, g1) == (0, 0)  # status A; regions sorted: Prague 0, central Bohemia 1
    x2, y2, g2 = row[2000]
    assert (y2, g2) == (1, 1) and x2[3] == 28 and (x2[13], x2[14]) == (1, 0)  # February 1993
    x3, y3, _ = row[3000]
    assert y3 == 1 and x3[3] == 365 and (x3[13], x3[14]) == (0, 1) and x3[9] == 70
    assert row[5000][0][9] == 0.0  # no permanent order
    # the release's pandas mean skips A15 (it holds a '?'): crime = A16 only
    code = SOURCES["berka"].load(raw, standardise="none", district_mean="code")
    assert 99107 in code.x_train[:, 8] and 92392 not in code.x_train[:, 8]
    scaled = SOURCES["berka"].load(raw)
    prague = scaled.x_train[scaled.groups == 0, :13]
    np.testing.assert_allclose(prague.mean(axis=0), 0, atol=1e-5)


def test_heart_parsing_by_hand(tmp_path):
    raw = _write(tmp_path, heart_files())
    ds = SOURCES["heart"].load(raw, standardise="none")
    assert ds.x_train.shape == (5, 15) and ds.groups.tolist() == [0, 0, 1, 2, 3]
    assert ds.y_train.tolist() == [0, 1, 0, 1, 1]
    # age sex trestbps chol fbs thalach exang oldpeak cp1..cp4 restecg0..2; chol '?' -> 233
    want = [67, 1, 160, 233, 0, 108, 1, 1.5, 0, 0, 0, 1, 1, 0, 0]
    np.testing.assert_allclose(ds.x_train[1], want, rtol=1e-6)
    assert ds.x_train[3, 4] == 0  # fbs missing in Switzerland's only row: column mean undefined
    dropped = SOURCES["heart"].load(raw, standardise="none", missing="drop")
    assert dropped.groups.tolist() == [0, 1, 3]  # ca / thal '?' do not count: those are dropped


def test_wordpiece_by_hand():
    vocab = {t: i for i, t in enumerate(MQP_VOCAB)}
    assert basic_tokens("Café, FEVERS?") == ["cafe", ",", "fevers", "?"]
    assert wordpiece("fevers", vocab) == ["fever", "##s"]
    assert wordpiece("coughs", vocab) == ["[UNK]"]
    ids, mask = encode_pair("What is a fever?", "Fevers are what?", vocab, 16)
    assert ids == [2, 4, 5, 6, 7, 10, 3, 7, 8, 9, 4, 10, 3, 0, 0, 0]
    assert mask == [1] * 13 + [0] * 3
    # longest first, the second text on a tie: 5 + 5 tokens cut to 3 + 2
    ids, mask = encode_pair("What is a fever?", "Fevers are what?", vocab, 8)
    assert ids == [2, 4, 5, 6, 3, 7, 8, 3] and mask == [1] * 8


def test_mqp_loader(tmp_path):
    raw = _write(tmp_path, mqp_files())
    ds = SOURCES["mqp"].load(raw, max_length=16)
    assert ds.x_train.shape == (3, 2, 16) and ds.y_train.tolist() == [1, 0, 1]
    assert ds.groups.tolist() == [0, 2, 1]  # doctors "1", "10", "2" in numeric order
    assert ds.x_train[0, 0].tolist() == [2, 4, 5, 6, 7, 10, 3, 7, 8, 9, 4, 10, 3, 0, 0, 0]
    assert ds.x_train[1, 0, :6].tolist() == [2, 4, 5, 6, 1, 1]  # "cough" "," -> [UNK]


def test_speechcommands_loader(tmp_path):
    raw = _write(tmp_path, speech_files())
    ds = SOURCES["speechcommands"].load(raw, min_samples=2)
    assert ds.x_train.shape == (3, 1, 16000) and ds.groups.tolist() == [0, 0, 0]
    assert ds.y_train.tolist() == [0, 1, 1]  # no/aaa_2, yes/aaa_0, yes/aaa_1; words sorted
    x = ds.x_train[:, 0]
    assert np.all(x[0, :100] == 0.25) and np.all(x[0, 100:] == 0)
    assert np.all(x[1, :8000] == 0.5) and np.all(x[1, 8000:] == 0)
    assert np.all(x[2] == -0.5)
    assert len(SOURCES["speechcommands"].load(raw, min_samples=1).y_train) == 4  # bbb kept


def test_celeba_loader(tmp_path):
    raw = _write(tmp_path, celeba_files())
    ds = SOURCES["leaf_celeba"].load(raw, source="original", side=4)  # hub: test_hub_celeba.py
    assert ds.x_train.shape == (5, 3, 4, 4) and ds.groups.tolist() == [0] * 5
    assert ds.y_train.tolist() == [1, 0, 1, 1, 0]
    want = np.array([10 * 2, 200 - 10 * 2, 128]) / 255  # third image, a flat colour
    np.testing.assert_allclose(ds.x_train[2].mean(axis=(1, 2)), want, atol=3 / 255)


def test_reddit_loader(tmp_path):
    raw = _write(tmp_path, reddit_files())
    ds = SOURCES["leaf_reddit"].load(raw)
    assert ds.x_train.shape == (3, 2, 10) and ds.num_classes == 10000
    # vocabulary: specials, then training tokens by count, ties alphabetical: i like birds cats
    seqs = {
        tuple(x[0].astype(int)): (tuple(x[1].astype(int)), int(y), int(g))
        for x, y, g in zip(ds.x_train, ds.y_train, ds.groups, strict=True)
    }
    pad = (0,) * 5
    assert seqs[(2, 4, 5, 7, 3) + pad] == ((4, 5, 7, 3, 0) + pad, 7, 0)
    assert seqs[(2, 4, 5, 6, 3) + pad] == ((4, 5, 6, 3, 0) + pad, 6, 1)
    # test-only "dogs" is <UNK>; the last word target is then "like"
    assert seqs[(2, 7, 5, 1, 3) + pad] == ((7, 5, 1, 3, 0) + pad, 5, 0)


def test_isic_loader(tmp_path):
    raw = _write(tmp_path, isic_files())
    ds = SOURCES["isic2019"].load(raw, resize=8, side=6, normalise="none")
    # ISIC_4 has no lesion id, ISIC_6 is from MSK1 (only MSK4 is a client), ISIC_0029564 is
    # left out by the release
    assert ds.x_train.shape == (4, 3, 6, 6)
    # BCN 0, HAM_vidir_modern 2, MSK 4, HAM_rosendahl 3; classes MEL NV BCC AK BKL DF VASC SCC
    assert ds.groups.tolist() == [0, 2, 4, 3] and ds.y_train.tolist() == [1, 0, 7, 4]
    want = np.array([40 * 3, 100, 250 - 40 * 3]) / 255
    np.testing.assert_allclose(ds.x_train[2].mean(axis=(1, 2)), want, atol=3 / 255)
    imagenet = SOURCES["isic2019"].load(raw, resize=8, side=6)
    np.testing.assert_allclose(
        imagenet.x_train[2, 0].mean(), (ds.x_train[2, 0].mean() - 0.485) / 0.229, atol=1e-4
    )


# ---------------------------------------------------------------------------------------------
# fetch: good files accepted, a corrupted one rejected (deleted, hand placement explained)


def _route(src) -> dict[str, str]:
    """The params that fetch a `source: hub | original` source's original files, else none."""
    return {"source": "original"} if hasattr(src, "original_files") else {}


def _serve(src, monkeypatch, base: str, root: Path, files: dict[str, bytes], sums: bool):
    _write(root, files)
    attr = "original_files" if _route(src) else "files"
    remote = [
        RemoteFile(
            rf.filename,
            (base + rf.filename,),
            sha256=hashlib.sha256(files[rf.filename]).hexdigest() if sums and rf.sha256 else None,
        )
        for rf in getattr(src, attr)
    ]
    monkeypatch.setattr(src, attr, remote)


@pytest.mark.parametrize("name", sorted(FAKES))
def test_fetch_good_then_corrupted(name, http_root, tmp_path, monkeypatch):
    base, root = http_root
    src = SOURCES[name]
    files = FAKES[name]()
    _serve(src, monkeypatch, base, root, files, sums=True)
    manifest = src.fetch(tmp_path / "raw", **_route(src))
    assert set(manifest) == set(files)
    checked = {e["verified_by"] for e in manifest.values()}
    assert checked == ({"archive"} if name == "speechcommands" else {"format"})
    victim = sorted(files)[0]
    (root / victim).write_bytes(b"<html><body>quota exceeded</body></html>")
    with pytest.raises(FetchError) as err:
        src.fetch(tmp_path / "raw2", **_route(src))
    assert victim in str(err.value) and str(tmp_path / "raw2") in str(err.value)
    assert not (tmp_path / "raw2" / victim).exists()
    assert not (tmp_path / "raw2" / MANIFEST).exists()


def test_isic_hand_placed_file_is_explained(http_root, tmp_path, monkeypatch):
    base, root = http_root
    src = SOURCES["isic2019"]
    files = isic_files()
    _serve(src, monkeypatch, base, root, files, sums=False)
    monkeypatch.setattr(src, "files", [*src.files[:3], RemoteFile("HAM10000_metadata.csv", ())])
    with pytest.raises(FetchError) as err:
        src.fetch(tmp_path / "raw")
    msg = str(err.value)
    assert "HAM10000_metadata.csv" in msg and "10.7910/DVN/DBW86T" in msg
    assert str(tmp_path / "raw") in msg and "CC BY-NC" in msg
    (tmp_path / "raw" / "HAM10000_metadata.csv").write_bytes(files["HAM10000_metadata.csv"])
    assert src.fetch(tmp_path / "raw")["HAM10000_metadata.csv"]["verified_by"] == "format"


# ---------------------------------------------------------------------------------------------
# stand-ins: the real shapes, classes and client counts (Table 3.4), scaled by n_train


@pytest.mark.parametrize(
    "name, shape, classes, clients, params",
    [
        ("berka", (15,), 2, 7, {}),
        ("heart", (15,), 2, 4, {}),
        ("mqp", (2, 200), 2, 11, {}),
        ("isic2019", (3, 16, 16), 8, 6, {"resize": 16, "side": 16}),
        ("leaf_celeba", (3, 84, 84), 2, 40, {}),
        ("leaf_reddit", (2, 10), 10000, 40, {}),
        ("speechcommands", (1, 16000), 35, 40, {}),
    ],
)
def test_standins(name, shape, classes, clients, params):
    src = SOURCES[name]
    ds = src.standin(np.random.default_rng(0), n_train=200, n_test=10, **params)
    assert ds.standin and "NOT real data" in ds.provenance
    assert ds.x_train.shape == (200, *shape) and ds.x_train.dtype == np.float32
    assert ds.num_classes == classes and 0 <= ds.y_train.min() and ds.y_train.max() < classes
    assert len(np.unique(ds.groups)) == clients and len(ds.x_test) == 0
    if name != "isic2019":
        assert src.input_shape == shape


def test_standin_client_counts_reach_the_papers():
    big = SOURCES["leaf_reddit"].standin(np.random.default_rng(1), n_train=817 * 5)
    assert len(np.unique(big.groups)) == 817
    capped = SOURCES["leaf_reddit"].standin(np.random.default_rng(1), n_train=4085, max_clients=9)
    assert len(np.unique(capped.groups)) == 9
    sizes = np.bincount(SOURCES["berka"].standin(np.random.default_rng(2), n_train=621).groups)
    assert sizes.sum() == 621 and sizes.min() >= 5 and sizes.std() > 0
