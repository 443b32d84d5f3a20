# -*- coding: utf-8 -*-
"""benchmarks/chaos.py's arithmetic and make test's verdict on a short chaos run, without a cluster.

The lines are the trainer's real formats (trainer.metrics), collected the way the script collects
them; analyse() turns them into per-fault figures and check() into the failures molecule default's
short chaos run stops on: one good run passes, and each kind of bad run fails naming the fault.
"""

from __future__ import annotations

import copy
import datetime
import importlib.util
import os
import sys
import types

import pytest

from trainer import metrics

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
T0 = 1735725600.0  # 2025-01-01T10:00:00Z
EPOCH_S = 2.0


@pytest.fixture(scope="module")
def chaos():
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    try:
        spec = importlib.util.spec_from_file_location("chaos_bench", os.path.join(ROOT, "benchmarks", "chaos.py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(os.path.join(ROOT, "benchmarks"))
    return module


def _args(**extra):
    return types.SimpleNamespace(**dict({"collective_timeout": 300.0}, **extra))


def _good_run():
    """Epochs 1-30 every 2 s; a kill at epoch 10 (resumed from 9, 1 epoch again), a freeze at 20
    (a watchdog line, 60 s without an epoch, resumed from 19), a pod deleted at 25."""
    epochs, resumes, stalls = [], [], []
    t = T0
    for epoch in range(1, 31):
        if epoch == 11:
            t += 8  # the kill's restart; epoch 10 is done again
            resumes.append((9, t - 1))
            epochs.append((10, t))
            t += EPOCH_S
        if epoch == 21:
            stalls.append((metrics.stall_line(0, 30.0, {"epoch": 21, "step": 4}, "not responding: rank 1"), t + 30))
            t += 60
            resumes.append((20, t - 1))
        if epoch == 26:
            t += 9
            resumes.append((25, t - 1))
        t += EPOCH_S
        epochs.append((epoch, t))
    faults = [{"kind": "kill", "at": T0 + 10 * EPOCH_S + 0.5, "victim": "w-0 rank 0 pid 14 (gone)", "lasted_s": 0.0, "error": None},
              {"kind": "stop", "at": T0 + 20 * EPOCH_S + 11, "victim": "w-1 rank 1 pid 11 (T (stopped))", "lasted_s": 0.0,
               "error": None},
              {"kind": "pod", "at": T0 + 25 * EPOCH_S + 71, "victim": "w-1", "lasted_s": 0.0, "error": None}]
    records = [{"epoch": e, "epoch_time_s": 0.1, "samples_per_s": 9000.0} for e in range(1, 31)]
    return faults, epochs, records, resumes, stalls


def _analysed(chaos, faults, epochs, records, resumes, stalls):
    return chaos.analyse(faults, epochs, records, T0 - 30, epochs[-1][1] + 5, chaos.own_pace(epochs), resumes, stalls)


def test_collected_lines_parse_with_the_trainers_own_parsers(chaos):
    collector = chaos.Collector(None, "job")
    lines = [metrics.epoch_line({"epoch": 3, "loss": 0.5, "test_acc": 0.9, "samples_per_s": 9000.0},
                                now=datetime.datetime.fromtimestamp(T0, datetime.timezone.utc)),
             metrics.resume_line(2, "s3://b/p/snapshot-epoch-00002.pt", 1),
             metrics.stall_line(0, 30.0, {"epoch": 3, "step": 1}, "not responding: rank 1")]
    for index, text in enumerate(lines):
        collector.lines.append(text)
        collector.seen_at[text] = T0 + index
    assert collector.epochs() == [(3, T0)]
    assert collector.resumes() == [(2, T0 + 1)]
    assert collector.stalls() == [(lines[2], T0 + 2)]
    assert all(chaos.LINE_RE.search("[default0]:" + text).group(0) == text for text in lines)


def test_a_good_short_run_is_measured_and_passes(chaos):
    rows, total = _analysed(chaos, *_good_run())
    assert [r["kind"] for r in rows] == ["kill", "stop", "pod"]
    assert [r["resumed_from"] for r in rows] == [[9], [20], [25]]
    assert rows[0]["epochs_lost"] == 1 and rows[1]["epochs_lost"] == 0
    assert rows[1]["stall_lines"] and not rows[0]["stall_lines"] and not rows[2]["stall_lines"]
    assert 55 < rows[1]["recovery_s"] < 62  # the freeze: 60 s without an epoch
    assert [round(r["cost_s"]) for r in rows] == [8, 60, 9]  # the waits beyond the 2 s pace, each in its own window
    assert total["epochs_kept"] == 30 and total["epochs_done_again"] == 1
    assert total["pace_s"] == EPOCH_S
    assert 0 < total["ettr"] < 1
    assert chaos.check(rows, total, "Succeeded", 0, ["kill", "stop", "pod"], _args()) == []


@pytest.mark.parametrize("spoil, expected", [
    (lambda f, e, r, res, st: None, "the job ended Failed"),
    (lambda f, e, r, res, st: f.pop(), "expected each of"),
    (lambda f, e, r, res, st: f[2].update(victim=None, error="no running worker pod"), "could not be made: no running worker pod"),
    (lambda f, e, r, res, st: st.clear(), "no watchdog line"),
    (lambda f, e, r, res, st: res.pop(0), "fault 1 (kill, w-0 rank 0 pid 14 (gone)): no rank resumed"),
    (lambda f, e, r, res, st: f[2].update(at=e[-1][1] + 1), "fault 3 (pod, w-1): no epoch ended after it"),
])
def test_a_bad_short_run_fails_naming_what_went_wrong(chaos, spoil, expected):
    run = copy.deepcopy(_good_run())
    spoil(*run)
    rows, total = _analysed(chaos, *run)
    phase = "Failed" if expected.startswith("the job ended") else "Succeeded"
    failures = chaos.check(rows, total, phase, 0, ["kill", "stop", "pod"], _args())
    assert any(expected in failure for failure in failures), failures


def test_a_recovery_or_a_gap_over_twice_the_collective_timeout_fails(chaos):
    rows, total = _analysed(chaos, *_good_run())
    failures = chaos.check(rows, total, "Succeeded", 0, ["kill", "stop", "pod"], _args(collective_timeout=25.0))
    assert any("fault 2 (stop" in f and "over 2 x the collective timeout (50 s)" in f for f in failures), failures
    assert any("without an epoch, over 50 s" in f for f in failures), failures


def test_own_pace_is_the_median_step_between_consecutive_epochs(chaos):
    assert chaos.own_pace([(1, 10.0), (2, 12.0), (3, 14.0), (2, 50.0), (3, 52.0), (4, 54.5)]) == 2.0


class _Seen(types.SimpleNamespace):
    """What the collector saw: epochs() [(epoch, end)], resumes() [(epoch, seen at)]."""

    def epochs(self):
        return self.epoch_ends

    def resumes(self):
        return self.resumed


@pytest.mark.parametrize("kind, epoch_ends, resumed, error, expected", [
    # the epoch under way when the rank was killed ends just after the kill: not a recovery (the flake this guards)
    ("kill", [(7, T0 + 1)], [], None, False),
    ("kill", [(7, T0 + 1)], [(7, T0 + 20)], None, False),
    ("kill", [(7, T0 + 1), (8, T0 + 25)], [(7, T0 + 20)], None, True),
    ("pod", [(8, T0 + 25)], [(7, T0 + 20)], None, True),
    ("stop", [(8, T0 + 25)], [(7, T0 - 5)], None, False),
    # a fault that restarts nothing, or one that could not be made: an epoch after it is enough
    ("net", [(7, T0 + 1)], [], None, True),
    ("s3", [], [], None, False),
    ("kill", [(7, T0 + 1)], [], "no running worker pod", True),
])
def test_the_next_fault_waits_until_the_job_recovered(chaos, kind, epoch_ends, resumed, error, expected):
    fault = {"kind": kind, "at": T0, "victim": "w-0", "lasted_s": 0.0, "error": error}
    assert chaos.recovered(_Seen(epoch_ends=epoch_ends, resumed=resumed), fault, T0 - 60) is expected


def test_the_first_fault_waits_for_an_epoch(chaos):
    assert chaos.recovered(_Seen(epoch_ends=[], resumed=[]), None, T0) is False
    assert chaos.recovered(_Seen(epoch_ends=[(1, T0 + 2)], resumed=[]), None, T0) is True
