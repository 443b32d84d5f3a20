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


# --------------------------------------------------------------------------- the training progress line


class TrainingProgress(object):
    """What rank 0's log has said so far about a run, accumulated over several reads of its tail.

    feed(parsed, epoch_s) takes trainerlog.parse_trainer_line's dict of a line and the line's time
    (seconds since the epoch: the trainer's time=, else the kubelet's); repeated lines (the same
    epoch read again in the next tail) count once. A resume line, or an epoch number lower than one
    seen before, starts a new run (from a snapshot): the earlier epochs' times are forgotten, so the
    time per epoch is this run's, without the restart in it.
    """

    def __init__(self):
        self.points = {}  # epoch -> seconds since the epoch (when it was done)
        self.last = None  # the newest epoch line's dict
        self.start_s = None  # when this run's processes joined (the latest rank line)
        self.start_epoch = 0  # epochs done before this run (a resume)

    def feed(self, parsed, epoch_s):
        kind = parsed.get("kind")
        if kind == "rank" and epoch_s is not None:
            if self.start_s is None or epoch_s > self.start_s:
                self.start_s = epoch_s
        elif kind == "resume":
            # a new run from a snapshot: the time per epoch is this run's
            self.start_epoch = parsed["epoch"]
            self.points = {}
        elif kind == "epoch":
            if self.last is not None and parsed["epoch"] < self.last["epoch"]:
                self.points = {}
            if epoch_s is not None:
                self.points[parsed["epoch"]] = epoch_s
            self.last = parsed

    def seconds_per_epoch(self):
        """This run's time per epoch: between its first and last epoch lines, or with one epoch line,
        from the rank line (the processes joined) to it; None when not known yet."""
        done = sorted(self.points.items())
        if len(done) >= 2:
            (first_epoch, first_s), (last_epoch, last_s) = done[0], done[-1]
            return (last_s - first_s) / (last_epoch - first_epoch)
        if len(done) == 1 and self.start_s is not None and done[0][1] > self.start_s:
            epochs = done[0][0] - self.start_epoch
            return (done[0][1] - self.start_s) / epochs if epochs > 0 else None
        return None

    def eta_seconds(self, total_epochs, now_s):
        """Seconds left until the last epoch is done: the epochs left times the time per epoch,
        less what has passed since the last epoch line; None when not known."""
        return eta_seconds(self.last["epoch"] if self.last else None, total_epochs, self.seconds_per_epoch(),
                           max(self.points.values()) if self.points else None, now_s)


def eta_seconds(epoch, total_epochs, seconds_per_epoch, last_epoch_s, now_s):
    """(total - epoch) * seconds_per_epoch - (now - when epoch was done), at least 0; None if unknown."""
    if None in (epoch, total_epochs, seconds_per_epoch, last_epoch_s, now_s):
        return None
    if epoch >= total_epochs:
        return 0.0
    return max(0.0, (total_epochs - epoch) * seconds_per_epoch - max(0.0, now_s - last_epoch_s))


def progress_line(job, phase, elapsed_seconds=None, epoch=None, total_epochs=None, loss=None, test_acc=None,
                  samples_per_s=None, eta=None, pods=None):
    """The one line a wait prints about a training job, for example
    "PyTorchJob ns/digits Running: epoch 3/5, loss 0.1234, acc 0.9612, 812 samples/s; elapsed 1m05s, about 40s left".
    Before the first epoch it names the pods' states instead (pods: "a Running, b Pending")."""
    parts = []
    if epoch is not None:
        parts.append("epoch %s/%s" % (epoch, total_epochs if total_epochs is not None else "?"))
        if loss is not None:
            parts.append("loss %.4f" % loss)
        if test_acc is not None:
            parts.append("acc %.4f" % test_acc)
        if samples_per_s is not None:
            parts.append("%.0f samples/s" % samples_per_s)
    elif pods:
        parts.append("pods: %s" % pods)
    timing = []
    if elapsed_seconds is not None:
        timing.append("elapsed %s" % elapsed_text(elapsed_seconds))
    if eta is not None:
        timing.append("about %s left" % elapsed_text(eta))
    text = "%s %s" % (job, phase)
    if parts:
        text += ": " + ", ".join(parts)
    if timing:
        text += "; " + ", ".join(timing)
    return text
