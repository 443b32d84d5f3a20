"""Argument validation: every bad argument is a ConfigError naming the flag, before any process group."""

import math
import os
import subprocess
import sys
import time

import pytest

from tests.support.moto import free_port
from trainer.config import ConfigError, TrainConfig, build_parser, parse_config
from trainer.tests.conftest import base_env, single


def test_defaults_are_valid(tmp_path):
    cfg = TrainConfig(output_dir=str(tmp_path / "out"))
    assert cfg.dataset == "digits" and cfg.epochs > 0 and cfg.batch_size > 0
    assert not cfg.uses_s3


def test_parse_config_reads_every_flag(tmp_path):
    cfg = parse_config(["--dataset", "synthetic", "--synthetic-samples", "100", "--synthetic-features", "16", "--synthetic-classes", "3",
                        "--hidden", "32,16", "--optimizer", "sgd", "--lr", "0.1", "--batch-size", "8", "--epochs", "2", "--seed", "5",
                        "--snapshot-dir", str(tmp_path / "snap"), "--snapshot-every", "2", "--output-dir", "s3://bucket-1/run/out",
                        "--backend", "gloo", "--no-normalize", "--stop-after-epoch", "1", "--storage-attempts", "3",
                        "--storage-backoff-s", "0.25", "--min-epoch-s", "2.5"])
    assert cfg.hidden == [32, 16] and cfg.optimizer == "sgd" and cfg.lr == 0.1 and cfg.seed == 5
    assert cfg.snapshot_every == 2 and cfg.stop_after_epoch == 1 and not cfg.normalize
    assert cfg.storage_attempts == 3 and cfg.storage_backoff_s == 0.25
    assert cfg.min_epoch_s == 2.5
    assert cfg.uses_s3


def test_parser_defaults_match_dataclass():
    args = build_parser().parse_args([])
    assert args.hidden == TrainConfig.__dataclass_fields__["hidden"].default_factory()  # pylint: disable=no-member
    assert args.epochs == TrainConfig.epochs and args.batch_size == TrainConfig.batch_size


@pytest.mark.parametrize("kwargs, flag", [
    ({"batch_size": 0}, "--batch-size"),
    ({"batch_size": -4}, "--batch-size"),
    ({"epochs": 0}, "--epochs"),
    ({"epochs": 10**12}, "--epochs"),
    ({"batch_size": 10**12}, "--batch-size"),
    ({"lr": 0.0}, "--lr"),
    ({"lr": -0.1}, "--lr"),
    ({"lr": math.nan}, "--lr"),
    ({"dataset": "imagenet"}, "--dataset"),
    ({"dataset": "dir:"}, "--dataset"),
    ({"dataset": "dir:/nonexistent/trainfleet"}, "--dataset"),
    ({"dataset": "s3://"}, "--dataset"),
    ({"dataset": "s3://Bad_Bucket/data"}, "--dataset"),
    ({"dataset": "s3:/bucket/data"}, "--dataset"),
    ({"output_dir": "s3://x/out"}, "--output-dir"),
    ({"snapshot_dir": "s3:///snap"}, "--snapshot-dir"),
    ({"snapshot_every": 0}, "--snapshot-every"),
    ({"storage_attempts": 0}, "--storage-attempts"),
    ({"storage_attempts": 21}, "--storage-attempts"),
    ({"storage_backoff_s": 0}, "--storage-backoff-s"),
    ({"storage_backoff_s": math.inf}, "--storage-backoff-s"),
    ({"test_fraction": 1.0}, "--test-fraction"),
    ({"test_fraction": 0}, "--test-fraction"),
    ({"hidden": [64, 0]}, "--hidden"),
    ({"hidden": []}, "--hidden"),
    ({"model": "rnn"}, "--model"),
    ({"model": "transformer"}, "--dataset"),
    ({"dataset": "corpus"}, "--dataset"),
    ({"model": "transformer", "dataset": "corpus", "model_size": "huge"}, "--model-size"),
    ({"model": "transformer", "dataset": "synthetic", "seq_len": 4}, "--seq-len"),
    ({"model": "transformer", "dataset": "corpus", "corpus_bytes": 0}, "--corpus-bytes"),
    ({"precision": "fp16"}, "--precision"),
    ({"precision": "tf32", "device": "cpu"}, "--precision"),
    ({"compile": "yes"}, "--compile"),
    ({"model": "cnn", "dataset": "synthetic", "synthetic_features": 10}, "--model"),
    ({"optimizer": "lbfgs"}, "--optimizer"),
    ({"synthetic_classes": 1}, "--synthetic-classes"),
    ({"stop_after_epoch": 11, "epochs": 10}, "--stop-after-epoch"),
    ({"backend": "mpi"}, "--backend"),
    ({"backend": "nccl", "device": "cpu"}, "--backend"),
    ({"timeout_s": 0}, "--timeout-s"),
    ({"s3_endpoint_url": "localhost:5050"}, "--s3-endpoint-url"),
    ({"momentum": 1.0}, "--momentum"),
    ({"seed": -1}, "--seed"),
    ({"min_epoch_s": -0.5}, "--min-epoch-s"),
    ({"min_epoch_s": math.nan}, "--min-epoch-s"),
    ({"min_epoch_s": 3601}, "--min-epoch-s"),
    ({"min_epoch_s": True}, "--min-epoch-s"),
    ({"stall_timeout_s": 5}, "--stall-timeout-s"),
    ({"stall_timeout_s": -1}, "--stall-timeout-s"),
    ({"stall_timeout_s": math.inf}, "--stall-timeout-s"),
    ({"stall_timeout_s": True}, "--stall-timeout-s"),
])
def test_bad_argument_names_the_flag(kwargs, flag, tmp_path):
    kwargs.setdefault("output_dir", str(tmp_path / "out"))
    with pytest.raises(ConfigError) as err:
        TrainConfig(**kwargs)
    assert err.value.argument == flag
    assert flag in str(err.value) and "expected" in str(err.value)


