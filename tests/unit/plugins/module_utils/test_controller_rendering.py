# -*- coding: utf-8 -*-
"""module_utils/controller_rendering.py (filter rendering_problems): what a controller's kustomization
promises, checked on the rendered objects before anything is applied.

Pure data: a rendering that keeps every promise has no problem; each broken promise (a right too
many, a flag lost, a pulled image, a host path, a foreign CRD) gives the one message, naming the
role's settings and quoting what the rendering holds. The roles run the same check on what kubectl
rendered from the pinned modules in tests/unit/roles (test_training_operator_rbac.py,
test_mpi_operator_role.py, test_volcano_role.py).
"""

from __future__ import absolute_import, division, print_function

import copy
import os

import pytest
import yaml

from ansible.errors import AnsibleFilterError

from ansible_collections.trainfleet.training.plugins.filter.checks import FilterModule

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
rendering_problems = FilterModule().filters()["rendering_problems"]


def obj(kind, name, namespace=None, **rest):
    meta = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return dict({"kind": kind, "metadata": meta}, **rest)


def deployment(name, namespace, containers, pod_security=None, volumes=None):
    spec = {"containers": containers, "securityContext": pod_security or {"runAsNonRoot": True}}
    if volumes is not None:
        spec["volumes"] = volumes
    return obj("Deployment", name, namespace, spec={"template": {"spec": spec}})


# --------------------------------------------------------------------------- the training operator

TO_CONTEXT = {"version": "v1.9.3", "overlay": "manifests/overlays/standalone", "namespace": "kubeflow",
              "deployment": "training-operator", "gang_scheduler": "", "foreign_crds": ["mpijobs.kubeflow.org"],
              "webhook_configuration": "validator.training-operator.kubeflow.org"}


def training_operator(gang=""):
    rules = [{"apiGroups": ["kubeflow.org"], "resources": ["pytorchjobs", "pytorchjobs/status"], "verbs": ["get", "list", "update"]},
             {"apiGroups": [""], "resources": ["pods", "services"], "verbs": ["create", "delete", "get", "list", "watch"]}]
    args = ["--enable-scheme=pytorchjob"]
    if gang:
        rules.append({"apiGroups": ["scheduling.volcano.sh"], "resources": ["podgroups"],
                      "verbs": ["create", "get", "list", "watch", "update", "delete", "patch"]})
        args.append("--gang-scheduler-name=" + gang)
    return [obj("CustomResourceDefinition", "pytorchjobs.kubeflow.org"),
            obj("ClusterRole", "training-operator", rules=rules),
            obj("RoleBinding", "training-operator-webhook-cert", "kubeflow", subjects=[{"namespace": "kubeflow"}]),
            obj("ValidatingWebhookConfiguration", "validator.training-operator.kubeflow.org"),
            deployment("training-operator", "kubeflow", [{"image": "kubeflow/training-operator:v1.9.3", "args": args}])]


def rules_of(resources, name="training-operator"):
    return [r for r in resources if r["kind"] == "ClusterRole" and r["metadata"]["name"] == name][0]["rules"]


def args_of(resources):
    return [r for r in resources if r["kind"] == "Deployment"][0]["spec"]["template"]["spec"]["containers"][0]["args"]


def test_training_operator_rendering_that_keeps_its_promises_passes():
    assert rendering_problems(training_operator(), "training_operator", TO_CONTEXT) == []
    assert rendering_problems(training_operator("volcano"), "training_operator", dict(TO_CONTEXT, gang_scheduler="volcano")) == []


def _secrets(res):
    rules_of(res)[1]["resources"].append("secrets")


def _exec(res):
    rules_of(res)[1]["resources"].append("pods/exec")


def _other_kind(res):
    rules_of(res)[0]["resources"].append("mpijobs")


def _wildcard(res):
    rules_of(res)[0]["verbs"] = ["*"]


def _no_scheme(res):
    args_of(res)[0] = "--enable-scheme=tfjob"


def _two_schemes(res):
    args_of(res).append("--enable-scheme=tfjob")


def _extra_webhook(res):
    res.append(obj("ValidatingWebhookConfiguration", "another"))


def _binding_elsewhere(res):
    [r for r in res if r["kind"] == "RoleBinding"][0]["subjects"][0]["namespace"] = "default"


def _foreign_crd(res):
    res.append(obj("CustomResourceDefinition", "mpijobs.kubeflow.org"))


def _gang_flag_unasked(res):
    args_of(res).append("--gang-scheduler-name=volcano")


