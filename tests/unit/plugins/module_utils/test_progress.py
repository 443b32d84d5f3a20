# -*- coding: utf-8 -*-
"""module_utils/progress: the progress channel the progress callback reads."""

from __future__ import annotations

import json

import pytest

from ansible_collections.trainfleet.training.plugins.module_utils.progress import ProgressReporter, elapsed_text


def test_reporter_writes_json_lines_at_most_every_min_interval(tmp_path):
    path = tmp_path / "p.jsonl"
    now = [100.0]
    rep = ProgressReporter(min_interval=5, path=str(path), clock=lambda: now[0])
    assert rep.report("a")
    now[0] = 103
    assert not rep.report("b")
    assert rep.report("c", force=True)
    now[0] = 110
    assert rep.report("d")
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [x["text"] for x in lines] == ["a", "c", "d"]
    assert lines[0]["time"] == 100.0


def test_reporter_without_channel_or_unwritable_is_silent(tmp_path):
    assert not ProgressReporter(path="").report("x")
    rep = ProgressReporter(path=str(tmp_path / "no" / "such" / "dir" / "p"))
    assert not rep.report("x")
    assert rep.path is None


def test_elapsed_text():
    assert [elapsed_text(s) for s in (0, 12, 75, 3725, -3)] == ["0s", "12s", "1m15s", "1h02m05s", "0s"]


# --------------------------------------------------------------------------- the training progress line

from ansible_collections.trainfleet.training.plugins.module_utils import progress as pg  # noqa: E402


def test_progress_line_before_and_after_the_first_epoch():
    assert pg.progress_line("PyTorchJob t/digits", "Created", 20, pods="digits-worker-0 Pending, digits-worker-1 Running") == (
        "PyTorchJob t/digits Created: pods: digits-worker-0 Pending, digits-worker-1 Running; elapsed 20s")
    assert pg.progress_line("PyTorchJob t/digits", "Running", 65.4, epoch=3, total_epochs=5, loss=0.123449, test_acc=0.96125,
                            samples_per_s=812.4, eta=40.2, pods="ignored once an epoch is known") == (
        "PyTorchJob t/digits Running: epoch 3/5, loss 0.1234, acc 0.9613, 812 samples/s; elapsed 1m05s, about 40s left")
    assert pg.progress_line("MPIJob t/m", "Running", None, epoch=1) == "MPIJob t/m Running: epoch 1/?"
    assert pg.progress_line("VolcanoJob t/v", "Pending") == "VolcanoJob t/v Pending"


@pytest.mark.parametrize("epoch,total,per_epoch,last_s,now_s,eta", [
    (3, 5, 10.0, 100.0, 104.0, 16.0),   # 2 epochs left at 10 s each, 4 s into the next one
    (3, 5, 10.0, 100.0, 150.0, 0.0),    # slower than before: never negative
    (5, 5, 10.0, 100.0, 101.0, 0.0),    # all epochs done
    (6, 5, 10.0, 100.0, 101.0, 0.0),    # a resumed run past --epochs
    (3, None, 10.0, 100.0, 101.0, None),
    (3, 5, None, 100.0, 101.0, None),
    (None, 5, 10.0, None, 101.0, None),
])
def test_eta_seconds(epoch, total, per_epoch, last_s, now_s, eta):
    assert pg.eta_seconds(epoch, total, per_epoch, last_s, now_s) == eta


def _line(kind, **fields):
    return dict(fields, kind=kind)


def test_training_progress_rate_from_two_epochs_or_from_the_rendezvous():
    tp = pg.TrainingProgress()
    assert tp.seconds_per_epoch() is None and tp.eta_seconds(5, 1000.0) is None
    tp.feed(_line("rank", rank=0, time=None), 100.0)
    tp.feed(_line("epoch", epoch=1, loss=1.0, test_acc=0.5, samples_per_s=10.0), 112.0)
    assert tp.seconds_per_epoch() == 12.0  # one epoch: from the rank line (processes joined)
    tp.feed(_line("epoch", epoch=2, loss=0.5, test_acc=0.7, samples_per_s=11.0), 120.0)
    tp.feed(_line("epoch", epoch=2, loss=0.5, test_acc=0.7, samples_per_s=11.0), 120.0)  # read again in the next tail
    tp.feed(_line("epoch", epoch=3, loss=0.4, test_acc=0.8, samples_per_s=12.0), 128.0)
    assert tp.seconds_per_epoch() == 8.0 and tp.last["epoch"] == 3
    assert tp.eta_seconds(5, 130.0) == 14.0


def test_training_progress_after_a_restart_counts_only_this_runs_epochs():
    tp = pg.TrainingProgress()
    for epoch, when in ((1, 110.0), (2, 120.0), (3, 130.0)):
        tp.feed(_line("epoch", epoch=epoch), when)
    # the pod restarted and resumed from the snapshot of epoch 2: slower now
    tp.feed(_line("rank", rank=0), 200.0)
    tp.feed(_line("resume", epoch=2, restarts=0), 201.0)
    assert tp.points == {} and tp.seconds_per_epoch() is None
    tp.feed(_line("epoch", epoch=3), 230.0)
    assert tp.seconds_per_epoch() == 30.0  # rendezvous 200 -> epoch 3 at 230, 1 epoch past the resume
    tp.feed(_line("epoch", epoch=4), 250.0)
    assert tp.seconds_per_epoch() == 20.0 and tp.eta_seconds(6, 255.0) == 35.0
    # an epoch number going back without a resume line (no snapshot: training started over)
    tp.feed(_line("epoch", epoch=1), 300.0)
    assert tp.points == {1: 300.0} and tp.last["epoch"] == 1