def test_dir_dataset_checks(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ConfigError, match="no data files"):
        TrainConfig(dataset=f"dir:{empty}", output_dir=str(tmp_path / "out"))
    a_file = tmp_path / "file.npz"
    a_file.write_bytes(b"x")
    with pytest.raises(ConfigError, match="existing directory"):
        TrainConfig(dataset=f"dir:{a_file}", output_dir=str(tmp_path / "out"))
    (empty / "part.csv").write_text("1,2,0\n")
    TrainConfig(dataset=f"dir:{empty}", output_dir=str(tmp_path / "out"))


def test_output_dir_must_be_writable_directory(tmp_path):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(ConfigError, match="--output-dir"):
        TrainConfig(output_dir=str(a_file))
    with pytest.raises(ConfigError, match="--snapshot-dir"):
        TrainConfig(output_dir=str(tmp_path / "out"), snapshot_dir=str(a_file / "below"))


def test_cli_bad_argument_exits_2_before_any_process_group(tmp_path):
    """With torchrun's variables set for a 2-process world, a bad argument must exit 2 at once.

    If the trainer started the process group first it would wait for the missing peer (timeout).
    """
    env = base_env(RANK=0, LOCAL_RANK=0, WORLD_SIZE=2, GROUP_RANK=0, MASTER_ADDR="127.0.0.1", MASTER_PORT=free_port())
    start = time.monotonic()
    proc = single(["--batch-size", "0", "--timeout-s", "300", "--output-dir", str(tmp_path / "out")], env=env, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "--batch-size" in proc.stderr and "positive integer" in proc.stderr
    assert "trainfleet-rank:" not in proc.stdout
    assert time.monotonic() - start < 100


@pytest.mark.parametrize("args, needle", [
    (["--dataset", "nope"], "--dataset"),
    (["--dataset", "s3://UPPER/x"], "bucket"),
    (["--epochs", "-1"], "--epochs"),
    (["--hidden", "a,b"], "--hidden"),
])
def test_cli_messages(args, needle, tmp_path):
    proc = single([*args, "--output-dir", str(tmp_path / "out")], timeout=120)
    assert proc.returncode == 2
    assert needle in proc.stderr


def test_python_m_trainer_is_the_cli():
    """`python -m trainer` runs the same CLI as `python -m trainer.train` (trainer/__main__.py)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    proc = subprocess.run([sys.executable, "-m", "trainer", "--epochs", "0"], cwd=root, capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 2, proc.stderr
    assert "argument --epochs" in proc.stderr
    helped = subprocess.run([sys.executable, "-m", "trainer", "--help"], cwd=root, capture_output=True,
                            text=True, timeout=60, check=False)
    assert helped.returncode == 0 and "--batch-size" in helped.stdout
