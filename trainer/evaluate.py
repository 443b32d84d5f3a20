"""Evaluate a run's model with the trainer's own code, and check it against what the run reported.

    python -m trainer.evaluate MODEL [--dataset D] [--s3-endpoint-url URL] [--data-cache-dir DIR] [--tolerance T]

MODEL is a run's ``model.pt`` (a path, ``s3://bucket/prefix/model.pt``, or the run's output directory
or prefix, which holds it). The file carries the model's shape, its weights, the run's configuration,
the test accuracy and loss of its last epoch and the world size that measured them. This rebuilds
the model (trainer.model), loads the run's dataset with the run's split (trainer.data: same seed,
same test fraction; ``--dataset`` reads it from elsewhere, for example the claim's copy of an S3
dataset) and evaluates the test split the way the run's last epoch did (trainer.loop.evaluate: the
same per-rank shards and batches, summed), on the CPU, in the run's precision (tf32 is a CUDA mode:
fp32 here). It prints one line

    trainfleet-evaluate: {"accuracy": ..., "loss": ..., "reported_accuracy": ..., "difference": ..., ...}

and exits 0 when the accuracy equals the reported one within ``--tolerance`` (default 1e-6), 1 when
it does not (the message names both numbers), 2 when the model or the data cannot be read.
"""

import argparse
import math
import os
import posixpath
import sys
import tempfile

import torch
from torch import nn

from trainer import emit
from trainer.config import ConfigError, TrainConfig
from trainer.data import DataError, download_s3_dataset, load_split
from trainer.dist import DistContext
from trainer.loop import evaluate, set_precision, targets_per_sample
from trainer.metrics import MODEL_NAME, error_line, evaluate_line
from trainer.model import build_model
from trainer.snapshot import from_bytes
from trainer.storage import StorageError, is_s3_uri, open_storage

EXIT_DIFFERS = 1
EXIT_UNREADABLE = 2
DEFAULT_TOLERANCE = 1e-6


class EvaluateError(Exception):
    """The model or its data cannot be read."""


def split_location(uri):
    """(directory or prefix, file name) of MODEL: model.pt itself, or the run's output location holding it."""
    path = uri[len("s3://"):] if is_s3_uri(uri) else uri
    if posixpath.basename(path.rstrip("/")) == MODEL_NAME:
        directory, name = posixpath.split(uri.rstrip("/"))
        return directory, name
    return uri.rstrip("/"), MODEL_NAME


def read_model(uri, endpoint_url=None):
    """The dict the run saved in model.pt."""
    directory, name = split_location(uri)
    try:
        data = open_storage(directory, endpoint_url).read_bytes(name)
    except (StorageError, OSError) as exc:
        raise EvaluateError(f"cannot read {directory}/{name}: {exc}") from exc
    if data is None:
        raise EvaluateError(f"cannot read {directory}/{name}: it does not exist")
    try:
        artifact = from_bytes(data)
    except Exception as exc:  # pylint: disable=broad-except  # torch.load raises many kinds
        raise EvaluateError(f"{directory}/{name} is not a model.pt the trainer wrote: {exc}") from exc
    missing = {"model_spec", "state_dict", "config", "test_acc"} - set(artifact if isinstance(artifact, dict) else {})
    if missing:
        raise EvaluateError(f"{directory}/{name} is not a model.pt the trainer wrote: it lacks {', '.join(sorted(missing))}")
    return artifact


def run_config(artifact, scratch, dataset=None, data_cache_dir=None, endpoint_url=None):
    """The run's TrainConfig, made to evaluate here: its data and split, the CPU, its outputs to ``scratch``
    (nothing is written there; the config wants a writable place)."""
    saved = dict(artifact["config"])
    saved.update(output_dir=scratch, snapshot_dir=None, device="cpu",
                 backend="auto", compile=False, precision="fp32" if saved.get("precision") == "tf32" else saved.get("precision", "fp32"))
    if dataset:
        saved["dataset"] = dataset
    if data_cache_dir:
        saved["data_cache_dir"] = data_cache_dir
    if endpoint_url:
        saved["s3_endpoint_url"] = endpoint_url
    known = set(TrainConfig.__dataclass_fields__)  # pylint: disable=no-member
    try:
        return TrainConfig(**{k: v for k, v in saved.items() if k in known})
    except ConfigError as exc:
        raise EvaluateError(f"the run's configuration cannot be used here: {exc}") from exc


