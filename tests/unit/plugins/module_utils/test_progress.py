# -*- coding: utf-8 -*-
"""module_utils/progress: the progress channel the progress callback reads."""

from __future__ import annotations

import json

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
