# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter controller_objects: a controller's rendered manifests as the platform applies them
(module_utils/manifests.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.trainfleet.training.plugins.module_utils import manifests as _manifests


def controller_objects(text, component, left_out=None, ca_bundle=None):
    try:
        return _manifests.controller_objects(str(text), component, left_out or [], ca_bundle)
    except _manifests.ManifestsError as exc:
        raise AnsibleFilterError("controller_objects: %s" % exc)


class FilterModule(object):

    def filters(self):
        return {"controller_objects": controller_objects}
