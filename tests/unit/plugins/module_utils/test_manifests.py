# -*- coding: utf-8 -*-
"""module_utils/manifests.py (filter controller_objects): a controller's rendered manifests as the
platform applies them."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.trainfleet.training.plugins.filter.manifests import FilterModule
from ansible_collections.trainfleet.training.plugins.module_utils import manifests

TEXT = """---
apiVersion: v1
kind: Namespace
metadata:
  name: kubeflow
  labels:
    app: upstream
---
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: mpijobs.kubeflow.org
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: mpijobs.kubeflow.org
  namespace: kubeflow
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: validator
  labels:
webhooks:
  - name: a.example
    clientConfig:
      service: {name: svc, namespace: kubeflow}
  - name: b.example
"""
OURS = {"app.kubernetes.io/managed-by": "trainfleet", "app.kubernetes.io/component": "training-operator"}


def test_every_object_is_labelled_in_order_and_empty_documents_are_dropped():
    objects = manifests.controller_objects(TEXT, "training-operator")
    assert [o["kind"] for o in objects] == ["Namespace", "CustomResourceDefinition", "ServiceAccount",
                                            "ValidatingWebhookConfiguration"]
    assert objects[0]["metadata"]["labels"] == dict(OURS, app="upstream")
    assert all(o["metadata"]["labels"] == OURS for o in objects[1:])
    assert "caBundle" not in str(objects)


def test_left_out_by_name_or_by_kind_and_name():
    by_name = manifests.controller_objects(TEXT, "x", ["mpijobs.kubeflow.org"])
    assert [o["kind"] for o in by_name] == ["Namespace", "ValidatingWebhookConfiguration"]
    by_pair = manifests.controller_objects(TEXT, "x", [["ServiceAccount", "mpijobs.kubeflow.org"], ("Namespace", "other")])
    assert [o["kind"] for o in by_pair] == ["Namespace", "CustomResourceDefinition", "ValidatingWebhookConfiguration"]


def test_every_webhook_gets_the_ca_bundle():
    objects = FilterModule().filters()["controller_objects"](TEXT, "volcano", [], "Q0E=")
    hooks = objects[-1]["webhooks"]
    assert [h["clientConfig"]["caBundle"] for h in hooks] == ["Q0E=", "Q0E="]
    assert hooks[0]["clientConfig"]["service"] == {"name": "svc", "namespace": "kubeflow"}


@pytest.mark.parametrize("text, component, message", [
    ("a: [", "x", "not YAML"),
    ("- 1\n- 2\n", "x", "Kubernetes object with metadata"),
    ("kind: X\n", "x", "Kubernetes object with metadata"),
    (TEXT, "", "component must be a non-empty string"),
])
def test_bad_manifests_are_refused_saying_why(text, component, message):
    with pytest.raises(AnsibleFilterError, match=message):
        FilterModule().filters()["controller_objects"](text, component)
