# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a controller's kustomization promises, checked on what kubectl rendered.

roles/controller/tasks/render.yml runs these for roles/training_operator, mpi_operator and volcano
before anything is applied: a new upstream version or an overlay change that moves these objects (a
patch that no longer applies, a new right, a new pulled image) is refused here. Each check returns
its one message, naming the role's settings and what the rendering holds, or nothing.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.trainfleet.training.plugins.module_utils.checks import q, unique

GANG_VERBS = ("create", "get", "list", "watch", "update", "delete")
# What the PyTorchJob controller never needs: the other job kinds and what would let it escalate.
NOT_PYTORCHJOB = ("tfjobs", "mpijobs", "xgboostjobs", "paddlejobs", "jaxjobs", "serviceaccounts", "roles", "rolebindings",
                  "configmaps")
VOLCANO_CRDS = ("podgroups.scheduling.volcano.sh", "queues.scheduling.volcano.sh", "jobs.batch.volcano.sh")


def _of(resources, kind, name=None):
    return [r for r in resources if r.get("kind") == kind and (name is None or r.get("metadata", {}).get("name") == name)]


def _names(resources, *kinds):
    return [r["metadata"]["name"] for r in resources if r.get("kind") in kinds]


def _rules(resources, name):
    roles = _of(resources, "ClusterRole", name)
    return (roles[0] if roles else {}).get("rules", [])


def _all(rules, key):
    return [item for rule in rules for item in rule.get(key, [])]


def _pod(deployment):
    return deployment.get("spec", {}).get("template", {}).get("spec", {})


def training_operator(resources, c):
    """context: version, overlay, namespace, deployment, gang_scheduler, foreign_crds, webhook_configuration."""
    cluster_role = _of(resources, "ClusterRole", "training-operator")
    rules = _rules(resources, "training-operator")
    deployments = _of(resources, "Deployment", c["deployment"])
    deployment = deployments[0] if deployments else {}
    containers = _pod(deployment).get("containers") or [{}]
    args = containers[0].get("args", [])
    webhooks = _names(resources, "ValidatingWebhookConfiguration")
    crds = _names(resources, "CustomResourceDefinition")
    gang = c["gang_scheduler"]
    binding = _of(resources, "RoleBinding", "training-operator-webhook-cert")
    podgroup_verbs = set(_all([r for r in rules if "scheduling.volcano.sh" in r.get("apiGroups", [])
                               and "podgroups" in r.get("resources", [])], "verbs")) & set(GANG_VERBS)
    ok = (len(cluster_role) == 1
          and not set(_all(rules, "resources")) & {"secrets", "pods/exec"}
          and not set(_all(rules, "resources")) & set(NOT_PYTORCHJOB)
          and "*" not in _all(rules, "verbs")
          and "--enable-scheme=pytorchjob" in args
          and len([a for a in args if a.startswith("--enable-scheme=")]) == 1
          and webhooks == [c["webhook_configuration"]]
          and len(binding) == 1 and bool(deployment)
          and binding[0].get("subjects", [{}])[0].get("namespace") == deployment.get("metadata", {}).get("namespace")
          and not set(crds) & set(c["foreign_crds"])
          and [a for a in args if a.startswith("--gang-scheduler-name=")] == (["--gang-scheduler-name=" + gang] if gang else [])
          and (not gang or len(podgroup_verbs) == len(GANG_VERBS)))
    if ok:
        return []
    return ["The rendered training operator manifests do not have the least-privilege RBAC of templates/kustomization.yaml.j2 "
            "(training_operator_version %s, training_operator_overlay %s, training_operator_namespace %s): ClusterRole "
            "training-operator rules %s, controller args %s, webhook configurations %s, CRDs %s (none of %s), "
            "training_operator_gang_scheduler %s (its flag and the podgroups rule)."
            % (q(c["version"]), q(c["overlay"]), q(c["namespace"]), q(rules), q(args), q(webhooks), q(crds), q(c["foreign_crds"]),
               q(gang))]


