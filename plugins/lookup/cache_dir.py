# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: cache_dir
short_description: The directory of trainfleet's build cache
version_added: 0.1.0
author:
  - trainfleet developers (!UNKNOWN)
description:
  - Returns C($TRAINFLEET_CACHE) of the controller's environment when it is set and not empty, else
    C(~/.cache/trainfleet). The inventories set C(trainfleet_cache_dir) from it, and every role that
    needs the cache falls back to it when C(trainfleet_cache_dir) is not set.
options: {}
"""

EXAMPLES = r"""
- name: Where the cache is
  ansible.builtin.debug:
    msg: "{{ trainfleet_cache_dir | default(lookup('trainfleet.training.cache_dir')) }}"
"""

RETURN = r"""
_raw:
  description: The cache directory (one element).
  type: list
  elements: str
"""

from ansible.plugins.lookup import LookupBase

from ansible_collections.trainfleet.training.plugins.module_utils.cache import cache_dir


class LookupModule(LookupBase):

    def run(self, terms, variables=None, **kwargs):
        return [cache_dir()]
