# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter input_problems: a step's checks of its inputs beyond their argument spec (module_utils/checks.py
and the steps' own: trainjob_checks.py, launcher_checks.py, webapp_checks.py, dataset_checks.py,
controller_checks.py, step_checks.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.trainfleet.training.plugins.module_utils import (
    controller_checks, dataset_checks, launcher_checks, step_checks, trainjob_checks, webapp_checks)

STEPS = {
    "trainjob": trainjob_checks.problems,
    "pytorchjob": launcher_checks.pytorchjob_problems,
    "mpijob": launcher_checks.mpijob_problems,
    "torchx": launcher_checks.torchx_problems,
    "tensorboard": webapp_checks.tensorboard_problems,
    "jupyter": webapp_checks.jupyter_problems,
    "dataset": dataset_checks.problems,
    "training_operator": controller_checks.training_operator_problems,
    "mpi_operator": controller_checks.mpi_operator_problems,
    "volcano": controller_checks.volcano_problems,
    "storage": step_checks.storage_problems,
    "trainer_image": step_checks.trainer_image_problems,
    "iam": step_checks.iam_problems,
    "eks_cluster": step_checks.eks_cluster_problems,
    "nodegroups": step_checks.nodegroups_problems,
}


def input_problems(values, step, context=None):
    if step not in STEPS:
        raise AnsibleFilterError("input_problems: no step %s (%s)" % (step, ", ".join(sorted(STEPS))))
    try:
        return STEPS[step](values, context or {})
    except KeyError as exc:
        raise AnsibleFilterError("input_problems: %s" % exc.args[0])


class FilterModule(object):

    def filters(self):
        return {"input_problems": input_problems}
