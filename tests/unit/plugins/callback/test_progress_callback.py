# -*- coding: utf-8 -*-
"""The trainfleet.training.progress stdout callback, in a real ansible-playbook run: waits print
throttled progress lines (never FAILED - RETRYING), blocking modules' progress reaches the
output, failures still print as by the default callback, and the step times close the run."""

from __future__ import annotations

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))

PLAYBOOK = """
- name: Step one
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: Retry until a file exists
      ansible.builtin.command: bash -c 'echo x >> {marker}; test $(wc -l < {marker}) -ge 6'
      register: probe
      until: probe.rc == 0
      retries: 20
      delay: 1
      changed_when: false

- name: Step two
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: Start a slow job
      trainfleet.training.background_job:
        state: started
        jobs: [{{name: slow, argv: [bash, -c, "for i in 1 2 3 4 5 6; do echo compiling part $i; sleep 1; done"], log: {log}}}]
    - name: Wait for the slow job
      trainfleet.training.background_job:
        jobs: [{{name: slow, log: {log}}}]
        timeout: 60
    - name: A command that fails
      ansible.builtin.command: bash -c 'echo broken >&2; exit 5'
      ignore_errors: true
"""


def test_progress_lines_instead_of_retry_alarms(tmp_path):
    marker = tmp_path / "marker"
    play = tmp_path / "play.yml"
    play.write_text(PLAYBOOK.format(marker=marker, log=tmp_path / "slow.log"))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), TRAINFLEET_PROGRESS_INTERVAL="2",
               ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    env.pop("TRAINFLEET_PROGRESS_FILE", None)
    env.pop("ANSIBLE_STDOUT_CALLBACK", None)
    # the probe succeeds on its sixth attempt, 1 s apart: the retry task waits >= 5 s however long
    # ansible-playbook takes to start (a timer started beside it raced a slow start on a loaded machine)
    done = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,",
         "-e", "ansible_python_interpreter=%s" % sys.executable, str(play)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=180, check=False)
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert "FAILED - RETRYING" not in out
    waits = re.findall(r"^  \.\.\. Retry until a file exists: waiting, attempt (\d+) of 21 \((\d+)s\)$", out, re.M)
    assert waits, out
    # throttled: consecutive lines of one task are at least the interval (2 s) apart, by their own
    # elapsed times (whole seconds, so >= 1 after rounding), whatever the machine's load
    elapsed = [int(seconds) for _attempt, seconds in waits]
    assert all(b - a >= 1 for a, b in zip(elapsed, elapsed[1:])), waits
    slow = re.findall(r"^  \.\.\. Wait for the slow job: slow: (compiling part \d|starting) \((\d+)s\)$", out, re.M)
    assert slow, out
    assert "compiling part" in out
    # the default callback's failure output is kept
    assert re.search(r"^fatal: \[localhost\]: FAILED!", out, re.M)
    assert "broken" in out
    # step times close the run, one line per play and the total
    tail = out[out.index("STEP TIMES"):]
    assert re.search(r"^Step one\s+\d+s$", tail, re.M)
    assert re.search(r"^Step two\s+\d+s$", tail, re.M)
    assert re.search(r"^total\s+\d+s$", tail, re.M)
