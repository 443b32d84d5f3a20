# -*- coding: utf-8 -*-
"""make test's last lines when the live lane failed (scripts/test.sh live_failures): the task that
stopped molecule and its message, read from the live lane's log as molecule writes it (colours,
the "│" margin, failures ansible went on from)."""

from __future__ import annotations

import os
import subprocess

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

LOG = """\
\x1b[32mINFO\x1b[0m     default \u279c verify: Executing
  \u2502 TASK [Probe an image that is not there]
  \u2502 fatal: [localhost]: FAILED! => {"msg": "ignored one"}
  \u2502 ...ignoring
  \u2502
  \u2502 TASK [A failure the block rescued]
  \u2502 \x1b[31mfatal: [localhost]: FAILED! => {"msg": "rescued one"}\x1b[0m
  \u2502
  \u2502 TASK [Its scalars API lists the converged run with the trainer's four
  \u2502   tags] ***
  \u2502 \x1b[31mfatal: [localhost]: FAILED! => {\x1b[0m
  \u2502     "attempts": 50,
  \u2502     "msg": "Status code was -1 and not [200]: Connection refused"
  \u2502 }
  \u2502
  \u2502 PLAY RECAP
\x1b[32mINFO\x1b[0m     default \u279c verify: \x1b[31mExecuted: Failed\x1b[0m (Ansible return code was 2)
"""


def test_the_last_lines_name_the_failed_task_and_its_message(tmp_path):
    log = tmp_path / "test-live.log"
    log.write_text(LOG, encoding="utf-8")
    proc = subprocess.run(["bash", os.path.join(ROOT, "scripts", "test.sh"), "live-failures"], cwd=ROOT,
                          env=dict(os.environ, LIVE_LOG=str(log)), capture_output=True, text=True, timeout=60,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert "the live lane's last failed task" in lines[0]
    assert lines[1] == "TASK [Its scalars API lists the converged run with the trainer's four"
    assert lines[2] == "  fatal: [localhost]: FAILED! => {"
    assert '"msg": "Status code was -1 and not [200]: Connection refused"' in proc.stdout
    assert lines[-1] == "INFO     default \u279c verify: Executed: Failed (Ansible return code was 2)"
    assert "ignored one" not in proc.stdout and "rescued one" not in proc.stdout and "\x1b[" not in proc.stdout