def _no_cluster_role(res):
    res[:] = [r for r in res if r["kind"] != "ClusterRole"]


@pytest.mark.parametrize("breaks", [_secrets, _exec, _other_kind, _wildcard, _no_scheme, _two_schemes, _extra_webhook,
                                    _binding_elsewhere, _foreign_crd, _gang_flag_unasked, _no_cluster_role])
def test_training_operator_rendering_that_breaks_a_promise_is_refused(breaks):
    resources = training_operator()
    breaks(resources)
    problems = rendering_problems(resources, "training_operator", TO_CONTEXT)
    assert len(problems) == 1
    assert problems[0].startswith("The rendered training operator manifests do not have the least-privilege RBAC")
    assert 'training_operator_version "v1.9.3"' in problems[0] and "(none of [\"mpijobs.kubeflow.org\"])" in problems[0]


def test_training_operator_gang_scheduling_needs_its_flag_and_every_podgroup_verb():
    context = dict(TO_CONTEXT, gang_scheduler="volcano")
    assert rendering_problems(training_operator(), "training_operator", context)  # no flag, no rule
    resources = training_operator("volcano")
    rules_of(resources)[-1]["verbs"].remove("delete")
    assert 'training_operator_gang_scheduler "volcano"' in rendering_problems(resources, "training_operator", context)[0]


# --------------------------------------------------------------------------- the MPI operator

MPI_CONTEXT = {"version": "v0.6.0", "overlay": "manifests/overlays/standalone", "namespace": "mpi-operator",
               "deployment": "mpi-operator", "image": "trainfleet/mpi-operator:v0.6.0-r1"}


def mpi_operator():
    container = {"image": MPI_CONTEXT["image"], "imagePullPolicy": "IfNotPresent",
                 "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}
    return [obj("CustomResourceDefinition", "mpijobs.kubeflow.org", spec={"versions": [{"name": "v2beta1", "served": True}]}),
            obj("ClusterRole", "mpi-operator", rules=[{"resources": ["mpijobs", "pods"], "verbs": ["get", "list", "watch"]}]),
            deployment("mpi-operator", "mpi-operator", [container],
                       {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}})]


def _container(res):
    return res[2]["spec"]["template"]["spec"]["containers"][0]


@pytest.mark.parametrize("breaks", [
    lambda res: res[0]["spec"]["versions"][0].update(name="v1"),
    lambda res: res[2]["metadata"].update(namespace="default"),
    lambda res: _container(res).update(image="mpioperator/mpi-operator:0.6.0"),
    lambda res: _container(res).update(imagePullPolicy="Always"),
    lambda res: _container(res)["securityContext"].pop("allowPrivilegeEscalation"),
    lambda res: _container(res)["securityContext"].update(capabilities={}),
    lambda res: res[2]["spec"]["template"]["spec"]["securityContext"].pop("runAsNonRoot"),
    lambda res: res[2]["spec"]["template"]["spec"]["securityContext"].pop("seccompProfile"),
    lambda res: res[1]["rules"][0]["resources"].append("pods/exec"),
    lambda res: res[1]["rules"][0]["resources"].append("leases"),
    lambda res: res[1]["rules"][0]["verbs"].append("*"),
    lambda res: res[1]["rules"][0]["resources"].append("*"),
    lambda res: res.pop(0),
], ids=["crd-version", "namespace", "image", "pull-policy", "escalation", "capabilities", "non-root", "seccomp", "exec",
        "leases", "any-verb", "any-resource", "no-crd"])
def test_mpi_operator_rendering_that_breaks_a_promise_is_refused(breaks):
    assert rendering_problems(mpi_operator(), "mpi_operator", MPI_CONTEXT) == []
    resources = mpi_operator()
    breaks(resources)
    problems = rendering_problems(resources, "mpi_operator", MPI_CONTEXT)
    assert len(problems) == 1 and problems[0].startswith("The rendered mpi-operator manifests are not what")
    assert 'mpi_operator_deployment "mpi-operator"' in problems[0]


# --------------------------------------------------------------------------- Volcano

VC_CONTEXT = {"version": "v1.11.2", "manifest": "installer/volcano-development.yaml", "namespace": "volcano",
              "components": {"scheduler": "volcano-scheduler", "admission": "volcano-admission"},
              "images": {"scheduler": "trainfleet/vc-scheduler:v1.11.2-r1", "admission": "trainfleet/vc-admission:v1.11.2-r1"},
              "webhook_names": ["volcano-admission-service-jobs-mutate"], "admissions": ["/jobs/mutate"]}


