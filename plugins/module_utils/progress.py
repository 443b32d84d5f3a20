# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The progress channel: what a blocking module says while it waits.

The trainfleet.training.progress stdout callback names a file in TRAINFLEET_PROGRESS_FILE for the
run; modules executed on the controller inherit it and append one JSON line per report. The
callback prints the newest line of a task that runs long (at most one line every 30 s). Without the
callback (another stdout callback, a remote host) the variable is unset and reporting does nothing.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import time

PROGRESS_ENV = "TRAINFLEET_PROGRESS_FILE"


class ProgressReporter(object):
    """report(text) appends {"time", "text"} to the channel, at most once per min_interval s."""

    def __init__(self, min_interval=5.0, path=None, clock=time.time):
        self.path = path if path is not None else os.environ.get(PROGRESS_ENV)
        self.min_interval = min_interval
        self.clock = clock
        self._last = None

    def report(self, text, force=False):
        if not self.path or not text:
            return False
        now = self.clock()
        if not force and self._last is not None and now - self._last < self.min_interval:
            return False
        self._last = now
        try:
            with open(self.path, "a") as handle:
                handle.write(json.dumps({"time": now, "text": str(text)}) + "\n")
        except (IOError, OSError):
            self.path = None  # a channel that cannot be written is dropped, never an error
            return False
        return True


def elapsed_text(seconds):
    """12 -> '12s', 75 -> '1m15s', 3725 -> '1h02m05s' (the callback prints the same form)."""
    seconds = int(max(0, seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return "%dh%02dm%02ds" % (hours, minutes, secs)
    if minutes:
        return "%dm%02ds" % (minutes, secs)
    return "%ds" % secs
