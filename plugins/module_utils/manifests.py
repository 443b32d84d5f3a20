# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The objects of a controller's rendered manifests (kubectl kustomize's output), as the platform
applies and deletes them: parsed once, with trainfleet's labels, without the objects left out and
with the webhooks' CA bundle. One function for the training operator, Volcano and the mpi-operator.

Parsing here, with libyaml when PyYAML has it, instead of from_yaml_all and combine in Jinja: the
training operator's manifests are ~3 MB (its CRDs), and Jinja spent ~4 s on them per run; this
takes ~0.3 s."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json

from ansible_collections.trainfleet.training.plugins.module_utils.errors import TrainfleetError

try:
    import yaml
except ImportError:  # the controller always has it (ansible-core requires PyYAML)
    yaml = None

WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
# On the controller's Deployment: the sha256 of every object as rendered when they were applied
# last. A rerun whose rendering has the same fingerprint skips the apply (changed=0, and no 15 s
# of no-op server-side applies of ~40 objects).
FINGERPRINT_ANNOTATION = "trainfleet.io/manifests-sha256"


class ManifestsError(TrainfleetError):
    pass


def _left_out(doc, left_out):
    """True when the object is one of left_out: a name (any kind) or a [kind, name] pair."""
    name = doc["metadata"].get("name")
    for entry in left_out:
        if isinstance(entry, str):
            if entry == name:
                return True
        elif list(entry) == [doc.get("kind"), name]:
            return True
    return False


def controller_objects(text, component, left_out=(), ca_bundle=None):
    """The objects of the multi-document YAML `text`, in order, empty documents dropped.

    Each gets the labels app.kubernetes.io/managed-by=trainfleet and app.kubernetes.io/component=
    `component` (added to its own); those in `left_out` are dropped; with `ca_bundle`, every webhook
    of a webhook configuration gets it as clientConfig.caBundle."""
    if yaml is None:
        raise ManifestsError("PyYAML is not importable")
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when PyYAML has it
    if not isinstance(text, str):
        raise ManifestsError("the manifests must be YAML text, got %s" % type(text).__name__)
    if not isinstance(component, str) or not component:
        raise ManifestsError("component must be a non-empty string, got %r" % (component,))
    try:
        docs = [doc for doc in yaml.load_all(text, Loader=loader) if doc]
    except yaml.YAMLError as exc:
        raise ManifestsError("the manifests are not YAML: %s" % exc)
    out = []
    for doc in docs:
        if not isinstance(doc, dict) or not isinstance(doc.get("metadata"), dict):
            raise ManifestsError("every document must be a Kubernetes object with metadata, got %.200r" % (doc,))
        if _left_out(doc, left_out):
            continue
        labels = doc["metadata"].get("labels") or {}
        labels.update({"app.kubernetes.io/managed-by": "trainfleet", "app.kubernetes.io/component": component})
        doc["metadata"]["labels"] = labels
        if ca_bundle is not None and doc.get("kind") in WEBHOOK_KINDS:
            for webhook in doc.get("webhooks") or []:
                webhook.setdefault("clientConfig", {})["caBundle"] = ca_bundle
        out.append(doc)
    return out


def fingerprinted(resources, deployment):
    """{"fingerprint": sha256 of `resources`, "resources": the same objects with the fingerprint as
    the FINGERPRINT_ANNOTATION of the Deployment named `deployment`}: a plain copy, `resources` is not
    changed."""
    if not isinstance(resources, list) or not all(isinstance(obj, dict) for obj in resources):
        raise ManifestsError("the objects must be a list of Kubernetes objects, got %.200r" % (resources,))
    text = json.dumps(resources, sort_keys=True, separators=(",", ":"), default=str)
    fingerprint = hashlib.sha256(text.encode("utf-8")).hexdigest()
    # The copy is read back from the text: a filter gets ansible-core's lazy containers, and
    # copy.deepcopy of one copies the templating context with it (8 s for one Deployment, 36 s on a
    # loaded machine, even when the apply is then skipped).
    out, found = json.loads(text), False
    for obj in out:
        metadata = obj.get("metadata") or {}
        if obj.get("kind") == "Deployment" and metadata.get("name") == deployment:
            metadata["annotations"] = dict(metadata.get("annotations") or {}, **{FINGERPRINT_ANNOTATION: fingerprint})
            found = True
    if not found:
        raise ManifestsError("no Deployment named %r among the %d objects" % (deployment, len(resources)))
    return {"fingerprint": fingerprint, "resources": out}


def applied_fingerprint(deployments):
    """The fingerprint on the first of `deployments` (k8s_info's resources), "" when none."""
    for obj in deployments or []:
        return ((obj.get("metadata") or {}).get("annotations") or {}).get(FINGERPRINT_ANNOTATION, "")
    return ""


def rolled_out(deployments):
    """True when `deployments` (k8s_info's resources) is not empty and every one has finished its
    rollout: the controller saw the newest spec, and every replica is updated, ready and available."""
    if not deployments:
        return False
    for obj in deployments:
        want = (obj.get("spec") or {}).get("replicas", 1)
        status = obj.get("status") or {}
        if status.get("observedGeneration", 0) < (obj.get("metadata") or {}).get("generation", 0):
            return False
        if any(status.get(key, 0) != want for key in ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas")):
            return False
    return True


def _awaits_ca(configuration):
    """True when a webhook of `configuration` has no caBundle yet."""
    return any(not (webhook.get("clientConfig") or {}).get("caBundle") for webhook in configuration.get("webhooks") or [])


def webhooks_awaiting_ca(resources):
    """[kind, name] of each webhook configuration among `resources` that has a webhook without a
    caBundle: a certificate controller in the cluster injects it after the apply."""
    return [[obj["kind"], obj["metadata"]["name"]] for obj in resources
            if obj.get("kind") in WEBHOOK_KINDS and _awaits_ca(obj)]


def ca_injected(configurations):
    """True when `configurations` (k8s_info's resources) is not empty and every webhook has a caBundle."""
    return bool(configurations) and not any(_awaits_ca(obj) for obj in configurations)
