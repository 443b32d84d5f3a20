#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: background_job
short_description: Run long commands in the background with a log each, and wait for them with progress
description:
  - "O(state=started) starts each job of O(jobs) whose O(jobs[].creates) file does not exist, in a
    session of its own that outlives the task, with everything it prints written to
    O(jobs[].log). The runner ends the log with a result line, C(trainfleet-job: rc=<code> seconds=<n>).
    A job still running from an earlier, interrupted run is not started a second time."
  - O(state=finished) waits until every job of O(jobs) has its result line, at most O(timeout)
    seconds. While it waits it reports the last log line of each running job to the progress
    channel (see the C(trainfleet.training.progress) callback), so a long build shows what it does
    every 30 seconds instead of retry noise. A job that failed fails the task with its name, exit
    code, log path and last O(tail_lines) lines.
  - Builds, debootstrap and C(kind create cluster) of the local platform run this way; several
    jobs started together run in parallel.
version_added: 0.1.0
author:
  - trainfleet developers (!UNKNOWN)
options:
  state:
    description:
      - V(started) starts the jobs; V(finished) waits for them.
    type: str
    choices: [started, finished]
    default: finished
  jobs:
    description: The jobs.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: Name shown in progress lines and messages.
        type: str
        required: true
      log:
        description: Log file of the job (truncated when the job starts).
        type: path
        required: true
      argv:
        description: Command and arguments (O(state=started) only).
        type: list
        elements: str
      creates:
        description: When this path exists the job is not started (its output is already there).
        type: path
      env:
        description: Extra environment variables of the command.
        type: dict
      chdir:
        description: Working directory of the command (default the module's).
        type: path
  timeout:
    description:
      - With O(state=started), seconds after which a job is killed (its result line then says
        C(timeout)). With O(state=finished), seconds to wait at most.
    type: int
    default: 5400
  tail_lines:
    description: Log lines of a failed job returned and shown.
    type: int
    default: 30
notes:
  - Supports check mode - nothing is started and nothing is waited for.
"""

EXAMPLES = r"""
- name: Start the builds
  trainfleet.training.background_job:
    state: started
    jobs:
      - name: etcd
        argv: [/cache/scripts/build-go-binaries.sh, /cache/etcd/v3.5.16, go.etcd.io/etcd/server/v3, v3.5.16]
        log: /cache/logs/etcd-build.log
        creates: /cache/etcd/v3.5.16/bin/.complete

- name: Wait for the builds
  trainfleet.training.background_job:
    state: finished
    jobs:
      - name: etcd
        log: /cache/logs/etcd-build.log
    timeout: 5400
"""

RETURN = r"""
started:
  description: Names of the jobs this task started (O(state=started)).
  returned: always
  type: list
  elements: str
jobs:
  description: Each job's state, C(running), C(succeeded), C(failed) or C(missing) (no log yet).
  returned: always
  type: list
  elements: dict
  sample:
    - {name: etcd, log: /cache/logs/etcd-build.log, state: succeeded, rc: 0, seconds: 212,
       timed_out: false, last_line: "built etcd", tail: []}
progress:
  description: One line on the jobs still running and their last log lines.
  returned: always
  type: str
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.trainfleet.training.plugins.module_utils import background
from ansible_collections.trainfleet.training.plugins.module_utils.progress import ProgressReporter


def _start(module):
    started = []
    for job in module.params["jobs"]:
        if not job.get("argv"):
            module.fail_json(msg="background_job: jobs[].argv is required with state=started (job %r)" % job["name"])
        if job.get("creates") and os.path.exists(job["creates"]):
            continue
        started.append(job["name"])
        if not module.check_mode:
            background.start(job["argv"], job["log"], module.params["timeout"], env=job.get("env"),
                             chdir=job.get("chdir"))
    module.exit_json(changed=bool(started), started=started, jobs=[], progress="")


def _wait(module):
    jobs = [dict(name=j["name"], log=j["log"]) for j in module.params["jobs"]]
    if module.check_mode:
        module.exit_json(changed=False, started=[], jobs=[], progress="")
    reporter = ProgressReporter(min_interval=5.0)
    finished, states = background.wait(jobs, module.params["timeout"], tail_lines=module.params["tail_lines"],
                                       on_progress=reporter.report)
    progress = background.progress_text(states)
    failed = background.failure_message(states)
    if failed:
        module.fail_json(msg=failed, started=[], jobs=states, progress=progress)
    if not finished:
        module.fail_json(msg="still running after %ss: %s" % (module.params["timeout"], progress),
                         started=[], jobs=states, progress=progress)
    module.exit_json(changed=False, started=[], jobs=states, progress=progress)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", choices=["started", "finished"], default="finished"),
            jobs=dict(type="list", elements="dict", required=True, options=dict(
                name=dict(type="str", required=True),
                log=dict(type="path", required=True),
                argv=dict(type="list", elements="str"),
                creates=dict(type="path"),
                env=dict(type="dict"),
                chdir=dict(type="path"),
            )),
            timeout=dict(type="int", default=5400),
            tail_lines=dict(type="int", default=30),
        ),
        supports_check_mode=True,
    )
    if module.params["timeout"] < 1 or module.params["tail_lines"] < 0:
        module.fail_json(msg="background_job: timeout must be >= 1 and tail_lines >= 0 (got %r and %r)"
                         % (module.params["timeout"], module.params["tail_lines"]))
    if module.params["state"] == "started":
        _start(module)
    else:
        _wait(module)


if __name__ == "__main__":
    main()
