# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the train step's pods: trainjob_pod, a job's pod settings (module_utils/pod_settings.py);
trainjob_prepull_plan and trainjob_prepull_pods, the image pre-pull's nodes and pods (module_utils/prepull.py);
node_lost_tolerations, the same node-lost tolerations for the controllers the platform installs;
controller_pod_patch, the JSON-patch operations of such a controller's restricted pod;
pods_blocked, the containers that will not start without a human (jobkinds.waiting_is_fatal), for waits
written in YAML."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.trainfleet.training.plugins.module_utils import pod_settings as _pod_settings
from ansible_collections.trainfleet.training.plugins.module_utils.jobkinds import waiting_is_fatal
from ansible_collections.trainfleet.training.plugins.module_utils.pod_settings import PodSettingsError, pod_settings
from ansible_collections.trainfleet.training.plugins.module_utils.prepull import plan, pod_states


def trainjob_pod(settings):
    try:
        return pod_settings(settings)
    except PodSettingsError as exc:
        raise AnsibleFilterError("trainjob_pod: %s" % exc.msg)


def node_lost_tolerations(seconds):
    try:
        return _pod_settings.node_lost_tolerations([], seconds)
    except PodSettingsError as exc:
        raise AnsibleFilterError("node_lost_tolerations: %s" % exc.msg)


def controller_pod_patch(image, resources, readiness_probe, node_lost_toleration_seconds, run_as=_pod_settings.CONTROLLER_RUN_AS):
    try:
        return _pod_settings.controller_patch(image, resources, readiness_probe, node_lost_toleration_seconds, run_as)
    except PodSettingsError as exc:
        raise AnsibleFilterError("controller_pod_patch: %s" % exc.msg)


def trainjob_prepull_plan(nodes, tolerations, image):
    return plan(nodes, tolerations, image)


def trainjob_prepull_pods(pods):
    return pod_states(pods)


def pods_blocked(pods, reasons):
    """``pod/container: reason: message`` of each container of ``pods`` that waits for one of ``reasons``
    and will not start on its own (the kubelet's cache-sync hiccup is not one)."""
    blocked = []
    for pod in pods or []:
        status = pod.get("status") or {}
        for entry in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
            waiting = (entry.get("state") or {}).get("waiting") or {}
            if waiting and waiting_is_fatal(waiting.get("reason"), waiting.get("message"), tuple(reasons)):
                blocked.append("%s/%s: %s: %s" % ((pod.get("metadata") or {}).get("name"), entry.get("name"), waiting.get("reason"),
                                                  waiting.get("message") or ""))
    return blocked


class FilterModule(object):

    def filters(self):
        return {"trainjob_pod": trainjob_pod, "trainjob_prepull_plan": trainjob_prepull_plan,
                "trainjob_prepull_pods": trainjob_prepull_pods, "node_lost_tolerations": node_lost_tolerations,
                "controller_pod_patch": controller_pod_patch, "pods_blocked": pods_blocked}
