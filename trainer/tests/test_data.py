"""Datasets and the held-out split."""

import numpy as np
import pytest
import torch

from trainer.config import TrainConfig
from trainer.data import DataError, load_arrays, load_dir_arrays, load_split, split_arrays, synthetic_arrays


def test_digits_loads_offline():
    x, y = load_arrays(TrainConfig(output_dir="/tmp/unused-trainfleet"))
    assert x.shape == (1797, 64) and x.dtype == np.float32
    assert sorted(set(y.tolist())) == list(range(10))


def test_split_is_deterministic_disjoint_and_seeded():
    x = np.arange(200, dtype=np.float32).reshape(100, 2)
    y = np.arange(100) % 4
    a = split_arrays(x, y, 0.2, seed=1, normalize=False)
    b = split_arrays(x, y, 0.2, seed=1, normalize=False)
    c = split_arrays(x, y, 0.2, seed=2, normalize=False)
    assert len(a.y_test) == 20 and len(a.y_train) == 80
    assert torch.equal(a.x_test, b.x_test) and not torch.equal(a.x_test, c.x_test)
    train_ids = set(a.x_train[:, 0].tolist())
    test_ids = set(a.x_test[:, 0].tolist())
    assert not train_ids & test_ids and len(train_ids | test_ids) == 100
    assert a.num_classes == 4 and a.num_features == 2


def test_split_normalises_with_training_statistics():
    x, y = synthetic_arrays(500, 9, 3, seed=0)
    split = split_arrays(x * 10 + 3, y, 0.2, seed=0)
    assert torch.allclose(split.x_train.mean(0), torch.zeros(9), atol=1e-4)
    assert torch.allclose(split.x_train.std(0, unbiased=False), torch.ones(9), atol=1e-3)
    assert split.image_side == 3


def test_split_too_small():
    with pytest.raises(DataError):
        split_arrays(np.zeros((1, 2), np.float32), np.zeros(1, np.int64), 0.5, 0)


def test_synthetic_is_seeded_and_sized():
    x1, y1 = synthetic_arrays(300, 12, 5, seed=3)
    x2, y2 = synthetic_arrays(300, 12, 5, seed=3)
    assert x1.shape == (300, 12) and np.array_equal(x1, x2) and np.array_equal(y1, y2)
    assert set(y1.tolist()) <= set(range(5)) and len(set(y1.tolist())) > 1
    cfg = TrainConfig(dataset="synthetic", synthetic_samples=300, synthetic_features=12, synthetic_classes=5, output_dir="/tmp/unused-trainfleet")
    assert load_split(cfg).num_features == 12


def test_dir_dataset_npz_and_csv(tmp_path):
    np.savez(tmp_path / "part-000.npz", X=np.ones((4, 2, 2), np.float32), y=np.array([0, 1, 2, 1]))
    sub = tmp_path / "more"
    sub.mkdir()
    (sub / "part-001.csv").write_text("# comment\nf1,f2,f3,f4,label\n1,2,3,4,2\n5,6,7,8,0\n")
    x, y = load_dir_arrays(str(tmp_path))
    assert x.shape == (6, 4)
    assert y.tolist() == [2, 0, 0, 1, 2, 1]  # files in sorted path order: more/part-001.csv, part-000.npz
    cfg = TrainConfig(dataset=f"dir:{tmp_path}", test_fraction=0.5, output_dir=str(tmp_path / "out"))
    assert load_split(cfg).num_classes == 3


def test_dir_dataset_errors(tmp_path):
    np.savez(tmp_path / "a.npz", X=np.ones((2, 3), np.float32), y=np.array([0, 1]))
    np.savez(tmp_path / "b.npz", X=np.ones((2, 4), np.float32), y=np.array([0, 1]))
    with pytest.raises(DataError, match="features"):
        load_dir_arrays(str(tmp_path))
    bad = tmp_path / "bad"
    bad.mkdir()
    np.savez(bad / "c.npz", data=np.ones(3))
    with pytest.raises(DataError, match="'X' and 'y'"):
        load_dir_arrays(str(bad))
    csv = tmp_path / "csv"
    csv.mkdir()
    (csv / "d.csv").write_text("1,2,0.5\n")
    with pytest.raises(DataError, match="integers"):
        load_dir_arrays(str(csv))


def test_batches_cover_indices_once_with_their_sizes():
    from trainer.loop import batches  # pylint: disable=import-outside-toplevel

    x = torch.arange(10).float().unsqueeze(1)
    y = torch.arange(10)
    got = list(batches(x, y, [9, 3, 4, 0, 1], 2, torch.device("cpu")))
    assert [b for _xb, yb, _n in got for b in yb.tolist()] == [9, 3, 4, 0, 1]
    assert [n for _xb, _yb, n in got] == [2, 2, 1]
    assert all(xb[:, 0].long().tolist() == yb.tolist() for xb, yb, _n in got)