def volcano():
    def container(component):
        return {"image": VC_CONTEXT["images"][component], "imagePullPolicy": "IfNotPresent",
                "securityContext": {"allowPrivilegeEscalation": False}}
    return ([obj("Namespace", "volcano"), obj("MutatingWebhookConfiguration", "volcano-admission-service-jobs-mutate"),
             obj("ClusterRole", "volcano-admission", rules=[{"resources": ["pods"], "verbs": ["get"]}])]
            + [obj("CustomResourceDefinition", name) for name in
               ("podgroups.scheduling.volcano.sh", "queues.scheduling.volcano.sh", "jobs.batch.volcano.sh")]
            + [deployment("volcano-" + c, "volcano", [container(c)], volumes=[{"name": "certs", "secret": {}}])
               for c in ("scheduler", "admission")])


def _deployments(res):
    return [r for r in res if r["kind"] == "Deployment"]


@pytest.mark.parametrize("breaks", [
    lambda res: res.remove(_deployments(res)[0]),
    lambda res: _deployments(res)[0]["metadata"].update(namespace="volcano-system"),
    lambda res: res.append(obj("Job", "volcano-admission-init", "volcano")),
    lambda res: res.append(obj("Namespace", "volcano-monitoring")),
    lambda res: res.append(obj("ValidatingWebhookConfiguration", "volcano-admission-service-pods-validate")),
    lambda res: _deployments(res)[0]["spec"]["template"]["spec"]["containers"][0].update(image="volcanosh/vc-scheduler:v1.11.2"),
    lambda res: _deployments(res)[0]["spec"]["template"]["spec"]["containers"][0].pop("imagePullPolicy"),
    lambda res: _deployments(res)[1]["spec"]["template"]["spec"]["containers"][0].update(securityContext={}),
    lambda res: _deployments(res)[1]["spec"]["template"]["spec"].update(securityContext={}),
    lambda res: _deployments(res)[1]["spec"]["template"]["spec"]["volumes"].append({"name": "host", "hostPath": {"path": "/"}}),
    lambda res: res.remove([r for r in res if r["metadata"]["name"] == "jobs.batch.volcano.sh"][0]),
    lambda res: res[2]["rules"][0]["resources"].append("secrets"),
], ids=["deployments", "namespace", "job", "namespaces", "webhooks", "image", "pull-policy", "escalation", "non-root",
        "host-path", "crds", "admission-rights"])
def test_volcano_rendering_that_breaks_a_promise_is_refused(breaks):
    assert rendering_problems(volcano(), "volcano", VC_CONTEXT) == []
    resources = copy.deepcopy(volcano())
    breaks(resources)
    problems = rendering_problems(resources, "volcano", VC_CONTEXT)
    assert len(problems) == 1 and problems[0].startswith("The rendered Volcano manifests are not what")
    assert 'volcano_admissions ["/jobs/mutate"]' in problems[0]


def test_unknown_controller_or_missing_setting_is_a_named_error():
    with pytest.raises(AnsibleFilterError, match="no controller kueue"):
        rendering_problems([], "kueue", {})
    with pytest.raises(AnsibleFilterError, match="no image in the context"):
        rendering_problems(mpi_operator(), "mpi_operator", {k: v for k, v in MPI_CONTEXT.items() if k != "image"})


def test_each_role_hands_over_the_context_its_check_reads():
    """The context each role's manifests.yml passes is the one the check reads (YAML and Python cannot drift)."""
    wanted = {"training_operator": TO_CONTEXT, "mpi_operator": MPI_CONTEXT, "volcano": VC_CONTEXT}
    for role, context in wanted.items():
        with open(os.path.join(ROOT, "roles", role, "tasks", "manifests.yml")) as handle:
            tasks = yaml.safe_load(handle)
        render = [t for t in tasks if t.get("ansible.builtin.include_role", {}).get("tasks_from") == "render"]
        assert len(render) == 1, role
        assert render[0]["vars"]["controller_caller"] == role
        assert sorted(render[0]["vars"]["controller_render_context"]) == sorted(context), role


def test_the_filter_documents_every_controller():
    with open(os.path.join(ROOT, "plugins", "filter", "rendering_problems.yml")) as handle:
        doc = yaml.safe_load(handle)["DOCUMENTATION"]
    assert sorted(doc["options"]["controller"]["choices"]) == ["mpi_operator", "training_operator", "volcano"]
