"""Snapshots (atomic, pointer, pruning, resume logic), metrics lines, metrics.jsonl and the plot."""

import datetime
import json
import re

import pytest
import torch

from trainer import metrics, snapshot
from trainer.metrics import epoch_line, metrics_jsonl, parse_epoch_line, parse_result_line, plot_png, read_metrics_jsonl, result_line
from trainer.model import build_model, model_spec
from trainer.snapshot import LATEST, find_latest, load_snapshot, make_snapshot, save_snapshot, snapshot_name
from trainer.storage import LocalStorage
from trainer.train import main

EPOCH_RE = re.compile(r"^trainfleet-epoch: epoch=\d+ loss=[0-9.]+ test_acc=[0-9.]+ samples_per_s=[0-9.]+ "
                      r"time=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def _model_and_optimizer():
    spec = model_spec("mlp", 4, 3, [8])
    model = build_model(spec)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    model(torch.randn(2, 4)).sum().backward()
    optimizer.step()
    return spec, model, optimizer


def _record(epoch, acc=0.5):
    return {"epoch": epoch, "loss": 1.0 / epoch, "test_loss": 1.2 / epoch, "test_acc": acc, "samples_per_s": 1000.0}


def test_snapshot_round_trip_and_pointer(tmp_path):
    store = LocalStorage(str(tmp_path))
    spec, model, optimizer = _model_and_optimizer()
    assert find_latest(store) is None
    for epoch in (1, 2, 3):
        save_snapshot(store, make_snapshot(epoch, model, optimizer, [_record(e) for e in range(1, epoch + 1)], spec, 2), keep=2)
    assert store.read_bytes(LATEST) == snapshot_name(3).encode()
    assert store.list("snapshot-") == [snapshot_name(2), snapshot_name(3)]  # pruned to 2
    snap = load_snapshot(store, find_latest(store))
    assert snap["epoch"] == 3 and [m["epoch"] for m in snap["metrics"]] == [1, 2, 3]
    fresh = build_model(snap["model_spec"])
    fresh.load_state_dict(snap["model"])
    for a, b in zip(fresh.parameters(), model.parameters()):
        assert torch.equal(a, b)
    fresh_opt = torch.optim.Adam(fresh.parameters(), lr=0.01)
    fresh_opt.load_state_dict(snap["optimizer"])
    assert fresh_opt.state_dict()["state"].keys() == optimizer.state_dict()["state"].keys()


def test_latest_pointer_missing_or_dangling_falls_back_to_highest(tmp_path):
    store = LocalStorage(str(tmp_path))
    spec, model, optimizer = _model_and_optimizer()
    for epoch in (4, 5):
        save_snapshot(store, make_snapshot(epoch, model, optimizer, [], spec, 1), keep=5)
    store.delete(LATEST)
    assert find_latest(store) == snapshot_name(5)
    store.write_bytes(LATEST, snapshot_name(9).encode())
    assert find_latest(store) == snapshot_name(5)


def test_crash_while_writing_snapshot_keeps_previous(tmp_path, monkeypatch):
    """The pointer only moves after the snapshot is complete: a failed write leaves epoch 1 in charge."""
    store = LocalStorage(str(tmp_path))
    spec, model, optimizer = _model_and_optimizer()
    save_snapshot(store, make_snapshot(1, model, optimizer, [], spec, 1))
    real_write = store.write_bytes

    def failing_write(name, data):
        if name.startswith("snapshot-"):
            raise OSError("node preempted mid-write")
        return real_write(name, data)

    monkeypatch.setattr(store, "write_bytes", failing_write)
    with pytest.raises(OSError):
        save_snapshot(store, make_snapshot(2, model, optimizer, [], spec, 1))
    monkeypatch.undo()
    assert find_latest(store) == snapshot_name(1)
    assert load_snapshot(LocalStorage(str(tmp_path)), snapshot_name(1))["epoch"] == 1
    assert not [n for n in __import__("os").listdir(tmp_path) if n.endswith(".tmp")]


def test_torch_load_is_weights_only_when_supported():
    kwargs = snapshot.torch_load_kwargs()
    assert kwargs in ({}, {"weights_only": True}, {"weights_only": False})
    if int(torch.__version__.split(".")[0]) >= 2:
        assert kwargs == {"weights_only": True}


def test_epoch_and_result_lines():
    line = epoch_line({"epoch": 3, "loss": 0.25, "test_acc": 0.9, "samples_per_s": 1234.56, "test_loss": 0.3})
    assert EPOCH_RE.match(line), line
    parsed = parse_epoch_line(line)
    assert parsed == {"epoch": 3, "loss": 0.25, "test_acc": 0.9, "samples_per_s": 1234.6, "time": parsed["time"]}
    # lines of trainers from before time= still parse
    assert parse_epoch_line("trainfleet-epoch: epoch=2 loss=0.5 test_acc=0.8 samples_per_s=10.0") == {
        "epoch": 2, "loss": 0.5, "test_acc": 0.8, "samples_per_s": 10.0}
    result = {"final_accuracy": 0.95, "final_loss": 0.1, "epochs": 3, "model_uri": "s3://b/m.pt", "metrics_uri": "x",
              "plot_uri": "y", "world_size": 2, "duration_s": 1.5}
    text = result_line(result)
    assert text.startswith("trainfleet-result: {") and "\n" not in text
    assert parse_result_line(text) == result


def test_metrics_jsonl_and_plot(tmp_path):
    records = [_record(2, 0.7), _record(1, 0.6)]
    data = metrics_jsonl(records)
    assert [r["epoch"] for r in read_metrics_jsonl(data)] == [1, 2]
    assert all(json.loads(line) for line in data.decode().splitlines())
    png = plot_png(records)
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 1000
    store = LocalStorage(str(tmp_path))
    store.write_bytes(metrics.PLOT_NAME, png)
    assert (tmp_path / "plot.png").stat().st_size == len(png)


def _metrics_epochs(path):
    return [r["epoch"] for r in read_metrics_jsonl(path.read_bytes())]


def test_resume_in_process_continues_at_next_epoch(tmp_path, capsys):
    """Single process (no torchrun): stop after epoch 2, restart, continue at 3, never repeat an epoch."""
    args = ["--dataset", "synthetic", "--synthetic-samples", "600", "--synthetic-features", "8", "--synthetic-classes", "3",
            "--epochs", "4", "--batch-size", "32", "--snapshot-dir", str(tmp_path / "snap"), "--output-dir", str(tmp_path / "out")]
    assert main([*args, "--stop-after-epoch", "2"]) == 0
    first = capsys.readouterr().out
    assert [parse_epoch_line(x)["epoch"] for x in first.splitlines() if x.startswith("trainfleet-epoch:")] == [1, 2]
    assert "trainfleet-stopped: epoch=2" in first and "trainfleet-result:" not in first
    assert _metrics_epochs(tmp_path / "out" / "metrics.jsonl") == [1, 2]
    assert main(args) == 0
    second = capsys.readouterr().out
    assert "trainfleet-resume: epoch=2 next_epoch=3" in second
    assert [parse_epoch_line(x)["epoch"] for x in second.splitlines() if x.startswith("trainfleet-epoch:")] == [3, 4]
    assert _metrics_epochs(tmp_path / "out" / "metrics.jsonl") == [1, 2, 3, 4]
    result = parse_result_line([x for x in second.splitlines() if x.startswith("trainfleet-result:")][0])
    assert result["epochs"] == 4 and result["resumed_from_epoch"] == 2
    # a third start after completion trains nothing and reports the same result
    assert main(args) == 0
    third = capsys.readouterr().out
    assert "trainfleet-epoch:" not in third and parse_result_line(third.splitlines()[-1])["epochs"] == 4


def test_seed_makes_runs_reproducible(tmp_path, capsys):
    def run(out):
        assert main(["--dataset", "synthetic", "--synthetic-samples", "400", "--synthetic-features", "8", "--epochs", "2",
                     "--seed", "7", "--output-dir", str(out)]) == 0
        capsys.readouterr()
        return [(r["loss"], r["test_acc"]) for r in read_metrics_jsonl((out / "metrics.jsonl").read_bytes())]

    assert run(tmp_path / "a") == run(tmp_path / "b")


def test_model_file_rebuilds(tmp_path, capsys):
    assert main(["--epochs", "1", "--model", "cnn", "--hidden", "32", "--output-dir", str(tmp_path)]) == 0
    result = parse_result_line([x for x in capsys.readouterr().out.splitlines() if x.startswith("trainfleet-result:")][0])
    saved = snapshot.from_bytes((tmp_path / "model.pt").read_bytes())
    model = build_model(saved["model_spec"])
    model.load_state_dict(saved["state_dict"])
    assert model(torch.zeros(2, 64)).shape == (2, 10)
    assert result["model_uri"] == str(tmp_path / "model.pt") and result["plot_uri"] == str(tmp_path / "plot.png")


def test_resume_takes_the_newest_snapshot_even_when_latest_lags(tmp_path):
    """A process that died between writing snapshot 3 and moving ``latest`` must not train epoch 3 again."""
    store = LocalStorage(str(tmp_path))
    spec, model, optimizer = _model_and_optimizer()
    save_snapshot(store, make_snapshot(2, model, optimizer, [], spec, 1), keep=5)
    store.write_bytes(snapshot_name(3), snapshot.to_bytes(make_snapshot(3, model, optimizer, [], spec, 1)))  # pointer not moved
    assert store.read_bytes(LATEST) == snapshot_name(2).encode()
    assert find_latest(store) == snapshot_name(3)
    name, snap = snapshot.load_latest(store)
    assert name == snapshot_name(3) and snap["epoch"] == 3


def test_a_damaged_snapshot_is_reported_and_the_previous_one_used(tmp_path):
    store = LocalStorage(str(tmp_path))
    spec, model, optimizer = _model_and_optimizer()
    save_snapshot(store, make_snapshot(1, model, optimizer, [], spec, 1), keep=5)
    good = snapshot.to_bytes(make_snapshot(2, model, optimizer, [], spec, 1))
    store.write_bytes(snapshot_name(2), good[: len(good) // 2])  # damaged by hand: half a file
    warnings = []
    name, snap = snapshot.load_latest(store, warn=warnings.append)
    assert name == snapshot_name(1) and snap["epoch"] == 1
    assert len(warnings) == 1 and snapshot_name(2) in warnings[0] and "trying an older one" in warnings[0]
    assert snapshot.load_latest(LocalStorage(str(tmp_path / "empty"))) == (None, None)


def test_latest_never_moves_to_a_snapshot_that_is_not_whole(tmp_path, monkeypatch):
    store = LocalStorage(str(tmp_path))
    spec, model, optimizer = _model_and_optimizer()
    save_snapshot(store, make_snapshot(1, model, optimizer, [], spec, 1))
    monkeypatch.setattr(store, "size", lambda name: 10)  # the stored object is shorter than what was sent
    with pytest.raises(snapshot.StorageError, match="latest not moved"):
        save_snapshot(store, make_snapshot(2, model, optimizer, [], spec, 1))
    assert store.read_bytes(LATEST) == snapshot_name(1).encode()


def test_a_failed_prune_only_warns(tmp_path, monkeypatch):
    store = LocalStorage(str(tmp_path))
    spec, model, optimizer = _model_and_optimizer()
    for epoch in (1, 2):
        save_snapshot(store, make_snapshot(epoch, model, optimizer, [], spec, 1), keep=1)

    def refuse(name):
        raise OSError("read-only")

    monkeypatch.setattr(store, "delete", refuse)
    warnings = []
    save_snapshot(store, make_snapshot(3, model, optimizer, [], spec, 1), keep=1, warn=warnings.append)
    assert store.read_bytes(LATEST) == snapshot_name(3).encode()
    assert len(warnings) == 1 and "pruning old snapshots" in warnings[0] and "read-only" in warnings[0]


def test_line_formats_round_trip():
    line = metrics.resume_line(4, "s3://b/snap/snapshot-epoch-00004.pt", 2)
    assert line == "trainfleet-resume: epoch=4 next_epoch=5 snapshot=s3://b/snap/snapshot-epoch-00004.pt restarts=2"
    assert metrics.parse_resume_line(line) == {"epoch": 4, "next_epoch": 5, "snapshot": "s3://b/snap/snapshot-epoch-00004.pt", "restarts": 2}
    assert metrics.parse_resume_line("trainfleet-resume: epoch=2 next_epoch=3 snapshot=/s/x.pt")["restarts"] is None
    assert metrics.stopped_line(2, "--stop-after-epoch") == "trainfleet-stopped: epoch=2 reason=--stop-after-epoch"
    assert metrics.snapshot_line(3, "/s/x") == "trainfleet-info: snapshot epoch=3 uri=/s/x"
    failed = metrics.snapshot_failed_line(3, OSError("line one\n  line two"))
    assert failed == "trainfleet-warning: snapshot epoch=3 failed, training goes on (the next epoch tries again): line one line two"
    retry = metrics.storage_retry_line("put", "s3://b/k", 1, 8, 0.25, ConnectionResetError("reset"))
    assert retry == "trainfleet-warning: storage put s3://b/k attempt 1/8 failed (ConnectionResetError: reset); retrying in 0.2s"


def test_rank_and_error_lines():
    when = datetime.datetime(2025, 1, 2, 3, 4, 5, 678901, tzinfo=datetime.timezone.utc)
    assert metrics.rank_line(1, 0, 4, 1, "pod-a", now=when) == (
        "trainfleet-rank: rank=1 local_rank=0 world_size=4 group_rank=1 host=pod-a time=2025-01-02T03:04:05.678Z")
    assert metrics.rank_line(1, 0, 4, 1, "pod-a", now=when, launcher="mpirun") == (
        "trainfleet-rank: rank=1 local_rank=0 world_size=4 group_rank=1 host=pod-a time=2025-01-02T03:04:05.678Z "
        "launcher=mpirun")
    assert metrics.epoch_line({"epoch": 1, "loss": 1, "test_acc": 0.5, "samples_per_s": 2}, now=when).endswith(
        " time=2025-01-02T03:04:05.678Z")
    assert metrics.error_line("argument --epochs: expected a positive integer, got 0") == \
        "trainfleet-trainer: error: argument --epochs: expected a positive integer, got 0"
