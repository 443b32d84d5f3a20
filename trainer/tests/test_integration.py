"""Real runs: torchrun with 2 gloo processes on CPU, resume after a stop, and an s3:// round trip
against a real moto server. No mocks here; every subprocess has a timeout."""

import io
import os

import boto3
import numpy as np
import pytest

from trainer.data import load_digits_arrays
from trainer.metrics import parse_epoch_line, parse_result_line, read_metrics_jsonl
from trainer.model import build_model
from trainer.snapshot import from_bytes, snapshot_name
from trainer.tests.conftest import base_env, single, torchrun

pytestmark = pytest.mark.integration

DIGITS = ["--dataset", "digits", "--model", "mlp", "--hidden", "128,64", "--optimizer", "adam", "--lr", "0.002",
          "--batch-size", "32", "--seed", "0", "--timeout-s", "120"]


def _lines(proc, prefix):
    return [line for line in proc.stdout.splitlines() if line.startswith(prefix)]


def _epochs(proc):
    return [parse_epoch_line(line)["epoch"] for line in _lines(proc, "trainfleet-epoch:")]


def _result(proc):
    results = _lines(proc, "trainfleet-result:")
    assert len(results) == 1, proc.stdout + proc.stderr
    return parse_result_line(results[0])


def _ok(proc):
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-4000:]}"


def test_torchrun_two_processes_reach_90_percent_on_digits(tmp_path):
    proc = torchrun([*DIGITS, "--epochs", "6", "--output-dir", str(tmp_path / "out"), "--snapshot-dir", str(tmp_path / "snap")])
    _ok(proc)
    ranks = _lines(proc, "trainfleet-rank:")
    assert sorted(line.split()[1] for line in ranks) == ["rank=0", "rank=1"]
    assert all("world_size=2" in line and "group_rank=0" in line for line in ranks)
    assert _epochs(proc) == [1, 2, 3, 4, 5, 6]  # rank 0 only: each epoch line exactly once
    result = _result(proc)
    assert result["world_size"] == 2 and result["epochs"] == 6
    assert result["final_accuracy"] >= 0.90, result
    assert set(result) >= {"final_accuracy", "final_loss", "epochs", "model_uri", "metrics_uri", "plot_uri", "world_size", "duration_s"}
    records = read_metrics_jsonl((tmp_path / "out" / "metrics.jsonl").read_bytes())
    assert [r["epoch"] for r in records] == [1, 2, 3, 4, 5, 6]
    assert records[-1]["test_acc"] == result["final_accuracy"]
    assert (tmp_path / "out" / "plot.png").read_bytes().startswith(b"\x89PNG")
    # the saved model rebuilds and really is that accurate on the held-out split
    saved = from_bytes((tmp_path / "out" / "model.pt").read_bytes())
    model = build_model(saved["model_spec"])
    model.load_state_dict(saved["state_dict"])
    assert saved["epoch"] == 6
    assert (tmp_path / "snap" / "latest").read_text() == snapshot_name(6)


def test_torchrun_resume_continues_at_next_epoch(tmp_path):
    args = [*DIGITS, "--epochs", "5", "--output-dir", str(tmp_path / "out"), "--snapshot-dir", str(tmp_path / "snap")]
    first = torchrun([*args, "--stop-after-epoch", "2"])
    _ok(first)
    assert _epochs(first) == [1, 2]
    assert _lines(first, "trainfleet-stopped:") == ["trainfleet-stopped: epoch=2 reason=--stop-after-epoch"]
    assert not _lines(first, "trainfleet-result:")
    assert (tmp_path / "snap" / "latest").read_text() == snapshot_name(2)

    second = torchrun(args)
    _ok(second)
    assert _lines(second, "trainfleet-resume:")[0].startswith("trainfleet-resume: epoch=2 next_epoch=3")
    assert _epochs(second) == [3, 4, 5]  # continues at k+1, never repeats 1..2
    records = read_metrics_jsonl((tmp_path / "out" / "metrics.jsonl").read_bytes())
    assert [r["epoch"] for r in records] == [1, 2, 3, 4, 5]
    result = _result(second)
    assert result["epochs"] == 5 and result["resumed_from_epoch"] == 2


