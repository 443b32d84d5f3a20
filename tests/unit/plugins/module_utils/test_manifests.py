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


DEPLOY = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "ctl", "namespace": "ns"},
          "spec": {"replicas": 2}}


def test_the_fingerprint_goes_on_the_named_deployment_and_follows_the_rendering():
    objects = manifests.controller_objects(TEXT, "x") + [DEPLOY]
    before = repr(objects)
    out = FilterModule().filters()["fingerprinted"](objects, "ctl")
    assert repr(objects) == before  # the input is not changed
    assert len(out["fingerprint"]) == 64 and out["resources"][:-1] == objects[:-1]
    assert out["resources"][-1]["metadata"]["annotations"] == {manifests.FINGERPRINT_ANNOTATION: out["fingerprint"]}
    # the same rendering gives the same fingerprint; any change gives another one
    assert manifests.fingerprinted(objects, "ctl")["fingerprint"] == out["fingerprint"]
    changed = objects[:-1] + [dict(DEPLOY, spec={"replicas": 3})]
    assert manifests.fingerprinted(changed, "ctl")["fingerprint"] != out["fingerprint"]
    # what the cluster returns is read back; nothing applied yet reads as ""
    assert manifests.applied_fingerprint([out["resources"][-1]]) == out["fingerprint"]
    assert manifests.applied_fingerprint([DEPLOY]) == "" and manifests.applied_fingerprint([]) == ""


class _Lazy(dict):
    """Stands for ansible-core's lazy containers: deep-copying one copies the templating context."""

    def __deepcopy__(self, memo):
        raise AssertionError("deep-copied a filter input")


def test_the_fingerprinted_objects_are_a_plain_copy_never_a_deep_copy_of_the_input():
    objects = [_Lazy(kind="Service", metadata=_Lazy(name="svc")), _Lazy(DEPLOY, metadata=_Lazy(name="ctl"))]
    out = manifests.fingerprinted(objects, "ctl")
    assert out["resources"] == [{"kind": "Service", "metadata": {"name": "svc"}},
                                dict(DEPLOY, metadata={"name": "ctl", "annotations": {
                                    manifests.FINGERPRINT_ANNOTATION: out["fingerprint"]}})]
    assert not any(isinstance(part, _Lazy) for obj in out["resources"] for part in (obj, obj["metadata"]))
    assert "annotations" not in objects[1]["metadata"]


@pytest.mark.parametrize("objects, name, message", [
    ([DEPLOY], "other", "no Deployment named 'other' among the 1 objects"),
    ([{"kind": "Service", "metadata": {"name": "ctl"}}], "ctl", "no Deployment named 'ctl'"),
    ("text", "ctl", "must be a list of Kubernetes objects"),
])
def test_a_fingerprint_without_its_deployment_is_refused(objects, name, message):
    with pytest.raises(AnsibleFilterError, match=message):
        FilterModule().filters()["fingerprinted"](objects, name)


def _status(**status):
    return dict(DEPLOY, metadata={"name": "ctl", "generation": 3}, status=dict({"observedGeneration": 3}, **status))


@pytest.mark.parametrize("deployments, done", [
    ([], False),
    ([_status(replicas=2, updatedReplicas=2, readyReplicas=2, availableReplicas=2)], True),
    ([_status(replicas=3, updatedReplicas=2, readyReplicas=2, availableReplicas=2)], False),  # an old pod remains
    ([_status(replicas=2, updatedReplicas=1, readyReplicas=2, availableReplicas=2)], False),
    ([_status(replicas=2, updatedReplicas=2, readyReplicas=1, availableReplicas=1)], False),
    ([_status(replicas=2, updatedReplicas=2, readyReplicas=2, availableReplicas=2, observedGeneration=2)], False),
    ([_status(replicas=2, updatedReplicas=2, readyReplicas=2, availableReplicas=2), _status()], False),
])
def test_rolled_out_only_when_every_replica_of_every_deployment_is_new_and_available(deployments, done):
    assert FilterModule().filters()["rolled_out"](deployments) is done


def test_webhooks_awaiting_ca_are_those_rendered_without_one():
    objects = manifests.controller_objects(TEXT, "x")
    assert manifests.webhooks_awaiting_ca(objects) == [["ValidatingWebhookConfiguration", "validator"]]
    assert manifests.webhooks_awaiting_ca(manifests.controller_objects(TEXT, "x", [], "Q0E=")) == []
    half = objects[-1]
    half["webhooks"][0]["clientConfig"]["caBundle"] = "Q0E="
    assert manifests.webhooks_awaiting_ca([half]) == [["ValidatingWebhookConfiguration", "validator"]]
    assert manifests.ca_injected([half]) is False and manifests.ca_injected([]) is False
    half["webhooks"][1]["clientConfig"] = {"caBundle": "Q0E="}
    assert manifests.ca_injected([half]) is True
