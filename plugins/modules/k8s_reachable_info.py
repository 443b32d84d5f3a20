#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: k8s_reachable_info
short_description: Tell, within a bounded time, whether a Kubernetes API answers and accepts our credentials
version_added: 0.1.0
description:
  - Asks the API server of the kubeconfig (or O(host)) for C(/version) (whether it answers) and
    C(/api) (whether it accepts our credentials), each request with O(timeout) seconds to connect
    and to read and no retry; the whole answer comes within O(timeout) + 5 seconds, also when the
    server's address drops every packet or an exec credential plugin hangs.
  - Never fails because the cluster cannot be reached (that is the answer, in RV(reachable) and
    RV(reason)); a kubeconfig that does not exist or cannot be loaded is unreachable too.
  - Used by the teardown before it reads or deletes anything on a cluster that may already be gone.
  - Read-only; never changes anything.
author:
  - trainfleet developers (!UNKNOWN)
options:
  timeout:
    description: Seconds to connect and to read, per request (1-300).
    type: int
    default: 10
extends_documentation_fragment:
  - trainfleet.training.k8s_auth
"""

EXAMPLES = r"""
- name: Can the cluster be reached?
  trainfleet.training.k8s_reachable_info:
    kubeconfig: ~/.cache/trainfleet/kubeconfig-trainfleet
    timeout: 10
  register: cluster_api

- name: Say why it is skipped
  ansible.builtin.debug:
    msg: "skipped: {{ cluster_api.reason }}"
  when: not cluster_api.reachable
"""

RETURN = r"""
reachable:
  description: Whether the API server answered (an HTTP 401 or 403 is an answer).
  returned: always
  type: bool
authorized:
  description: Whether it accepted our credentials (C(/api) answered).
  returned: always
  type: bool
server:
  description: URL of the API server (empty when the kubeconfig could not be loaded).
  returned: always
  type: str
version:
  description: The server's C(gitVersion), when it answered.
  returned: always
  type: str
reason:
  description: One sentence saying what was found (why it is unreachable or unauthorized).
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.trainfleet.training.plugins.module_utils.k8s import auth_arg_spec, require_kubernetes
from ansible_collections.trainfleet.training.plugins.module_utils.k8s_reach import probe


def argspec():
    spec = auth_arg_spec()
    spec.update(timeout=dict(type="int", default=10))
    return spec


def main():
    module = AnsibleModule(argument_spec=argspec(), supports_check_mode=True)
    if not 1 <= module.params["timeout"] <= 300:
        module.fail_json(msg="timeout must be 1..300 seconds, got %s" % module.params["timeout"])
    require_kubernetes(module)
    module.exit_json(changed=False, **probe(module.params, module.params["timeout"]))


if __name__ == "__main__":
    main()
