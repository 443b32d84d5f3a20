# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters over a controller's manifests (module_utils/manifests.py): controller_objects (the rendered
manifests as the platform applies them), fingerprinted and applied_fingerprint (skip an apply that
would change nothing), rolled_out and webhooks_awaiting_ca / ca_injected (what the waits wait for)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.trainfleet.training.plugins.module_utils import manifests as _manifests


def controller_objects(text, component, left_out=None, ca_bundle=None):
    try:
        return _manifests.controller_objects(str(text), component, left_out or [], ca_bundle)
    except _manifests.ManifestsError as exc:
        raise AnsibleFilterError("controller_objects: %s" % exc)


def fingerprinted(resources, deployment):
    try:
        return _manifests.fingerprinted(resources, deployment)
    except _manifests.ManifestsError as exc:
        raise AnsibleFilterError("fingerprinted: %s" % exc)


class FilterModule(object):

    def filters(self):
        return {
            "controller_objects": controller_objects,
            "fingerprinted": fingerprinted,
            "applied_fingerprint": _manifests.applied_fingerprint,
            "rolled_out": _manifests.rolled_out,
            "webhooks_awaiting_ca": _manifests.webhooks_awaiting_ca,
            "ca_injected": _manifests.ca_injected,
        }
