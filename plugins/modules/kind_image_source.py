#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: kind_image_source
short_description: Decide whether the kind node image is built here or pulled, and pull it
version_added: 0.1.0
description:
  - The kind_images role's decision between building every image here (C(build)) and pulling the pinned
    official images (C(pull)); C(auto) pulls when the registry answers, else builds.
  - V(build) runs nothing. V(pull) and V(auto) first look for the images in the local Docker engine
    (C(docker image inspect)); a missing one is pulled by digest (C(docker pull)).
  - V(auto) asks the registry for the first missing image's manifest first (C(docker manifest inspect)),
    bounded by O(probe_timeout) seconds; an error, a refusal or the timeout means V(build). A failed pull
    after a good answer means V(build) too.
  - V(pull) fails when an image cannot be pulled, naming O(variable).
  - In check mode nothing is pulled; the registry is still asked (read-only).
author:
  - trainfleet developers (!UNKNOWN)
options:
  source:
    description: The setting (the kind_images role's C(kind_images_source)).
    type: str
    required: true
    choices: [build, pull, auto]
  images:
    description: Pinned image references to pull (C(repository:tag@sha256:...)); the first is the node image.
    type: list
    elements: str
    default: []
  probe_timeout:
    description: Seconds V(auto) waits for the registry's answer.
    type: int
    default: 5
  pull_timeout:
    description: Seconds each C(docker pull) may take.
    type: int
    default: 900
  docker:
    description: The Docker CLI.
    type: str
    default: docker
  variable:
    description: The name of the setting, used in messages.
    type: str
    default: kind_images_source
notes:
  - Supports check mode.
"""

EXAMPLES = r"""
- name: Decide where the node image comes from
  trainfleet.training.kind_image_source:
    source: auto
    images:
      - kindest/node:v1.32.0@sha256:c48c62eac5da28cdadcf560d1d8616cfa6783b58f0d94cf63ad1bf49600cb027
    probe_timeout: 5
  register: decision

- name: Say which
  ansible.builtin.debug:
    msg: "{{ decision.source }}: {{ decision.reason }}"
"""

RETURN = r"""
source:
  description: The source to use.
  returned: success
  type: str
  sample: build
reason:
  description: Why, naming the setting.
  returned: success
  type: str
  sample: "kind_images_source is auto and the registry did not serve kindest/node@sha256:... within 5s (unreachable: ...)"
missing:
  description: The images that were not in the local Docker engine.
  returned: success
  type: list
  elements: str
pulled:
  description: The images pulled by this call.
  returned: success
  type: list
  elements: str
probe:
  description: The registry probe of V(auto) (C(status) ok/unreachable/timeout, C(detail), C(seconds)); null when none ran.
  returned: success
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.trainfleet.training.plugins.module_utils.image_source import (
    DockerCli,
    SourceError,
    SOURCES,
    decide,
)


def argspec():
    return dict(
        source=dict(type="str", required=True, choices=list(SOURCES)),
        images=dict(type="list", elements="str", default=[]),
        probe_timeout=dict(type="int", default=5),
        pull_timeout=dict(type="int", default=900),
        docker=dict(type="str", default="docker"),
        variable=dict(type="str", default="kind_images_source"),
    )


def main():
    module = AnsibleModule(argument_spec=argspec(), supports_check_mode=True)
    params = module.params
    if not 1 <= params["probe_timeout"] <= 60 or params["pull_timeout"] < 1:
        module.fail_json(msg="probe_timeout must be 1..60 seconds and pull_timeout at least 1 (got %r, %r)"
                         % (params["probe_timeout"], params["pull_timeout"]))
    try:
        result = decide(params["source"], params["images"], DockerCli(params["docker"]),
                        probe_timeout=params["probe_timeout"], pull_timeout=params["pull_timeout"],
                        check_mode=module.check_mode, variable=params["variable"])
    except SourceError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
