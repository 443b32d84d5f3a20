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


JUNIT = """\
<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="0" failures="1" skipped="0" tests="2">
<testcase classname="tests.integration.test_prebuild" name="test_shares" time="9.1">
<failure message="AssertionError: waiting for the base image b (1s)&#10;assert 'b (0s)' in 'b (1s)'">def test_shares():
&gt;       assert "(0s)" in log, log
E       AssertionError: waiting for the base image b (1s)

tests/integration/test_prebuild.py:115: AssertionError</failure></testcase>
<testcase classname="tests.integration.test_prebuild" name="test_passes" time="0.1"/>
</testsuite></testsuites>
"""


def test_a_failed_compute_suite_names_its_failed_tests_last(tmp_path):
    (tmp_path / "integration.xml").write_text(JUNIT, encoding="utf-8")
    (tmp_path / "unit.xml").write_text('<testsuite name="pytest" tests="1"><testcase classname="u" name="ok"/></testsuite>')
    proc = subprocess.run(["python", os.path.join(ROOT, "scripts", "count_tests.py"), "--failures", str(tmp_path)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "integration: FAILURE tests.integration.test_prebuild::test_shares",
        "  AssertionError: waiting for the base image b (1s)",
        "  assert 'b (0s)' in 'b (1s)'",
        "  at tests/integration/test_prebuild.py:115: AssertionError",
    ]


def test_reports_without_a_failed_test_say_so(tmp_path):
    (tmp_path / "unit.xml").write_text('<testsuite name="pytest" tests="1"><testcase classname="u" name="ok"/></testsuite>')
    proc = subprocess.run(["python", os.path.join(ROOT, "scripts", "count_tests.py"), "--failures", str(tmp_path)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0 and "no failed test in the reports" in proc.stdout, proc.stdout


def test_a_failed_playbook_run_beside_the_proofs_shows_its_own_failed_task(tmp_path):
    log = tmp_path / "test-live.log"
    log.write_text(LOG, encoding="utf-8")
    (tmp_path / "side-effect-own-code.log").write_text(
        "TASK [Own code ran]\nok: [localhost]\n\nPLAY RECAP\n"
        "localhost                  : ok=40   changed=3    unreachable=0    failed=0    skipped=2\n", encoding="utf-8")
    (tmp_path / "side-effect-launchers.log").write_text(
        "TASK [The MPIJob Succeeded on digits with rank 0 in the launcher's log]\n"
        "fatal: [localhost]: FAILED! => {\n    \"msg\": \"MPIJob: phase Failed\"\n}\n\nPLAY RECAP\n"
        "localhost                  : ok=12   changed=2    unreachable=0    failed=1    skipped=0\n", encoding="utf-8")
    proc = subprocess.run(["bash", os.path.join(ROOT, "scripts", "test.sh"), "live-failures"], cwd=ROOT,
                          env=dict(os.environ, LIVE_LOG=str(log)), capture_output=True, text=True, timeout=60,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "Connection refused" in out and "side-effect-own-code.log" not in out
    tail = out[out.index("side-effect-launchers.log"):].splitlines()
    assert tail[1:] == ["TASK [The MPIJob Succeeded on digits with rank 0 in the launcher's log]",
                        "  fatal: [localhost]: FAILED! => {", '      "msg": "MPIJob: phase Failed"', "  }"], out


def test_a_failed_short_chaos_run_shows_its_failed_checks(tmp_path):
    log = tmp_path / "test-live.log"
    log.write_text(LOG, encoding="utf-8")
    chaos = tmp_path / "side-effect-chaos.log"
    chaos.write_text(" 3 stop     16:04:59     0s      - s    0  w-1 rank 1 pid 11 (T (stopped))\nfigures: x.json\n"
                     "CHECK FAILED: fault 3 (stop, w-1 rank 1 pid 11 (T (stopped))): no epoch ended after it\n"
                     "trainfleet-job: rc=1 seconds=250\n", encoding="utf-8")
    run = ["bash", os.path.join(ROOT, "scripts", "test.sh"), "live-failures"]
    out = subprocess.run(run, cwd=ROOT, env=dict(os.environ, LIVE_LOG=str(log)), capture_output=True, text=True, timeout=60,
                         check=True).stdout
    heading, failure = out.splitlines()[-2:]
    assert heading.startswith(f"==> the short chaos run's failed checks ({chaos}) ("), out
    assert failure == "CHECK FAILED: fault 3 (stop, w-1 rank 1 pid 11 (T (stopped))): no epoch ended after it", out
    chaos.write_text("check passed: 3 faults\ntrainfleet-job: rc=0 seconds=250\n", encoding="utf-8")
    out = subprocess.run(run, cwd=ROOT, env=dict(os.environ, LIVE_LOG=str(log)), capture_output=True, text=True, timeout=60,
                         check=True).stdout
    assert "failed checks" not in out and "CHECK FAILED" not in out, out


def test_a_failed_compute_suite_without_a_junit_report_shows_its_last_lines(tmp_path):
    """lint and sanity write no JUnit report: their own last lines say why (timed keeps each suite's output)."""
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "suite-times.tsv").write_text("lint\t83\t2\t74\nmolecule-aws\t90\t0\t70\n", encoding="utf-8")
    (reports / "lint.log").write_text(
        "==> ansible-lint (production profile)\n" + "".join("checked %d\n" % i for i in range(40))
        + "\x1b[31myaml[line-length]\x1b[0m: Line too long (175 > 160 characters)\n"
        "roles/platform/tasks/existing/contract.yml:21\n\nFailed: 1 failure(s)\n", encoding="utf-8")
    (reports / "molecule-aws.log").write_text("all fine\n", encoding="utf-8")
    proc = subprocess.run(["bash", os.path.join(ROOT, "scripts", "test.sh"), "compute-failures"], cwd=ROOT,
                          env=dict(os.environ, TRAINFLEET_TEST_REPORTS=str(reports), LIVE_LOG=str(tmp_path / "live.log")),
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "lint failed (exit 2): its last 25 lines" in out and "molecule-aws failed" not in out
    lines = out[out.index("lint failed"):out.index("\n==> the failed tests of the JUnit reports")].strip().splitlines()
    assert lines[1:] == ["checked %d" % i for i in range(18, 40)] + [
        "yaml[line-length]: Line too long (175 > 160 characters)", "roles/platform/tasks/existing/contract.yml:21",
        "Failed: 1 failure(s)"], out
    assert "no failed test in the reports" in out
