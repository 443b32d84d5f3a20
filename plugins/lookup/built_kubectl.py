# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: built_kubectl
short_description: The kubectl the cluster step built, else kubectl on the PATH
version_added: 0.1.0
author:
  - trainfleet developers (!UNKNOWN)
description:
  - Looks for C(<cache>/kubernetes/<version>/bin/kubectl) (what the kind_images role builds) on the
    controller and returns the executable one of the highest version; C(kubectl) when there is none.
  - Used to render the controllers' kustomizations and in the commands the jupyter and tensorboard
    steps print.
options:
  _terms:
    description: The cache directory (C(trainfleet_cache_dir)); one term.
    required: true
"""

EXAMPLES = r"""
- name: Show the nodes with the kubectl the cluster step built
  ansible.builtin.command:
    argv: ["{{ lookup('trainfleet.training.built_kubectl', trainfleet_cache_dir) }}", get, nodes]
  changed_when: false
"""

RETURN = r"""
_raw:
  description: The kubectl path, or C(kubectl) (one element).
  type: list
  elements: str
"""

from ansible.errors import AnsibleError
from ansible.plugins.lookup import LookupBase

from ansible_collections.trainfleet.training.plugins.module_utils.cache import built_kubectl


class LookupModule(LookupBase):

    def run(self, terms, variables=None, **kwargs):
        if len(terms) != 1 or not isinstance(terms[0], str) or not terms[0]:
            raise AnsibleError("trainfleet.training.built_kubectl takes one term, the cache directory; got %r" % (terms,))
        return [built_kubectl(terms[0])]
