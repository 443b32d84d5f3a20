"""TensorBoard event files (trainer.tbevents): read back by tensorboard's own reader and server.

tensorboard is pinned in requirements.txt for these tests only; the trainer image does not carry it.
"""

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

import boto3
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from tests.support.moto import free_port
from trainer import tbevents
from trainer.metrics import parse_epoch_line
from trainer.storage import LocalStorage
from trainer.tests.conftest import REPO_ROOT, base_env, single
from trainer.train import main

TAGS = sorted(tbevents.TAGS)
SYNTHETIC = ["--dataset", "synthetic", "--synthetic-samples", "600", "--synthetic-features", "8", "--synthetic-classes", "3",
             "--batch-size", "32", "--lr", "0.01"]
SERVER_TIMEOUT = 90


def _record(epoch, wall_time=None):
    return {"epoch": epoch, "loss": 1.0 / epoch, "test_loss": 1.1 / epoch, "test_acc": 0.5 + epoch / 100,
            "samples_per_s": 1000.0 + epoch, "epoch_time_s": 0.5, "samples": 480, "world_size": 1, "lr": 0.01,
            "wall_time": wall_time if wall_time is not None else 1_700_000_000.25 + epoch}


def _accumulator(path):
    acc = EventAccumulator(str(path), size_guidance={"scalars": 0})
    acc.Reload()
    return acc


def _steps(path, tag="train/loss"):
    return [event.step for event in _accumulator(path).Scalars(tag)]


def _event_files(directory):
    return sorted(name for name in os.listdir(directory) if "tfevents" in name)


def test_crc32c_known_answers():
    assert tbevents.crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value
    assert tbevents.crc32c(b"") == 0
    assert tbevents.crc32c(bytes(32)) == 0x8A9136AA  # RFC 3720 B.4, 32 bytes of zeros


def test_event_file_is_read_by_tensorboard_event_accumulator(tmp_path):
    history = [_record(e) for e in (1, 2, 3)]
    path = tmp_path / tbevents.events_name(history)
    path.write_bytes(tbevents.events_bytes(history))
    acc = _accumulator(path)
    assert sorted(acc.Tags()["scalars"]) == TAGS
    for tag, key in tbevents.TAGS.items():
        events = acc.Scalars(tag)
        assert [e.step for e in events] == [1, 2, 3]
        assert [e.value for e in events] == pytest.approx([r[key] for r in history], rel=1e-6)  # float32 on the wire
        assert [e.wall_time for e in events] == [r["wall_time"] for r in history]
    assert acc.file_version == 2.0  # "brain.Event:2": restarts are told by SessionLog, not by step order
    assert [len(r) for r in tbevents.read_records(path.read_bytes())][0] > 0
    assert path.name == "events.out.tfevents.1700000001.trainfleet"


def test_records_are_framed_and_checked():
    blob = tbevents.events_bytes([_record(1), _record(2)])
    assert len(tbevents.read_records(blob)) == 3  # header + one event per epoch
    with pytest.raises(ValueError, match="truncated"):
        tbevents.read_records(blob[:-3])
    damaged = bytearray(blob)
    damaged[20] ^= 0xFF
    with pytest.raises(ValueError, match="checksum"):
        tbevents.read_records(bytes(damaged))
    assert tbevents.events_bytes([]) == b""


def test_rebuild_drops_epochs_after_the_snapshot_and_keeps_the_prefix(tmp_path):
    """The attempt that died wrote epochs 1..3 but its snapshot covers 1..2: the resumed run's file
    holds 1, 2 (the same bytes as before), then its own 3: each step once."""
    store = LocalStorage(str(tmp_path))
    died = tbevents.EventLog(store)
    first = [_record(1), _record(2), _record(3)]
    died.start([])
    died.write(first[:1])
    died.write(first)
    name = tbevents.events_name(first)
    before = (tmp_path / name).read_bytes()
    (tmp_path / "events.out.tfevents.1600000000.trainfleet").write_bytes(b"an older run of ours")
    (tmp_path / "events.out.tfevents.1600000000.otherhost").write_bytes(b"not ours")

    resumed = tbevents.EventLog(store)
    history = first[:2]
    assert resumed.start(history) == str(tmp_path / name)
    assert before.startswith((tmp_path / name).read_bytes())
    assert _event_files(tmp_path) == ["events.out.tfevents.1600000000.otherhost", name]
    history.append(_record(3, wall_time=1_700_000_100.0))
    resumed.write(history)
    assert _steps(tmp_path / name) == [1, 2, 3]
    assert len((tmp_path / name).read_bytes()) == len(before)  # same record sizes: a reader's offset stays aligned
    assert _accumulator(tmp_path / name).Scalars("train/loss")[-1].wall_time == 1_700_000_100.0


