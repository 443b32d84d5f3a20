"""trainer.datasets: real small datasets (not digits) exported in the dir: format, and trained on."""

import json
import os

import numpy as np
import pytest
import torch

from trainer.config import ConfigError, TrainConfig
from trainer.data import load_dir_arrays, load_split
from trainer.datasets import ExportError, export, load, main
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
