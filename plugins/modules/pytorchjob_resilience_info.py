#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: pytorchjob_resilience_info
short_description: Say whether a PyTorchJob manifest survives the loss of one pod or node
version_added: 0.1.0
description:
  - Reads a rendered PyTorchJob (C(kubeflow.org/v1)) manifest, without any cluster, and lists why
    the job cannot survive the loss of one of its pods (a deleted pod, a pod evicted from a lost
    node).
  - "Risks: a static rendezvous with more than one pod (Master and Workers without an
    C(elasticPolicy)); C(restartPolicy: Never); C(restartPolicy: ExitCode) with more than one pod
    (a survivor whose torchrun gives up exits 1, which ExitCode takes for permanent); a
    C(runPolicy.backoffLimit) below the number of pods; an C(elasticPolicy) with C(maxRestarts) 0 or with C(minReplicas) equal to more than one
    Worker; a trainfleet trainer without C(--snapshot-dir)."
  - With O(warn=true) each risk is also returned as an Ansible warning, so a play that submits such
    a job says so where warnings are shown.
  - Reads only its argument; supports check mode.
author:
  - trainfleet developers (!UNKNOWN)
options:
  manifest:
    description:
      - The PyTorchJob as a dict (for example the role's rendered manifest).
    type: dict
    required: true
  warn:
    description:
      - Also emit each risk as an Ansible warning.
    type: bool
    default: true
"""

EXAMPLES = r"""
- name: Warn when the job cannot survive a lost pod
  trainfleet.training.pytorchjob_resilience_info:
    manifest: "{{ lookup('ansible.builtin.template', 'pytorchjob.yaml.j2') | from_yaml }}"
  register: __resilience

- name: Require a job that survives a lost pod
  ansible.builtin.assert:
    that: __resilience.resilient
    fail_msg: "{{ __resilience.risks | map(attribute='message') | join('; ') }}"
"""

RETURN = r"""
resilient:
  description: Whether no risk was found.
  returned: always
  type: bool
  sample: false
risks:
  description: One entry per risk with C(code) (static-rendezvous, restart-policy-never,
    restart-policy-exit-code, backoff-limit, elastic-max-restarts, elastic-min-equals-replicas,
    no-snapshots) and C(message)
    (what happens and which role variable changes it).
  returned: always
  type: list
  elements: dict
  sample: [{"code": "static-rendezvous", "message": "static rendezvous (Master + 1 Worker(s), no elasticPolicy): ..."}]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.trainfleet.training.plugins.module_utils.jobkinds import PYTORCHJOB
from ansible_collections.trainfleet.training.plugins.module_utils.resilience import lost_pod_risks


def run(module):
    manifest = module.params["manifest"]
    if manifest.get("kind") not in (None, PYTORCHJOB.name):
        module.fail_json(msg="manifest must be a %s, got kind %r" % (PYTORCHJOB.name, manifest.get("kind")))
    risks = lost_pod_risks(manifest)
    name = (manifest.get("metadata") or {}).get("name") or "?"
    if module.params["warn"]:
        for risk in risks:
            module.warn("PyTorchJob %s cannot survive a lost pod: %s" % (name, risk["message"]))
    return {"changed": False, "resilient": not risks, "risks": risks}


def main():
    module = AnsibleModule(
        argument_spec={
            "manifest": {"type": "dict", "required": True},
            "warn": {"type": "bool", "default": True},
        },
        supports_check_mode=True,
    )
    module.exit_json(**run(module))


if __name__ == "__main__":
    main()