def test_s3_round_trip_against_moto(tmp_path, aws_env, moto_server):
    """Data in from s3:// (two .npz shards + a .csv), snapshots and model out to s3://, resume from s3:// with a new world size."""
    s3 = boto3.client("s3", endpoint_url=moto_server, region_name="us-east-1")
    bucket = "trainfleet-test-" + os.urandom(4).hex()
    s3.create_bucket(Bucket=bucket)
    x, y = load_digits_arrays()
    for i, (lo, hi) in enumerate([(0, 900), (900, 1700)]):
        buf = io.BytesIO()
        np.savez(buf, X=x[lo:hi], y=y[lo:hi])
        s3.put_object(Bucket=bucket, Key=f"data/digits/part-{i:03d}.npz", Body=buf.getvalue())
    csv = "".join(",".join(str(int(v)) for v in row) + f",{label}\n" for row, label in zip(x[1700:], y[1700:]))
    s3.put_object(Bucket=bucket, Key="data/digits/extra/tail.csv", Body=csv.encode())
    s3.put_object(Bucket=bucket, Key="data/digits/README.txt", Body=b"ignored: not a data file")

    cache = tmp_path / "cache"
    args = [*DIGITS, "--epochs", "4", "--dataset", f"s3://{bucket}/data/digits", "--data-cache-dir", str(cache),
            "--snapshot-dir", f"s3://{bucket}/runs/r1/snapshots", "--output-dir", f"s3://{bucket}/runs/r1/out"]
    env = base_env(**aws_env)

    # 1) a plain single process (world size 1) trains 2 epochs and stops
    first = single([*args, "--stop-after-epoch", "2"], env=env)
    _ok(first)
    assert _epochs(first) == [1, 2]
    pointer = s3.get_object(Bucket=bucket, Key="runs/r1/snapshots/latest")["Body"].read().decode()
    assert pointer == snapshot_name(2)
    cached = sorted(str(p.relative_to(cache)) for p in cache.rglob("*") if p.is_file() and not p.name.startswith("."))
    assert cached == [f"s3/{bucket}/data/digits/extra/tail.csv", f"s3/{bucket}/data/digits/part-000.npz",
                      f"s3/{bucket}/data/digits/part-001.npz"]

    # 2) torchrun with 2 processes resumes from the s3:// snapshot and finishes
    second = torchrun(args, env=env)
    _ok(second)
    assert _epochs(second) == [3, 4]
    assert "(0 files downloaded)" in second.stdout  # the node's cache was reused
    result = _result(second)
    assert result["model_uri"] == f"s3://{bucket}/runs/r1/out/model.pt"
    assert result["metrics_uri"] == f"s3://{bucket}/runs/r1/out/metrics.jsonl"
    assert result["plot_uri"] == f"s3://{bucket}/runs/r1/out/plot.png"
    assert result["world_size"] == 2 and result["final_accuracy"] >= 0.85

    keys = {o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="runs/r1/")["Contents"]}
    assert {"runs/r1/out/model.pt", "runs/r1/out/metrics.jsonl", "runs/r1/out/plot.png", "runs/r1/snapshots/latest",
            f"runs/r1/snapshots/{snapshot_name(4)}"} <= keys
    assert s3.get_object(Bucket=bucket, Key="runs/r1/snapshots/latest")["Body"].read().decode() == snapshot_name(4)
    records = read_metrics_jsonl(s3.get_object(Bucket=bucket, Key="runs/r1/out/metrics.jsonl")["Body"].read())
    assert [r["epoch"] for r in records] == [1, 2, 3, 4]
    saved = from_bytes(s3.get_object(Bucket=bucket, Key="runs/r1/out/model.pt")["Body"].read())
    build_model(saved["model_spec"]).load_state_dict(saved["state_dict"])


def test_s3_empty_prefix_is_a_clear_error(tmp_path, aws_env, moto_server):
    s3 = boto3.client("s3", endpoint_url=moto_server, region_name="us-east-1")
    bucket = "trainfleet-empty-" + os.urandom(4).hex()
    s3.create_bucket(Bucket=bucket)
    proc = single(["--dataset", f"s3://{bucket}/nothing", "--data-cache-dir", str(tmp_path / "c"), "--output-dir", str(tmp_path / "o")],
                  env=base_env(**aws_env), timeout=120)
    assert proc.returncode == 1
    assert f"s3://{bucket}/nothing holds no data files" in proc.stderr
