# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Long commands run in the background, each with its own log (builds, debootstrap, kind create).

A job writes everything it prints to its log, and the runner appends one last line,
``trainfleet-job: rc=<code> seconds=<n>`` (or ``... rc=-1 seconds=<n> timeout`` when the runner
killed it). That line is the job's result: a log whose last line is not one is a job still running.
This module is the one place that writes and reads that line.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import subprocess
import sys
import time

RESULT_PREFIX = "trainfleet-job:"
_RESULT_RE = re.compile(r"^trainfleet-job: rc=(-?\d+) seconds=(\d+)( timeout)?$")
_ANSI_RE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

# Run by `python -c` in a new session: runs argv with its output appended to the log, kills the
# whole process group at the deadline, then appends the result line.
RUNNER = r"""
import os, signal, subprocess, sys, time
log, timeout, argv = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
start = time.time()
with open(log, "ab", buffering=0) as out:
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                start_new_session=True)
    except OSError as exc:
        out.write(("cannot start %s: %s\n" % (argv[0], exc)).encode())
        rc, killed = 127, False
    else:
        killed = False
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            killed = True
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            rc = -1
    out.write(("\ntrainfleet-job: rc=%d seconds=%d%s\n"
               % (rc, int(time.time() - start), " timeout" if killed else "")).encode())
"""


def running_pid(log):
    """The pid of a runner still working on this log (from <log>.pid), else None."""
    try:
        with open(log + ".pid") as handle:
            pid = int(handle.read().strip())
        os.kill(pid, 0)
    except (IOError, OSError, ValueError):
        return None
    return pid if status(log, 0)["state"] == "running" else None


def start(argv, log, timeout, env=None, chdir=None):
    """Start argv in the background (a new session, outliving the caller); returns its pid.

    Truncates the log. A runner still working on the same log (an earlier, interrupted run) is
    not started twice: its pid is returned and the caller waits for it like for a new one.
    """
    pid = running_pid(log)
    if pid is not None:
        return pid
    log_dir = os.path.dirname(os.path.abspath(log))
    if not os.path.isdir(log_dir):
        os.makedirs(log_dir)
    with open(log, "w"):
        pass
    full_env = dict(os.environ)
    full_env.update(dict((k, str(v)) for k, v in (env or {}).items()))
    proc = subprocess.Popen([sys.executable, "-c", RUNNER, log, str(int(timeout))] + list(argv),
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=full_env, close_fds=True,
                            start_new_session=True, cwd=chdir or None)
    with open(log + ".pid", "w") as handle:
        handle.write("%d\n" % proc.pid)
    return proc.pid


def tail(path, lines=1, max_bytes=65536):
    """The last `lines` non-empty lines of a file ([] when it does not exist)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - max_bytes))
            text = handle.read().decode("utf-8", "replace")
    except (IOError, OSError):
        return []
    # Progress bars rewrite their line with \r: the last state is what counts. Colour codes (the
    # Docker engine's classic builder paints a RUN step's stderr red) are left out.
    out = [_ANSI_RE.sub("", part.split("\r")[-1]).rstrip() for part in text.splitlines()]
    return [line for line in out if line.strip()][-lines:]


def status(log, tail_lines=30):
    """dict(state=running|succeeded|failed|missing, rc, seconds, timed_out, last_line, tail)."""
    if not os.path.exists(log):
        return dict(state="missing", rc=None, seconds=None, timed_out=False, last_line="", tail=[])
    lines = tail(log, max(tail_lines, 1) + 1)
    match = _RESULT_RE.match(lines[-1]) if lines else None
    if not match:
        return dict(state="running", rc=None, seconds=None, timed_out=False,
                    last_line=lines[-1] if lines else "", tail=lines[-tail_lines:] if tail_lines else [])
    rc = int(match.group(1))
    body = lines[:-1]
    return dict(state="succeeded" if rc == 0 else "failed", rc=rc, seconds=int(match.group(2)),
                timed_out=bool(match.group(3)), last_line=body[-1] if body else "",
                tail=body[-tail_lines:] if tail_lines else [])


def wait(jobs, timeout, poll_interval=2.0, tail_lines=30, on_progress=None,
         clock=time.time, sleep=time.sleep):
    """Wait until every job's log has its result line or `timeout` seconds pass.

    jobs: [dict(name, log)]. Returns (finished, [dict(name, log, **status)]). on_progress(text) is
    called after each round with one line saying what is still running and its last log line.
    """
    deadline = clock() + timeout
    while True:
        states = [dict(job, **status(job["log"], tail_lines)) for job in jobs]
        pending = [s for s in states if s["state"] in ("running", "missing")]
        if not pending or clock() >= deadline:
            return not pending, states
        if on_progress is not None:
            on_progress(progress_text(states))
        sleep(poll_interval)


def progress_text(states):
    """'kubernetes: <its last log line> | coredns: starting | 2 of 4 done'."""
    parts = []
    done = 0
    for s in states:
        if s["state"] == "running":
            parts.append("%s: %s" % (s["name"], (s["last_line"] or "started")[:160]))
        elif s["state"] == "missing":
            parts.append("%s: starting" % s["name"])
        else:
            done += 1
    if len(states) > 1:
        parts.append("%d of %d done" % (done, len(states)))
    return " | ".join(parts)


def failure_message(states):
    """One message for every failed job: its name, rc, log and last lines."""
    out = []
    for s in states:
        if s["state"] != "failed":
            continue
        why = "was killed at its time limit" if s["timed_out"] else "exited with %s" % s["rc"]
        out.append("%s %s after %ss (log %s); its last lines:\n%s" % (
            s["name"], why, s["seconds"], s["log"], "\n".join(s["tail"]) or "(empty log)"))
    return "\n".join(out)
