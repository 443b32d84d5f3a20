# -*- coding: utf-8 -*-
"""module_utils/background: real background processes, their logs and result lines."""

from __future__ import annotations

import os
import time

from ansible_collections.trainfleet.training.plugins.module_utils import background as bg


def wait_one(log, timeout=30):
    finished, states = bg.wait([dict(name="job", log=log)], timeout, poll_interval=0.1)
    return finished, states[0]


def test_success_and_last_line(tmp_path):
    log = str(tmp_path / "logs" / "a.log")
    bg.start(["bash", "-c", "echo one; printf 'two\\rthree\\n'"], log, timeout=30)
    finished, st = wait_one(log)
    assert finished
    assert st["state"] == "succeeded" and st["rc"] == 0 and not st["timed_out"]
    # a progress bar's carriage returns: the last state of the line is kept
    assert st["last_line"] == "three"
    assert open(log).read().rstrip().splitlines()[-1].startswith("trainfleet-job: rc=0 seconds=")


def test_colour_codes_are_left_out_of_the_last_lines(tmp_path):
    """The classic builder paints a RUN step's stderr: \x1b[91m...\x1b[0m."""
    log = tmp_path / "c.log"
    log.write_text("\x1b[91m+ rm -rf /usr/share/doc/apt\x1b[0m\n\x1b[91m+ apt-get clean\x1b[0m\n")
    assert bg.tail(str(log), 2) == ["+ rm -rf /usr/share/doc/apt", "+ apt-get clean"]
    assert bg.status(str(log))["last_line"] == "+ apt-get clean"


def test_failure_message_names_job_rc_log_and_tail(tmp_path):
    log = str(tmp_path / "b.log")
    bg.start(["bash", "-c", "echo building; echo 'no space left' >&2; exit 4"], log, timeout=30)
    finished, st = wait_one(log)
    assert finished and st["state"] == "failed" and st["rc"] == 4
    msg = bg.failure_message([dict(st, name="etcd")])
    assert msg.startswith("etcd exited with 4 after ")
    assert log in msg and "building\nno space left" in msg


def test_timeout_kills_the_process_group(tmp_path):
    log = str(tmp_path / "c.log")
    marker = tmp_path / "child-alive"
    bg.start(["bash", "-c", "(sleep 30; touch %s) & sleep 30" % marker], log, timeout=1)
    finished, st = wait_one(log, timeout=40)
    assert finished and st["state"] == "failed" and st["timed_out"] and st["rc"] == -1
    assert "killed at its time limit" in bg.failure_message([st])
    time.sleep(0.5)
    assert not marker.exists()


def test_wait_gives_up_at_its_deadline_with_progress(tmp_path):
    log = str(tmp_path / "d.log")
    pid = bg.start(["bash", "-c", "echo compiling k8s.io/kubernetes; sleep 20"], log, timeout=30)
    seen = []
    time.sleep(0.5)
    finished, states = bg.wait([dict(name="kubernetes", log=log), dict(name="missing", log=log + ".none")],
                               1, poll_interval=0.2, on_progress=seen.append)
    assert not finished
    assert states[0]["state"] == "running" and states[1]["state"] == "missing"
    assert seen and seen[-1] == "kubernetes: compiling k8s.io/kubernetes | missing: starting | 0 of 2 done"
    os.killpg(pid, 15)


def test_a_running_job_is_not_started_twice(tmp_path):
    log = str(tmp_path / "e.log")
    first = bg.start(["bash", "-c", "echo once >> %s; sleep 3" % (tmp_path / "count")], log, timeout=30)
    time.sleep(0.3)
    second = bg.start(["bash", "-c", "echo once >> %s; sleep 3" % (tmp_path / "count")], log, timeout=30)
    assert first == second
    finished, st = wait_one(log)
    assert finished and st["state"] == "succeeded"
    assert open(tmp_path / "count").read() == "once\n"
    # finished: a new start runs again
    assert bg.start(["true"], log, timeout=30) != first


def test_command_that_cannot_start(tmp_path):
    log = str(tmp_path / "f.log")
    bg.start(["/nonexistent/build.sh"], log, timeout=30)
    finished, st = wait_one(log)
    assert st["state"] == "failed" and st["rc"] == 127
    assert "cannot start /nonexistent/build.sh" in "\n".join(st["tail"])