def mpi_operator(resources, c):
    """context: version, overlay, namespace, deployment, image."""
    crd = _of(resources, "CustomResourceDefinition", "mpijobs.kubeflow.org")
    deployment = _of(resources, "Deployment", c["deployment"])
    pod = _pod(deployment[0]) if deployment else {}
    container = (pod.get("containers") or [{}])[0]
    csc, psc = container.get("securityContext", {}), pod.get("securityContext", {})
    cluster_role = _of(resources, "ClusterRole", "mpi-operator")
    rules = _rules(resources, "mpi-operator")
    versions = crd[0].get("spec", {}).get("versions", []) if crd else []
    ok = (len(crd) == 1 and len([v for v in versions if v.get("name") == "v2beta1" and v.get("served")]) == 1
          and len(deployment) == 1 and deployment[0].get("metadata", {}).get("namespace") == c["namespace"]
          and container.get("image", "") == c["image"] and container.get("imagePullPolicy", "") == "IfNotPresent"
          and csc.get("allowPrivilegeEscalation", True) is False
          and csc.get("capabilities", {}).get("drop", []) == ["ALL"]
          and psc.get("runAsNonRoot", False) is True
          and psc.get("seccompProfile", {}).get("type", "") == "RuntimeDefault"
          and len(cluster_role) == 1
          and not set(_all(rules, "resources")) & {"pods/exec", "endpoints", "customresourcedefinitions", "leases"}
          and "*" not in _all(rules, "verbs") and "*" not in _all(rules, "resources"))
    if ok:
        return []
    return ["The rendered mpi-operator manifests are not what templates/kustomization.yaml.j2 promises (mpi_operator_version %s, "
            "mpi_operator_overlay %s, mpi_operator_namespace %s, mpi_operator_deployment %s): CRD versions %s, Deployment namespace "
            "%s, image %s, ClusterRole mpi-operator rules %s."
            % (q(c["version"]), q(c["overlay"]), q(c["namespace"]), q(c["deployment"]), q([v.get("name") for v in versions]),
               q(deployment[0].get("metadata", {}).get("namespace", "") if deployment else ""), q(container.get("image", "")),
               q(rules))]


def volcano(resources, c):
    """context: version, manifest, namespace, components (name -> Deployment), images (name -> image), webhook_names,
    admissions."""
    deployments = _of(resources, "Deployment")
    pods = [_pod(d) for d in deployments]
    containers = [container for pod in pods for container in pod.get("containers", [])]
    namespaces = unique(r["metadata"]["namespace"] for r in resources if "namespace" in r.get("metadata", {}))
    webhooks = _names(resources, "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
    crds = _names(resources, "CustomResourceDefinition")
    deployment_names = [d["metadata"]["name"] for d in deployments]
    ok = (sorted(deployment_names) == sorted(c["components"].values())
          and namespaces == [c["namespace"]]
          and not _names(resources, "Job", "CronJob", "DaemonSet")
          and _names(resources, "Namespace") == [c["namespace"]]
          and sorted(webhooks) == sorted(c["webhook_names"])
          and sorted(x.get("image", "") for x in containers) == sorted(c["images"].values())
          and unique(x.get("imagePullPolicy", "") for x in containers) == ["IfNotPresent"]
          and unique(x.get("securityContext", {}).get("allowPrivilegeEscalation", True) for x in containers) == [False]
          and unique(p.get("securityContext", {}).get("runAsNonRoot", False) for p in pods) == [True]
          and not [v for p in pods for v in p.get("volumes", []) if "hostPath" in v]
          and set(VOLCANO_CRDS) <= set(crds)
          and not set(_all(_rules(resources, "volcano-admission"), "resources")) & {"certificatesigningrequests", "secrets"})
    if ok:
        return []
    return ["The rendered Volcano manifests are not what templates/kustomization.yaml.j2 promises (volcano_version %s, "
            "volcano_manifest %s, volcano_namespace %s; the manifest's own namespace is volcano-system): Deployments %s, "
            "namespaces %s, webhook configurations %s (volcano_admissions %s), images %s, CRDs %s."
            % (q(c["version"]), q(c["manifest"]), q(c["namespace"]), q(deployment_names), q(namespaces), q(webhooks),
               q(c["admissions"]), q([x.get("image", "") for x in containers]), q(crds))]


CONTROLLERS = {"training_operator": training_operator, "mpi_operator": mpi_operator, "volcano": volcano}


def problems(resources, controller, context):
    """The rendering's problem, as a list (empty when it keeps every promise)."""
    return CONTROLLERS[controller](resources, context)
