"""trainer.datasets: real small datasets (not digits) exported in the dir: format, and trained on."""

import json
import os

import numpy as np
import pytest
import torch

from trainer import text
from trainer.config import TEXT_SUFFIXES, ConfigError, TrainConfig, data_files
from trainer.data import download_s3_dataset, load_dir_arrays, load_split
from trainer.datasets import ExportError, export, export_corpus, load, main
from trainer.model import build_model, model_spec
from trainer.tests.conftest import base_env, single, torchrun


@pytest.mark.parametrize("name,fmt,samples,features,classes", [
    ("breast_cancer", "csv", 569, 30, 2),
    ("wine", "npz", 178, 13, 3),
    ("iris", "csv", 150, 4, 3),
])
def test_export_is_read_back_exactly(tmp_path, name, fmt, samples, features, classes):
    files = export(name, str(tmp_path), fmt, parts=3)
    assert [os.path.basename(f) for f in files] == [f"part-00{i}.{fmt}" for i in range(3)] + ["dataset.json"]
    x, y = load_dir_arrays(str(tmp_path))
    want_x, want_y, _features, _classes = load(name)
    assert x.shape == (samples, features) and np.array_equal(x, want_x) and np.array_equal(y, want_y)
    meta = json.loads((tmp_path / "dataset.json").read_text())
    assert (meta["samples"], meta["features"], meta["classes"]) == (samples, features, classes)
    split = load_split(TrainConfig(dataset=f"dir:{tmp_path}", output_dir=str(tmp_path / "out")))
    assert split.num_features == features and split.num_classes == classes


def test_export_twice_gives_the_same_bytes(tmp_path):
    for fmt in ("csv", "npz"):
        first = {os.path.basename(f): open(f, "rb").read() for f in export("wine", str(tmp_path / "a" / fmt), fmt)}
        second = {os.path.basename(f): open(f, "rb").read() for f in export("wine", str(tmp_path / "b" / fmt), fmt)}
        assert first == second


def test_export_refuses_bad_arguments(tmp_path, capsys):
    with pytest.raises(ExportError, match="unknown dataset"):
        export("mnist", str(tmp_path))
    with pytest.raises(ExportError, match="unknown format"):
        export("wine", str(tmp_path), "parquet")
    with pytest.raises(ExportError, match="--parts"):
        export("wine", str(tmp_path), "csv", parts=0)
    assert main(["export", "nope", str(tmp_path)]) == 2
    assert "unknown dataset 'nope'" in capsys.readouterr().err


@pytest.mark.parametrize("features,classes", [(30, 2), (13, 3), (4, 3), (64, 10), (7, 5)])
def test_model_input_and_output_follow_the_data(features, classes):
    for name in ("mlp",):
        model = build_model(model_spec(name, features, classes, [16]))
        assert model(torch.zeros(5, features)).shape == (5, classes)
    with pytest.raises(ValueError, match="square images"):
        build_model(model_spec("cnn", 30, 2, [16], image_side=None))


def test_trains_on_exported_breast_cancer(tmp_path):
    """The proof of the issue's "real small dataset that is not digits": a couple of epochs, accuracy reported."""
    data = tmp_path / "breast_cancer"
    export("breast_cancer", str(data), "csv", parts=2)
    proc = single(["--dataset", f"dir:{data}", "--epochs", "3", "--output-dir", str(tmp_path / "out")], env=base_env())
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "features=30 classes=2" in proc.stdout
    result = json.loads(proc.stdout.split("trainfleet-result: ", 1)[1].splitlines()[0])
    print(f"\nbreast_cancer (dir:, 3 epochs, 1 process): accuracy {result['final_accuracy']:.3f}")
    assert result["final_accuracy"] >= 0.85


def test_trains_on_exported_wine_with_two_processes(tmp_path):
    data = tmp_path / "wine"
    export("wine", str(data), "npz", parts=2)
    proc = torchrun(["--dataset", f"dir:{data}", "--epochs", "6", "--backend", "gloo", "--output-dir", str(tmp_path / "out")],
                    env=base_env())
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    result = json.loads(proc.stdout.split("trainfleet-result: ", 1)[1].splitlines()[0])
    print(f"\nwine (dir:, 6 epochs, 2 processes): accuracy {result['final_accuracy']:.3f}")
    assert result["world_size"] == 2 and result["final_accuracy"] >= 0.85


def test_cnn_on_non_square_features_is_refused_clearly(tmp_path):
    data = tmp_path / "breast_cancer"
    export("breast_cancer", str(data), "csv", parts=1)
    proc = single(["--dataset", f"dir:{data}", "--model", "cnn", "--epochs", "1", "--output-dir", str(tmp_path / "out")],
                  env=base_env())
    assert proc.returncode != 0
    assert "cnn needs square images" in proc.stdout + proc.stderr
    # Checked when the data is known; the config itself cannot know a dir:'s feature count.
    assert TrainConfig(dataset=f"dir:{data}", model="cnn", output_dir=str(tmp_path / "o")).model == "cnn"
    with pytest.raises(ConfigError):
        TrainConfig(dataset="synthetic", synthetic_features=30, model="cnn", output_dir=str(tmp_path / "o"))


