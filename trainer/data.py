"""Datasets: digits, synthetic, dir:PATH and s3://bucket/prefix, with a seeded held-out split.

File format of ``dir:`` and ``s3://`` datasets (every file under the directory or prefix,
recursively, in sorted order, concatenated; for ``--model transformer`` the files are ``*.txt``
text shards instead, see trainer.text.read_shards):

* ``*.npz``: numpy archive with ``X`` (n samples, any feature shape, numeric; flattened) and
  ``y`` (n integer class labels 0..C-1).
* ``*.csv``: comma-separated numbers, one sample per row, the LAST column is the integer label.
  Lines starting with ``#`` are comments; a first row that is not numeric is a header and skipped.

All files must have the same number of features. ``python -m trainer.datasets export NAME DIR`` writes
scikit-learn's bundled wine, breast_cancer, iris or digits in this format; the dataset step
(roles/dataset) stages such a directory under an S3 prefix and onto the shared claim.
"""

import json
import math
import os
import tempfile
from dataclasses import dataclass

import numpy as np
import torch

from trainer import text
from trainer.config import DATA_SUFFIXES, data_files
from trainer.storage import parse_s3_uri, s3_client

MANIFEST = ".trainfleet-manifest.json"


class DataError(Exception):
    """The dataset cannot be loaded (empty prefix, bad file content...)."""


@dataclass
class Split:
    """Held-out split of one dataset, as tensors ready for training."""

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    num_classes: int

    @property
    def num_features(self):
        return int(self.x_train.shape[1])

    @property
    def image_side(self):
        """Side of a square image when the features form one, else None."""
        side = math.isqrt(self.num_features)
        return side if side * side == self.num_features else None


def load_digits_arrays():
    """scikit-learn's 8x8 digits (1797 samples, 64 features, 10 classes), shipped inside the package."""
    from sklearn.datasets import load_digits  # pylint: disable=import-outside-toplevel

    x, y = load_digits(return_X_y=True)
    return x.astype(np.float32), y.astype(np.int64)


def synthetic_arrays(samples, features, classes, seed):
    """Linearly separable-ish Gaussian data: labels are the argmax of a random linear teacher plus noise."""
    rng = np.random.default_rng(seed + 7919)
    x = rng.standard_normal((samples, features), dtype=np.float32)
    teacher = rng.standard_normal((features, classes)).astype(np.float32)
    logits = x @ teacher + 0.5 * rng.standard_normal((samples, classes)).astype(np.float32)
    return x, logits.argmax(axis=1).astype(np.int64)


def _load_csv(path):
    with open(path, encoding="utf-8") as handle:
        lines = [ln.strip() for ln in handle if ln.strip() and not ln.lstrip().startswith("#")]
    if lines:
        try:
            [float(v) for v in lines[0].split(",")]  # pylint: disable=expression-not-assigned
        except ValueError:
            lines = lines[1:]  # header row
    if not lines:
        raise DataError(f"{path}: no data rows")
    try:
        table = np.array([[float(v) for v in ln.split(",")] for ln in lines], dtype=np.float64)
    except ValueError as exc:
        raise DataError(f"{path}: expected comma-separated numbers with the label last: {exc}") from exc
    if table.ndim != 2 or table.shape[1] < 2:
        raise DataError(f"{path}: expected at least one feature column and a label column")
    return table[:, :-1].astype(np.float32), table[:, -1]


def _load_npz(path):
    with np.load(path, allow_pickle=False) as archive:
        if "X" not in archive or "y" not in archive:
            raise DataError(f"{path}: expected arrays 'X' and 'y' in the .npz file, found {sorted(archive.keys())}")
        x, y = archive["X"], archive["y"]
    if len(x) != len(y):
        raise DataError(f"{path}: X has {len(x)} samples but y has {len(y)}")
    return x.reshape(len(x), -1).astype(np.float32), y


def load_dir_arrays(path):
    """Concatenate every data file under ``path`` (see the module docstring for the format)."""
    files = data_files(path)
    if not files:
        raise DataError(f"{path}: no data files ({', '.join('*' + s for s in DATA_SUFFIXES)})")
    xs, ys = [], []
    for file in files:
        x, y = _load_npz(file) if file.endswith(".npz") else _load_csv(file)
        if xs and x.shape[1] != xs[0].shape[1]:
            raise DataError(f"{file}: {x.shape[1]} features, but {files[0]} has {xs[0].shape[1]}")
        y = np.asarray(y)
        if y.ndim != 1 or (y.size and (not np.all(np.mod(y, 1) == 0) or y.min() < 0)):
            raise DataError(f"{file}: labels must be non-negative integers")
        xs.append(x)
        ys.append(y.astype(np.int64))
    return np.concatenate(xs), np.concatenate(ys)


def s3_cache_path(uri, cache_dir):
    """Local directory where an s3:// dataset is cached."""
    loc = parse_s3_uri(uri)
    return os.path.join(os.path.abspath(cache_dir), "s3", loc.bucket, *[p for p in loc.prefix.split("/") if p])


