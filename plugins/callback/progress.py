# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ansible's default output, with long waits shown as progress instead of alarms."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: progress
type: stdout
short_description: Ansible's default output, with progress lines for long waits
description:
  - Everything is printed as by Ansible's C(default) stdout callback, except waits.
  - A task that retries (C(until)/C(retries)) prints no C(FAILED - RETRYING) line. It prints at
    most one line per O(interval) seconds instead, with what it waits for, the elapsed time and
    the task's own progress text (the C(progress) value of the last attempt's result) or the
    attempt count.
  - A task that runs longer than O(interval) seconds without a result (an image build, a push,
    a job wait, an C(async) task polled by Ansible) prints the same kind of line every
    O(interval) seconds, with the last progress line the collection's modules wrote to the
    progress channel, see below.
  - The progress channel is a file named by the environment variable C(TRAINFLEET_PROGRESS_FILE),
    which this callback sets for the run (modules executed on the controller inherit it).
    Modules of this collection append one JSON line to it, C({"time", "text"}), whenever they
    have something to say while they block.
  - At the end of the run a table gives the time each play (each step of C(site.yml)) took.
  - With C(-vv) or more, retries are printed as by the default callback.
author:
  - trainfleet developers (!UNKNOWN)
extends_documentation_fragment:
  - default_callback
  - result_format_callback
requirements:
  - set as the stdout callback (C(stdout_callback = trainfleet.training.progress) in ansible.cfg)
options:
  interval:
    description:
      - Seconds between two progress lines of one task.
    type: int
    default: 30
    env:
      - name: TRAINFLEET_PROGRESS_INTERVAL
    ini:
      - section: callback_trainfleet_progress
        key: interval
  step_times:
    description:
      - Print the time each play took at the end of the run.
    type: bool
    default: true
    env:
      - name: TRAINFLEET_STEP_TIMES
    ini:
      - section: callback_trainfleet_progress
        key: step_times
