# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter trainjob_pod: a training job's pod settings (plugins/module_utils/pod_settings.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.trainfleet.training.plugins.module_utils.pod_settings import PodSettingsError, pod_settings


def trainjob_pod(settings):
    try:
        return pod_settings(settings)
    except PodSettingsError as exc:
        raise AnsibleFilterError("trainjob_pod: %s" % exc.msg)


class FilterModule(object):

    def filters(self):
        return {"trainjob_pod": trainjob_pod}
