# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters accelerator_demand and accelerator_fit: the train step's accelerator gate
(module_utils/accelerators.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.trainfleet.training.plugins.module_utils import accelerators as _accelerators


def _job(job, name):
    if not isinstance(job, dict):
        raise AnsibleFilterError("%s: expected the job's manifest (a dict), got %s" % (name, type(job).__name__))
    return job


def accelerator_demand(job):
    return _accelerators.demand(_job(job, "accelerator_demand"))


def accelerator_fit(job, nodes):
    if not isinstance(nodes, list):
        raise AnsibleFilterError("accelerator_fit: expected a list of Node objects, got %s" % type(nodes).__name__)
    return _accelerators.check(_job(job, "accelerator_fit"), nodes)


class FilterModule(object):

    def filters(self):
        return {"accelerator_demand": accelerator_demand, "accelerator_fit": accelerator_fit}