def recorded_world_size(artifact):
    """The world size that measured the run's last test accuracy (1 for a model.pt from before it was recorded)."""
    return int(artifact.get("world_size") or 1)


def evaluate_model(artifact, cfg):
    """(loss, accuracy, samples) of the artifact's weights on cfg's test split, shard by shard as the
    run's world size evaluated it (each rank every world_size-th sample, the same batches)."""
    local = None
    if is_s3_uri(cfg.dataset):
        try:
            local, _count = download_s3_dataset(cfg.dataset, cfg.data_cache_dir, cfg.s3_endpoint_url, suffixes=cfg.data_suffixes)
        except (StorageError, DataError, OSError) as exc:
            raise EvaluateError(f"cannot download {cfg.dataset}: {exc}") from exc
    try:
        split = load_split(cfg, local)
    except (DataError, OSError, ValueError) as exc:
        raise EvaluateError(f"cannot load {cfg.dataset}: {exc}") from exc
    model = build_model(artifact["model_spec"])
    try:
        model.load_state_dict(artifact["state_dict"])
    except RuntimeError as exc:
        raise EvaluateError(f"the weights do not fit the model the file describes: {exc}") from exc
    autocast = set_precision(cfg.precision, torch.device("cpu"))
    world = recorded_world_size(artifact)
    loss_fn = nn.CrossEntropyLoss()
    total_loss = correct = count = 0.0
    for rank in range(world):
        ctx = DistContext(rank=rank, world_size=world)
        shard = len(range(rank, len(split.y_test), world)) * targets_per_sample(split.y_test)
        loss, accuracy = evaluate(model, split, ctx, cfg.batch_size, loss_fn, autocast)
        total_loss += loss * shard
        correct += round(accuracy * shard)
        count += shard
    return total_loss / count, correct / count, len(split.y_test)


def report(artifact, cfg, uri, tolerance=DEFAULT_TOLERANCE):
    """The evaluate line's content; ``agrees`` is the check against the run's own figure."""
    loss, accuracy, samples = evaluate_model(artifact, cfg)
    reported = float(artifact["test_acc"])
    difference = abs(accuracy - reported)
    result = {"model": uri, "dataset": cfg.dataset, "epoch": artifact.get("epoch"), "world_size": recorded_world_size(artifact),
              "samples": samples, "accuracy": accuracy, "loss": loss, "reported_accuracy": reported,
              "reported_loss": artifact.get("test_loss"), "difference": difference, "tolerance": tolerance,
              "agrees": difference <= tolerance}
    if artifact["model_spec"]["name"] == "transformer":
        result["perplexity"] = math.exp(min(loss, 700.0))
    return result


def build_parser():
    p = argparse.ArgumentParser(prog="python -m trainer.evaluate", description=__doc__.split("\n", 1)[0])
    p.add_argument("model", help="the run's model.pt, or its output directory or s3:// prefix")
    p.add_argument("--dataset", default=None, help="read the run's dataset from here instead (same split)")
    p.add_argument("--data-cache-dir", default=None, help="local cache for an s3:// dataset")
    p.add_argument("--s3-endpoint-url", default=None, help="S3 endpoint (default: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, AWS)")
    p.add_argument("--tolerance", type=float, default=DEFAULT_TOLERANCE,
                   help="largest accepted |accuracy - reported accuracy| (default: %(default)s)")
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    if not math.isfinite(args.tolerance) or args.tolerance < 0:
        emit(error_line(f"argument --tolerance: expected a number >= 0, got {args.tolerance!r}"), sys.stderr)
        return EXIT_UNREADABLE
    with tempfile.TemporaryDirectory(prefix="trainfleet-evaluate-") as scratch:
        try:
            artifact = read_model(args.model, args.s3_endpoint_url)
            cfg = run_config(artifact, os.path.join(scratch, "out"), args.dataset, args.data_cache_dir, args.s3_endpoint_url)
            result = report(artifact, cfg, args.model, args.tolerance)
        except EvaluateError as exc:
            emit(error_line(str(exc)), sys.stderr)
            return EXIT_UNREADABLE
    emit(evaluate_line(result))
    if not result["agrees"]:
        emit(error_line(f"{args.model}: evaluated accuracy {result['accuracy']!r} differs from the run's reported "
                        f"{result['reported_accuracy']!r} by {result['difference']:.3g} (tolerance {args.tolerance:g})"), sys.stderr)
        return EXIT_DIFFERS
    return 0


if __name__ == "__main__":
    sys.exit(main())
