#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: kind_image_load
short_description: Load images into the nodes of a kind cluster that lack them
version_added: 0.1.0
description:
  - No node of a local kind cluster can pull; images built on this machine reach the nodes with
    C(kind load docker-image). This module asks each node first (C(ctr images list) inside the node
    container) and loads each image only into the nodes that lack it, so a second run changes nothing.
  - In check mode nothing is loaded; RV(loaded) names what would be.
author:
  - trainfleet developers (!UNKNOWN)
options:
  cluster:
    description: The kind cluster's name.
    type: str
    required: true
  images:
    description: Image references in the local Docker engine.
    type: list
    elements: str
    required: true
  kind_bin:
    description:
      - The kind binary. Empty means the newest one the cluster step built under O(cache_dir)C(/kind),
        else C(kind) on PATH.
    type: str
    default: ""
  cache_dir:
    description: The trainfleet cache (where the cluster step builds kind).
    type: path
    default: ""
  docker:
    description: The Docker CLI.
    type: str
    default: docker
  load_timeout:
    description: Seconds each C(kind load docker-image) may take.
    type: int
    default: 600
notes:
  - Supports check mode.
"""

EXAMPLES = r"""
- name: Load the controller's image into the nodes that lack it
  trainfleet.training.kind_image_load:
    cluster: trainfleet
    images: [trainfleet/volcano-scheduler:v1.10.0]
    cache_dir: "{{ trainfleet_cache_dir }}"
"""

RETURN = r"""
nodes:
  description: The cluster's nodes.
  returned: success
  type: list
  elements: str
loaded:
  description: For each image loaded (in check mode, to load), the nodes it went to.
  returned: success
  type: dict
  sample: {"trainfleet/volcano-scheduler:v1.10.0": ["trainfleet-worker"]}
present:
  description: For each image, the nodes that had it already.
  returned: success
  type: dict
kind_bin:
  description: The kind binary used.
  returned: success
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.trainfleet.training.plugins.module_utils.kind_load import KindLoadError, find_kind, load


def argspec():
    return dict(
        cluster=dict(type="str", required=True),
        images=dict(type="list", elements="str", required=True),
        kind_bin=dict(type="str", default=""),
        cache_dir=dict(type="path", default=""),
        docker=dict(type="str", default="docker"),
        load_timeout=dict(type="int", default=600),
    )


def main():
    module = AnsibleModule(argument_spec=argspec(), supports_check_mode=True)
    params = module.params
    kind = params["kind_bin"] or (find_kind(params["cache_dir"]) if params["cache_dir"] else "kind")
    try:
        result = load(params["cluster"], params["images"], kind=kind, docker=params["docker"],
                      check_mode=module.check_mode, load_timeout=params["load_timeout"])
    except KindLoadError as exc:
        module.fail_json(msg=exc.msg, kind_bin=kind)
    module.exit_json(kind_bin=kind, **result)


if __name__ == "__main__":
    main()