def download_s3_dataset(uri, cache_dir, endpoint_url=None, client=None, suffixes=DATA_SUFFIXES):
    """Download the data files under an s3:// prefix into the cache (once; unchanged objects are skipped).

    Each file is written to a temp name and renamed, so a concurrent reader (another node sharing
    the cache volume) never sees half a file. Returns (local_dir, downloaded_count).
    """
    loc = parse_s3_uri(uri)
    client = client or s3_client(endpoint_url)
    local = s3_cache_path(uri, cache_dir)
    os.makedirs(local, exist_ok=True)
    manifest_path = os.path.join(local, MANIFEST)
    try:
        with open(manifest_path, encoding="utf-8") as handle:
            manifest = json.load(handle)
    except (FileNotFoundError, ValueError):
        manifest = {}
    base = loc.key("")
    keys = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=loc.bucket, Prefix=base):
        keys.extend(obj for obj in page.get("Contents", []) if obj["Key"].endswith(suffixes))
    if not keys:
        raise DataError(f"{uri} holds no data files ({', '.join('*' + s for s in suffixes)})")
    downloaded = 0
    for obj in keys:
        rel = obj["Key"][len(base):].lstrip("/")
        target = os.path.join(local, *rel.split("/"))
        if manifest.get(rel) == obj["ETag"] and os.path.exists(target):
            continue
        os.makedirs(os.path.dirname(target), exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".dl.", dir=os.path.dirname(target))
        os.close(fd)
        try:
            client.download_file(loc.bucket, obj["Key"], tmp)
            os.replace(tmp, target)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        manifest[rel] = obj["ETag"]
        downloaded += 1
    fd, tmp = tempfile.mkstemp(prefix=".manifest.", dir=local)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(manifest, handle)
    os.replace(tmp, manifest_path)
    return local, downloaded


def split_arrays(x, y, test_fraction, seed, normalize=True):
    """Seeded permutation split; features standardised with the training part's mean/std."""
    n = len(x)
    n_test = int(round(n * test_fraction))
    if n_test < 1 or n - n_test < 1:
        raise DataError(f"{n} samples cannot be split with test fraction {test_fraction}: both parts need >= 1 sample")
    perm = np.random.default_rng(seed).permutation(n)
    test_idx, train_idx = perm[:n_test], perm[n_test:]
    if x.dtype != np.int64:  # token ids (text_split) stay integers
        x = x.astype(np.float32)
    if normalize:
        mean = x[train_idx].mean(axis=0)
        std = x[train_idx].std(axis=0)
        std[std < 1e-6] = 1.0
        x = (x - mean) / std
    num_classes = int(y.max()) + 1
    return Split(
        x_train=torch.from_numpy(np.ascontiguousarray(x[train_idx])),
        y_train=torch.from_numpy(np.ascontiguousarray(y[train_idx])),
        x_test=torch.from_numpy(np.ascontiguousarray(x[test_idx])),
        y_test=torch.from_numpy(np.ascontiguousarray(y[test_idx])),
        num_classes=num_classes,
    )


def load_arrays(cfg, local_dir=None):
    """The raw (X, y) arrays of ``cfg.dataset``; ``local_dir`` is the downloaded cache of an s3:// dataset."""
    if cfg.dataset == "digits":
        return load_digits_arrays()
    if cfg.dataset == "synthetic":
        return synthetic_arrays(cfg.synthetic_samples, cfg.synthetic_features, cfg.synthetic_classes, cfg.seed)
    if cfg.dataset.startswith("dir:"):
        return load_dir_arrays(cfg.dataset[len("dir:"):])
    if local_dir is None:
        raise DataError(f"{cfg.dataset}: not downloaded yet")
    return load_dir_arrays(local_dir)


def text_split(tokens, seq_len, test_fraction, seed):
    """Next-token windows of ``tokens`` (trainer.text.windows), split like split_arrays; x and y are
    (windows, seq_len) token ids and num_classes is the vocabulary."""
    x, y = text.windows(tokens, seq_len)
    if len(x) < 2:
        raise DataError(f"{len(tokens)} tokens make {len(x)} window(s) of {seq_len + 1}: lower --seq-len or bring more text")
    split = split_arrays(x, y, test_fraction, seed, normalize=False)
    split.num_classes = text.VOCAB
    return split


def load_split(cfg, local_dir=None):
    if cfg.model == "transformer":
        if cfg.dataset == "corpus":
            tokens = text.tokenize(text.stdlib_docstrings(max_bytes=cfg.corpus_bytes))
        elif cfg.dataset == "synthetic":
            tokens = text.synthetic_tokens(cfg.synthetic_samples * (cfg.seq_len + 1), cfg.seed)
        else:  # dir: or s3:// (its downloaded copy): *.txt shards
            path = cfg.dataset[len("dir:"):] if cfg.dataset.startswith("dir:") else local_dir
            if path is None:
                raise DataError(f"{cfg.dataset}: not downloaded yet")
            tokens = text.tokenize(text.read_shards(data_files(path, cfg.data_suffixes), max_bytes=cfg.corpus_bytes))
        return text_split(tokens, cfg.seq_len, cfg.test_fraction, cfg.seed)
    x, y = load_arrays(cfg, local_dir)
    return split_arrays(x, y, cfg.test_fraction, cfg.seed, cfg.normalize)
