# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter trainjob_script_configmap: a local directory's files as the job's ConfigMap (module_utils/script_dir.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.trainfleet.training.plugins.module_utils.script_dir import ScriptDirError, script_configmap


def trainjob_script_configmap(path, name, namespace, labels=None):
    try:
        return script_configmap(path, name, namespace, labels)
    except ScriptDirError as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule(object):

    def filters(self):
        return {"trainjob_script_configmap": trainjob_script_configmap}
