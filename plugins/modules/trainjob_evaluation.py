#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: trainjob_evaluation
short_description: Run a run's evaluation Job (python -m trainer.evaluate) to its end and read its result
version_added: 0.1.0
description:
  - Runs the batch/v1 Job O(manifest) (rendered by the trainjob role, roles/trainjob/templates/evaluate.yaml.j2),
    waits until it ends, a container cannot start, or O(timeout) seconds pass, and reads the
    C(trainfleet-evaluate:) line its pod printed (trainer/evaluate.py).
  - Idempotent. A Job of the same name that trainfleet made for the same spec and O(run_id) and that
    Succeeded is read again, not run (changed=false). Any other Job of ours under that name is
    deleted and run again. A Job of that name without the label C(app.kubernetes.io/managed-by=trainfleet)
    is never touched; the module fails naming it.
  - Never fails because the model disagrees with the run or the Job failed. That is the result, in
    RV(phase), RV(evaluation) and RV(error). Fails when the cluster cannot be reached or refuses.
  - While it waits, it reports the pod's phase, the time and the last log line on the progress
    channel (the trainfleet.training.progress callback prints one every 30 s).
  - In check mode it reads the Job and says what it would do, and changes nothing.
author:
  - trainfleet developers (!UNKNOWN)
options:
  manifest:
    description: The Job (a dict with metadata.name and metadata.namespace).
    type: dict
    required: true
  run_id:
    description:
      - What identifies the run evaluated (for example its job's completion time). Empty, the Job
        is always run again.
    type: str
    default: ""
  timeout:
    description: Seconds to wait for the Job (1-86400).
    type: int
    default: 900
extends_documentation_fragment:
  - trainfleet.training.k8s_auth
"""

EXAMPLES = r"""
- name: Evaluate the run's model
  trainfleet.training.trainjob_evaluation:
    kubeconfig: ~/.cache/trainfleet/kubeconfig-trainfleet
    manifest: "{{ lookup('ansible.builtin.template', 'evaluate.yaml.j2') | from_yaml }}"
    run_id: "{{ trainjob_result.completion_time }}"
  register: evaluation
"""

RETURN = r"""
action:
  description: create, replace (an older Job of ours deleted first), wait (one was running) or keep.
  returned: always
  type: str
job:
  description: namespace/name of the Job.
  returned: always
  type: str
phase:
  description: Succeeded, Failed, Blocked (a container cannot start), Timeout; null in check mode.
  returned: always
  type: str
evaluation:
  description: The pod's C(trainfleet-evaluate:) line (accuracy, loss, reported_accuracy, difference, agrees, ...), or null.
  returned: always
  type: dict
error:
  description: Why there is no agreeing result (the trainer's error line, the waiting reason, the timeout), or null.
  returned: always
  type: str
log_tail:
  description: The pod's last log lines.
  returned: always
  type: list
  elements: str
pod:
  description: The pod that ran, or null.
  returned: always
  type: str
seconds:
  description: Seconds the module took.
  returned: always
  type: float
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.trainfleet.training.plugins.module_utils.errors import TrainfleetError
from ansible_collections.trainfleet.training.plugins.module_utils.evaluation import runner_for
from ansible_collections.trainfleet.training.plugins.module_utils.k8s import auth_arg_spec, get_api_client, require_kubernetes
from ansible_collections.trainfleet.training.plugins.module_utils.progress import ProgressReporter


def main():
    spec = auth_arg_spec()
    spec.update(manifest=dict(type="dict", required=True), run_id=dict(type="str", default=""),
                timeout=dict(type="int", default=900))
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    manifest = module.params["manifest"]
    metadata = manifest.get("metadata") or {}
    if manifest.get("kind") != "Job" or not metadata.get("name") or not metadata.get("namespace"):
        module.fail_json(msg="manifest must be a batch/v1 Job with metadata.name and metadata.namespace, got kind %s"
                         % manifest.get("kind"))
    if not 1 <= module.params["timeout"] <= 86400:
        module.fail_json(msg="timeout must be 1..86400 seconds, got %s" % module.params["timeout"])
    require_kubernetes(module)
    try:
        runner = runner_for(get_api_client(module.params), manifest, run_id=module.params["run_id"],
                            timeout=module.params["timeout"], report=ProgressReporter(min_interval=10).report)
        module.exit_json(**runner.run(check_mode=module.check_mode))
    except TrainfleetError as exc:
        module.fail_json(msg=exc.msg, **exc.details)


if __name__ == "__main__":
    main()