def test_corpus_exports_as_text_shards_that_read_back_byte_for_byte(tmp_path, capsys):
    """The built-in corpus as *.txt shards (what the dataset step stages): read back in order they are
    the corpus itself, so --dataset dir:/s3:// trains on exactly the windows --dataset corpus does."""
    files = export_corpus(str(tmp_path / "a"), parts=3, max_bytes=65536)
    assert [os.path.basename(f) for f in files] == ["part-000.txt", "part-001.txt", "part-002.txt", "dataset.json"]
    corpus = text.stdlib_docstrings(max_bytes=65536)
    shards = data_files(str(tmp_path / "a"), TEXT_SUFFIXES)
    assert text.read_shards(shards, max_bytes=65536) == corpus
    assert all(os.path.getsize(f) > 1000 for f in shards)
    meta = json.loads((tmp_path / "a" / "dataset.json").read_text())
    assert meta["license"] == "PSF License 2.0" and meta["bytes"] == len(corpus) and meta["format"] == "txt"
    again = export_corpus(str(tmp_path / "b"), parts=3, max_bytes=65536)
    assert [open(f, "rb").read() for f in files] == [open(f, "rb").read() for f in again]
    common = {"model": "transformer", "corpus_bytes": 65536, "seq_len": 32, "output_dir": str(tmp_path / "out")}
    from_dir = load_split(TrainConfig(dataset=f"dir:{tmp_path / 'a'}", **common))
    built_in = load_split(TrainConfig(dataset="corpus", **common))
    assert torch.equal(from_dir.x_train, built_in.x_train) and torch.equal(from_dir.y_test, built_in.y_test)
    assert from_dir.num_classes == text.VOCAB
    assert main(["export", "corpus", str(tmp_path / "c"), "--parts", "2", "--bytes", "4096"]) == 0
    assert "--model transformer --dataset=dir:" in capsys.readouterr().out
    for parts, size in ((0, 4096), (65, 4096), (2, 10), (True, 4096)):
        with pytest.raises(ExportError, match="--parts|--bytes"):
            export_corpus(str(tmp_path / "d"), parts=parts, max_bytes=size)


def test_text_and_array_datasets_are_told_apart(tmp_path):
    """The transformer reads *.txt shards of a dir: dataset, the MLP *.csv/*.npz: each refuses the
    other's directory, naming what it looked for; read_shards stops at max_bytes."""
    arrays, shards = tmp_path / "arrays", tmp_path / "shards"
    export("iris", str(arrays), "csv", parts=1)
    shards.mkdir()
    (shards / "b.txt").write_bytes(b"second shard")
    (shards / "a.txt").write_bytes(b"first shard")
    out = str(tmp_path / "out")
    with pytest.raises(ConfigError, match=r"no data files \(\*\.txt for --model transformer\)"):
        TrainConfig(model="transformer", dataset=f"dir:{arrays}", output_dir=out)
    with pytest.raises(ConfigError, match=r"no data files \(\*\.npz, \*\.csv\)"):
        TrainConfig(dataset=f"dir:{shards}", output_dir=out)
    TrainConfig(model="transformer", dataset=f"dir:{shards}", output_dir=out)
    TrainConfig(model="transformer", dataset="s3://bucket/datasets/corpus/", output_dir=out)
    with pytest.raises(ConfigError, match="dir:PATH or s3://"):
        TrainConfig(model="transformer", dataset="digits", output_dir=out)
    files = data_files(str(shards), TEXT_SUFFIXES)
    assert text.read_shards(files) == b"first shard\n\nsecond shard"
    assert text.read_shards(files, max_bytes=8) == b"first sh"


class _Objects:
    """Just enough of a boto3 S3 client for download_s3_dataset: a listing and downloads."""

    def __init__(self, objects):
        self.objects = objects
        self.downloaded = []

    def get_paginator(self, _name):
        return self

    def paginate(self, Bucket, Prefix):  # pylint: disable=invalid-name
        return [{"Contents": [{"Key": k, "ETag": '"%d"' % len(v)} for k, v in sorted(self.objects.items())
                              if k.startswith(Prefix) and Bucket == "data"]}]

    def download_file(self, _bucket, key, target):
        self.downloaded.append(key)
        with open(target, "wb") as handle:
            handle.write(self.objects[key])


def test_s3_text_dataset_downloads_only_its_shards(tmp_path):
    client = _Objects({"p/corpus/part-000.txt": b"alpha", "p/corpus/part-001.txt": b"beta",
                       "p/corpus/dataset.json": b"{}", "p/corpus/old.csv": b"1,0\n"})
    local, count = download_s3_dataset("s3://data/p/corpus/", str(tmp_path), client=client, suffixes=TEXT_SUFFIXES)
    assert count == 2 and sorted(client.downloaded) == ["p/corpus/part-000.txt", "p/corpus/part-001.txt"]
    assert text.read_shards(data_files(local, TEXT_SUFFIXES)) == b"alpha\n\nbeta"
    assert download_s3_dataset("s3://data/p/corpus/", str(tmp_path), client=client, suffixes=TEXT_SUFFIXES)[1] == 0
    with pytest.raises(Exception, match=r"no data files \(\*\.txt\)"):
        download_s3_dataset("s3://data/p/none/", str(tmp_path), client=client, suffixes=TEXT_SUFFIXES)
