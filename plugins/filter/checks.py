# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter input_problems: a step's checks of its inputs beyond their argument spec (module_utils/checks.py
and the steps' own: trainjob_checks.py, launcher_checks.py, webapp_checks.py, dataset_checks.py,
controller_checks.py, step_checks.py, local_checks.py); filter rendering_problems: what a controller's kustomization promises,
checked on what kubectl rendered (module_utils/controller_rendering.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.trainfleet.training.plugins.module_utils import (
    controller_checks, controller_rendering, dataset_checks, launcher_checks, local_checks, step_checks, trainjob_checks, webapp_checks)

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
    "local_registry": local_checks.local_registry_problems,
    "local_aws": local_checks.local_aws_problems,
    "kind_cluster": local_checks.kind_cluster_problems,
    "kind_images": local_checks.kind_images_problems,
}


def input_problems(values, step, context=None):
    if step not in STEPS:
        raise AnsibleFilterError("input_problems: no step %s (%s)" % (step, ", ".join(sorted(STEPS))))
    try:
        return STEPS[step](values, context or {})
    except KeyError as exc:
        raise AnsibleFilterError("input_problems: %s" % exc.args[0])


def rendering_problems(resources, controller, context):
    if controller not in controller_rendering.CONTROLLERS:
        raise AnsibleFilterError("rendering_problems: no controller %s (%s)" % (controller, ", ".join(sorted(controller_rendering.CONTROLLERS))))
    try:
        return controller_rendering.problems(resources, controller, context)
    except KeyError as exc:
        raise AnsibleFilterError("rendering_problems: no %s in the context" % exc.args[0])


class FilterModule(object):

    def filters(self):
        return {"input_problems": input_problems, "rendering_problems": rendering_problems}
