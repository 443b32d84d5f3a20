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

try:
    import yaml
except ImportError:  # the controller always has it (ansible-core requires PyYAML)
    yaml = None

WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")


class ManifestsError(Exception):
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