def test_in_process_run_and_resume_write_each_epoch_once(tmp_path, capsys):
    out = tmp_path / "out"
    args = [*SYNTHETIC, "--epochs", "4", "--snapshot-dir", str(tmp_path / "snap"), "--output-dir", str(out)]
    assert main([*args, "--stop-after-epoch", "2"]) == 0
    capsys.readouterr()
    files = _event_files(out)
    assert len(files) == 1 and tbevents.is_events_name(files[0])
    assert _steps(out / files[0]) == [1, 2]
    first = (out / files[0]).read_bytes()

    assert main(args) == 0
    second = capsys.readouterr().out
    assert "tensorboard events rebuilt from the restored history (epochs 1..2)" in second
    assert _event_files(out) == files  # the same file, appended to
    assert (out / files[0]).read_bytes().startswith(first)
    acc = _accumulator(out / files[0])
    assert sorted(acc.Tags()["scalars"]) == TAGS
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    for tag, key in tbevents.TAGS.items():
        assert [e.step for e in acc.Scalars(tag)] == [1, 2, 3, 4]
        assert [e.value for e in acc.Scalars(tag)] == pytest.approx([m[key] for m in metrics], rel=1e-6)
    assert [e.value for e in acc.Scalars("train/learning_rate")] == pytest.approx([0.01] * 4)

    # a fresh run (no snapshots) into the same directory replaces the old run's file
    assert main([*SYNTHETIC, "--epochs", "1", "--output-dir", str(out)]) == 0
    capsys.readouterr()
    files = _event_files(out)
    assert len(files) == 1 and _steps(out / files[0]) == [1]


def test_a_failed_event_write_only_warns(tmp_path, capsys, monkeypatch):
    calls = []

    def failing(self, history):
        calls.append(len(history))
        if len(calls) == 1:
            raise OSError("disk full (test)")
        return None

    monkeypatch.setattr(tbevents.EventLog, "write", failing)
    assert main([*SYNTHETIC, "--epochs", "2", "--output-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "trainfleet-warning: writing the tensorboard event file after epoch 1 failed, training goes on: disk full" in out
    assert [parse_epoch_line(x)["epoch"] for x in out.splitlines() if x.startswith("trainfleet-epoch:")] == [1, 2]
    assert calls == [1, 2]


def _get(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, b""
    except OSError:
        return None, b""


@pytest.mark.integration
def test_tensorboard_serves_the_scalars_of_an_s3_run_against_moto(tmp_path, aws_env, moto_server):
    """A run writes to s3:// (moto), stops after epoch 2, resumes to 3; a real TensorBoard server reads the
    prefix of runs through S3_ENDPOINT (what the tensorboard step's pod gets) and its scalars API lists
    the run with the four tags and each step once."""
    s3 = boto3.client("s3", endpoint_url=moto_server, region_name="us-east-1")
    bucket = "trainfleet-tb-" + os.urandom(4).hex()
    s3.create_bucket(Bucket=bucket)
    args = [*SYNTHETIC, "--epochs", "3", "--snapshot-dir", f"s3://{bucket}/training/r1/snapshots",
            "--output-dir", f"s3://{bucket}/training/r1"]
    env = base_env(**aws_env)
    for extra in (["--stop-after-epoch", "2"], []):
        proc = single([*args, *extra], env=env)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="training/r1/")["Contents"] if "tfevents" in o["Key"]]
    assert len(keys) == 1
    local = tmp_path / os.path.basename(keys[0])
    local.write_bytes(s3.get_object(Bucket=bucket, Key=keys[0])["Body"].read())
    assert _steps(local) == [1, 2, 3]

    port = free_port()
    server_env = base_env(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_REGION="us-east-1",
                          S3_ENDPOINT=moto_server)
    cmd = [sys.executable, "-m", "tensorboard.main", "--logdir", f"s3://{bucket}/training", "--load_fast", "false",
           "--host", "127.0.0.1", "--port", str(port), "--reload_interval", "2"]
    with open(tmp_path / "tensorboard.log", "wb") as log:
        server = subprocess.Popen(cmd, cwd=REPO_ROOT, env=server_env, stdout=log, stderr=subprocess.STDOUT)  # pylint: disable=consider-using-with
        try:
            tags, deadline = {}, time.monotonic() + SERVER_TIMEOUT
            while time.monotonic() < deadline and server.poll() is None:
                status, body = _get(f"http://127.0.0.1:{port}/data/plugin/scalars/tags")
                tags = json.loads(body) if status == 200 else {}
                if sorted(tags.get("r1", {})) == TAGS:
                    break
                time.sleep(1)
            assert sorted(tags.get("r1", {})) == TAGS, (tmp_path / "tensorboard.log").read_text()[-3000:]
            status, page = _get(f"http://127.0.0.1:{port}/")
            assert status == 200 and b"<html" in page.lower()
            status, body = _get(f"http://127.0.0.1:{port}/data/plugin/scalars/scalars?run=r1&tag=test%2Faccuracy")
            assert status == 200
            assert [point[1] for point in json.loads(body)] == [1, 2, 3]  # [wall_time, step, value]
        finally:
            server.terminate()
            try:
                server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait(timeout=15)