"""

import json
import os
import tempfile
import threading
import time

from ansible.plugins.callback.default import CallbackModule as DefaultCallbackModule
from ansible_collections.trainfleet.training.plugins.module_utils.progress import (
    PROGRESS_ENV,
    elapsed_text as format_duration,
)


def last_progress(path, since):
    """The text of the last line of the progress file written at or after `since`, or None."""
    if not path:
        return None
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 8192))
            tail = handle.read().decode("utf-8", "replace").splitlines()
    except (IOError, OSError):
        return None
    for line in reversed(tail):
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if not isinstance(entry, dict) or float(entry.get("time", 0)) < since:
            return None
        text = str(entry.get("text", "")).strip()
        if text:
            return text
    return None


class CallbackModule(DefaultCallbackModule):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "trainfleet.training.progress"

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        self._running = {}  # (host, task uuid) -> dict(name, started, last_line)
        self._running_lock = threading.Lock()
        self._steps = []  # [name, started, ended]
        self._progress_path = None
        self._stop = threading.Event()
        self._ticker = None

    # -- the progress channel and the ticker -------------------------------------------------

    def _interval(self):
        try:
            return max(1, int(self.get_option("interval")))
        except (KeyError, TypeError, ValueError):
            return 30

    def v2_playbook_on_start(self, playbook):
        if not os.environ.get(PROGRESS_ENV):
            handle, self._progress_path = tempfile.mkstemp(prefix="trainfleet-progress-", suffix=".jsonl")
            os.close(handle)
            os.environ[PROGRESS_ENV] = self._progress_path
        if self._ticker is None:
            self._ticker = threading.Thread(target=self._tick, name="trainfleet-progress")
            self._ticker.daemon = True
            self._ticker.start()
        super(CallbackModule, self).v2_playbook_on_start(playbook)

    def _tick(self):
        while not self._stop.wait(1.0):
            now = time.time()
            due = []
            with self._running_lock:
                for entry in self._running.values():
                    if now - entry["last_line"] >= self._interval():
                        entry["last_line"] = now
                        due.append(dict(entry))
            for entry in due:
                text = (entry.get("text") or last_progress(os.environ.get(PROGRESS_ENV), entry["started"])
                        or "still running")
                self._progress_line(entry, text, now)

    def _progress_line(self, entry, text, now):
        self._display.display("  ... %s%s: %s (%s)" % (
            entry["name"], " [%s]" % entry["label"] if entry.get("label") else "",
            text, format_duration(now - entry["started"])))

    def _key(self, host, task):
        return (host.get_name() if hasattr(host, "get_name") else str(host), task._uuid)

    def _start(self, host, task):
        now = time.time()
        with self._running_lock:
            self._running[self._key(host, task)] = dict(
                name=task.get_name().strip(), label="", started=now, last_line=now)

    def _finish(self, result):
        with self._running_lock:
            self._running.pop(self._key(result._host, result._task), None)

    def v2_runner_on_start(self, host, task):
        self._start(host, task)
        super(CallbackModule, self).v2_runner_on_start(host, task)

    # Every way a task ends on a host.
    def v2_runner_on_ok(self, result, *args, **kwargs):
        self._finish(result)
        super(CallbackModule, self).v2_runner_on_ok(result, *args, **kwargs)

    def v2_runner_on_failed(self, result, *args, **kwargs):
        self._finish(result)
        super(CallbackModule, self).v2_runner_on_failed(result, *args, **kwargs)

    def v2_runner_on_skipped(self, result, *args, **kwargs):
        self._finish(result)
        super(CallbackModule, self).v2_runner_on_skipped(result, *args, **kwargs)

    def v2_runner_on_unreachable(self, result, *args, **kwargs):
        self._finish(result)
        super(CallbackModule, self).v2_runner_on_unreachable(result, *args, **kwargs)

    # -- retries and async polls: throttled progress lines -----------------------------------

    def _throttled(self, result, text):
        """Print `text` for this task unless a line was printed less than interval ago."""
        key = self._key(result._host, result._task)
        now = time.time()
        with self._running_lock:
            entry = self._running.get(key)
            if entry is None:
                entry = self._running[key] = dict(
                    name=result._task.get_name().strip(), label="", started=now, last_line=0.0)
            label = self._get_item_label(result._result) if "item" in result._result else None
            entry["label"] = str(label) if label is not None else ""
            entry["text"] = text
            if now - entry["last_line"] < self._interval():
                return
            entry["last_line"] = now
            entry = dict(entry)
        self._progress_line(entry, text, now)

    def v2_runner_retry(self, result):
        if self._display.verbosity >= 2:
            return super(CallbackModule, self).v2_runner_retry(result)
        res = result._result
        text = res.get("progress")
        if not isinstance(text, str) or not text.strip():
            text = "waiting, attempt %s of %s" % (res.get("attempts", "?"), res.get("retries", "?"))
        self._throttled(result, text.strip())

    def v2_runner_on_async_poll(self, result):
        if self._display.verbosity >= 2:
            return super(CallbackModule, self).v2_runner_on_async_poll(result)
        key = self._key(result._host, result._task)
        with self._running_lock:
            started = self._running.get(key, {}).get("started", time.time())
        self._throttled(result, last_progress(os.environ.get(PROGRESS_ENV), started) or "running in the background")

    # -- step times ----------------------------------------------------------------------------

    def v2_playbook_on_play_start(self, play):
        now = time.time()
        if self._steps and self._steps[-1][2] is None:
            self._steps[-1][2] = now
        self._steps.append([play.get_name().strip() or "(unnamed play)", now, None])
        super(CallbackModule, self).v2_playbook_on_play_start(play)

    def v2_playbook_on_stats(self, stats):
        self._stop.set()
        now = time.time()
        if self._steps and self._steps[-1][2] is None:
            self._steps[-1][2] = now
        super(CallbackModule, self).v2_playbook_on_stats(stats)
        if self._steps and self.get_option("step_times"):
            self._display.banner("STEP TIMES")
            width = max(len(s[0]) for s in self._steps)
            for name, started, ended in self._steps:
                self._display.display("%-*s %10s" % (width, name, format_duration(ended - started)))
            total = self._steps[-1][2] - self._steps[0][1]
            self._display.display("%-*s %10s" % (width, "total", format_duration(total)))
        if self._progress_path:
            try:
                os.unlink(self._progress_path)
            except OSError:
                pass
