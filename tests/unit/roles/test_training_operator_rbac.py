# -*- coding: utf-8 -*-
"""Role training_operator: least-privilege RBAC for the PyTorchJob controller.

- The kustomization template replaces the upstream ClusterRole's rules (no Secret, pods/exec,
  ServiceAccount, Role, RoleBinding, ConfigMap or other job kind), starts the PyTorchJob
  controller only (--enable-scheme=pytorchjob) and grants Secrets in the operator's namespace.
- When the training operator module v1.9.3 is in the Go module cache and kubectl runs, the role's
  own tasks/manifests.yml renders it with `kubectl kustomize` into a temporary cache (its check
  task runs on what kubectl rendered), and the result is compared with the upstream overlay.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import sys

import jinja2
import pytest
import yaml

from ansible.plugins.filter.core import FilterModule as CoreFilters
from ansible.plugins.test.core import TestModule as CoreTests
from ansible_collections.trainfleet.training.plugins.filter.pod import FilterModule as PodFilters

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
ROLE = os.path.join(ROOT, "roles", "training_operator")
VERSION = "v1.9.3"
WEBHOOK = "validator.training-operator.kubeflow.org"
PLAYBOOK_TIMEOUT = 300
# What only the other job kinds (MPIJob above all) use, and what grants reach into other workloads.
NOT_FOR_PYTORCHJOB = {"secrets", "pods/exec", "serviceaccounts", "roles", "rolebindings", "configmaps",
                      "tfjobs", "mpijobs", "xgboostjobs", "paddlejobs", "jaxjobs"}


def _render(name, **variables):
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.join(ROLE, "templates")),
                             trim_blocks=True, undefined=jinja2.StrictUndefined)
    env.filters.update(CoreFilters().filters())
    env.filters.update(("trainfleet.training." + name, f) for name, f in PodFilters().filters().items())
    env.tests.update(CoreTests().tests())

    def lookup(kind, name):
        assert kind == "ansible.builtin.file"
        with open(os.path.join(ROLE, "files", name)) as handle:
            return handle.read().rstrip("\n")

    env.globals["lookup"] = lookup
    return env.get_template(name).render(ansible_managed="managed", **variables)


def _template_vars(tmp_path, init_image="trainfleet/pytorch-init:1.35.0-r4"):
    return dict(_training_operator_overlay_dir="/gomod/training-operator@%s/manifests/overlays/standalone" % VERSION,
                _training_operator_kustomize_dir=str(tmp_path), training_operator_namespace="kubeflow",
                training_operator_deployment="training-operator", _training_operator_init_image=init_image,
                training_operator_module="github.com/kubeflow/training-operator", training_operator_version=VERSION,
                _training_operator_webhook_configuration=WEBHOOK,
                training_operator_manifests_source="go_module", training_operator_image="",
                training_operator_node_lost_toleration_seconds=30, training_operator_gang_scheduler="")


def _patch(kustomization, kind):
    for item in kustomization["patches"]:
        if item["target"]["kind"] == kind:
            return yaml.safe_load(item["patch"])
    raise AssertionError("no patch for %s" % kind)


@pytest.mark.parametrize("init_image", ["trainfleet/pytorch-init:1.35.0-r4", ""])
def test_kustomization_replaces_the_cluster_role_and_enables_pytorchjob_only(tmp_path, init_image):
    kustomization = yaml.safe_load(_render("kustomization.yaml.j2", **_template_vars(tmp_path, init_image)))
    assert "trainfleet-rbac.yaml" in kustomization["resources"]
    rules_patch = _patch(kustomization, "ClusterRole")
    assert [op["op"] for op in rules_patch] == ["replace"] and rules_patch[0]["path"] == "/rules"
    rules = rules_patch[0]["value"]
    resources = {r for rule in rules for r in rule["resources"]}
    assert not resources & NOT_FOR_PYTORCHJOB
    assert {"pytorchjobs", "pytorchjobs/status", "pytorchjobs/finalizers", "pods", "services", "events"} <= resources
    assert all("*" not in rule["verbs"] and "*" not in rule["resources"] for rule in rules)
    updates = [rule for rule in rules if "validatingwebhookconfigurations" in rule["resources"] and "update" in rule["verbs"]]
    assert updates == [{"apiGroups": ["admissionregistration.k8s.io"], "resources": ["validatingwebhookconfigurations"],
                        "resourceNames": [WEBHOOK], "verbs": ["update"]}]
    args = [op for op in _patch(kustomization, "Deployment") if op["path"].endswith("/args")][0]["value"]
    assert args[0] == "--enable-scheme=pytorchjob"
    assert args[1:] == (["--pytorch-init-container-image=" + init_image] if init_image else [])


def test_kustomization_drops_the_v1_mpijob_crd(tmp_path):
    """The mpi-operator v0.6.0 owns mpijobs.kubeflow.org (v2beta1); we never render the v1 one."""
    kustomization = yaml.safe_load(_render("kustomization.yaml.j2", **_template_vars(tmp_path)))
    crd_patches = [p for p in kustomization["patches"] if p["target"]["kind"] == "CustomResourceDefinition"]
    assert len(crd_patches) == 1
    assert crd_patches[0]["target"] == {"group": "apiextensions.k8s.io", "kind": "CustomResourceDefinition",
                                        "name": "mpijobs.kubeflow.org"}
    patch = yaml.safe_load(crd_patches[0]["patch"])
    assert patch["$patch"] == "delete" and patch["metadata"] == {"name": "mpijobs.kubeflow.org"}


def test_manifests_never_apply_or_delete_the_mpijob_crd():
    """The bare overlay (absent path, check mode on a first run) still holds the v1 CRD: the render
    leaves it out, and the rendering check refuses a rendering that holds it."""
    with open(os.path.join(ROLE, "tasks", "manifests.yml")) as handle:
        tasks = yaml.safe_load(handle)
    facts = [t for t in tasks if t.get("name") == "Locate the overlay and the kustomization directory"][0]
    assert facts["ansible.builtin.set_fact"]["_training_operator_foreign_crds"] == ["mpijobs.kubeflow.org"]
    render = [t for t in tasks if t.get("name") == "Render and check the manifests"][0]
    assert render["vars"]["controller_left_out"] == "{{ _training_operator_foreign_crds }}"
    assert render["vars"]["controller_render_context"]["foreign_crds"] == "{{ _training_operator_foreign_crds }}"


@pytest.mark.parametrize("gang", ["", "volcano"])
def test_gang_scheduler_flag_and_podgroup_rights(tmp_path, gang):
    variables = _template_vars(tmp_path)
    variables["training_operator_gang_scheduler"] = gang
    kustomization = yaml.safe_load(_render("kustomization.yaml.j2", **variables))
    args = [op for op in _patch(kustomization, "Deployment") if op["path"].endswith("/args")][0]["value"]
    assert [a for a in args if a.startswith("--gang-scheduler-name")] == (["--gang-scheduler-name=volcano"] if gang else [])
    assert args[0] == "--enable-scheme=pytorchjob"
    rules = _patch(kustomization, "ClusterRole")[0]["value"]
    podgroups = [r for r in rules if "podgroups" in r["resources"] and "scheduling.volcano.sh" in r["apiGroups"]]
    assert len(podgroups) == 1
    assert {"create", "get", "list", "watch", "update", "delete"} <= set(podgroups[0]["verbs"])


def test_hostile_gang_scheduler_stays_one_argument(tmp_path):
    variables = _template_vars(tmp_path)
    variables["training_operator_gang_scheduler"] = "volcano\n          - --enable-scheme=mpijob"
    kustomization = yaml.safe_load(_render("kustomization.yaml.j2", **variables))
    args = [op for op in _patch(kustomization, "Deployment") if op["path"].endswith("/args")][0]["value"]
    assert [a for a in args if a.startswith("--enable-scheme")] == ["--enable-scheme=pytorchjob"]


def test_operator_leaves_a_lost_node_after_the_toleration_seconds(tmp_path):
    """The operator's pod is evicted from a lost node after 30 s, not Kubernetes' 300."""
    kustomization = yaml.safe_load(_render("kustomization.yaml.j2", **_template_vars(tmp_path)))
    ops = [op for op in _patch(kustomization, "Deployment") if op["path"] == "/spec/template/spec/tolerations"]
    assert len(ops) == 1 and ops[0]["op"] == "add"
    assert ops[0]["value"] == [
        {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}
        for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")]


def test_secrets_are_granted_in_the_operator_namespace_only(tmp_path):
    docs = [d for d in yaml.safe_load_all(_render("trainfleet-rbac.yaml.j2", **_template_vars(tmp_path))) if d]
    assert [d["kind"] for d in docs] == ["Role", "RoleBinding"]
    role, binding = docs
    assert role["metadata"]["namespace"] == "kubeflow"
    assert role["rules"] == [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch", "update"]}]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "training-operator", "namespace": "kubeflow"}]


def test_hostile_namespace_stays_one_value(tmp_path):
    evil = "kubeflow\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: injected}"
    variables = _template_vars(tmp_path)
    variables["training_operator_namespace"] = evil
    docs = [d for d in yaml.safe_load_all(_render("trainfleet-rbac.yaml.j2", **variables)) if d]
    assert [d["kind"] for d in docs] == ["Role", "RoleBinding"]
    assert docs[0]["metadata"]["namespace"] == evil


# --------------------------------------------------------------------------- rendered by the role with kubectl


def _module_dir():
    """The pinned module in the Go module cache, fetched the way the role fetches it when missing."""
    go = shutil.which("go")
    if not go:
        return None
    proc = subprocess.run([go, "mod", "download", "-json", "github.com/kubeflow/training-operator@" + VERSION],
                          cwd="/", env=dict(os.environ, GO111MODULE="on", GOFLAGS="-mod=mod"),
                          capture_output=True, text=True, timeout=600, check=False)
    path = json.loads(proc.stdout).get("Dir", "") if proc.returncode == 0 and proc.stdout.strip() else ""
    return path if path and os.path.isdir(os.path.join(path, "manifests")) else None


def _kubectl():
    found = shutil.which("kubectl")
    if found:
        return found
    cache = os.environ.get("TRAINFLEET_CACHE") or os.path.expanduser("~/.cache/trainfleet")
    candidates = sorted(glob.glob(os.path.join(cache, "kubernetes", "*", "bin", "kubectl")))
    return candidates[-1] if candidates else None


def _resources(text):
    return [d for d in yaml.safe_load_all(text) if d]


def _cluster_role_resources(docs):
    role = [d for d in docs if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "training-operator"][0]
    return {r for rule in role["rules"] for r in rule["resources"]}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    return _role_render(tmp_path_factory, {})


@pytest.fixture(scope="module")
def rendered_gang(tmp_path_factory):
    return _role_render(tmp_path_factory, {"training_operator_gang_scheduler": "volcano"})


@pytest.fixture(scope="module")
def rendered_absent(tmp_path_factory):
    return _role_render(tmp_path_factory, {"training_operator_state": "absent"}, checked=False)


def _role_render(tmp_path_factory, extra, checked=True):
    module, kubectl = _module_dir(), _kubectl()
    if not module or not kubectl:
        pytest.skip("needs github.com/kubeflow/training-operator@%s in the Go module cache and kubectl "
                    "(module: %s, kubectl: %s)" % (VERSION, module, kubectl))
    tmp_path = tmp_path_factory.mktemp("training-operator-render")
    playbook = tmp_path / "render.yml"
    playbook.write_text(yaml.safe_dump([{
        "name": "Render the operator manifests with the role",
        "hosts": "localhost", "gather_facts": False, "connection": "local",
        "vars": {"trainfleet_name": "trainfleet",
                 # The parts of the platform contract (roles/platform) the operator role reads.
                 "trainfleet_cluster": {"kubeconfig": str(tmp_path / "no-kubeconfig"), "context": "",
                                        "operator": {"install": True, "image": "", "manifests": "go_module",
                                                     "init_image": "trainfleet/pytorch-init:1.35.0-r4"}},
                 "trainfleet_cache_dir": str(tmp_path / "cache"),
                 "training_operator_cache_dir": str(tmp_path / "cache" / "training-operator"),
                 "training_operator_kubectl": kubectl,
                 "_training_operator_module": {"Dir": module},
                 "_training_operator_init_image": "trainfleet/pytorch-init:1.35.0-r4", **extra},
        "tasks": [
            {"ansible.builtin.include_role": {"name": "trainfleet.training.training_operator", "tasks_from": "manifests.yml"}},
            {"ansible.builtin.copy": {"content": "{{ _training_operator_resources | to_json }}",
                                      "dest": str(tmp_path / "resources.json"), "mode": "0644"}},
        ],
    }], sort_keys=False))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"))
    playbook_bin = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    proc = subprocess.run([playbook_bin if os.path.exists(playbook_bin) else "ansible-playbook", "-i", "localhost,",
                           "-e", json.dumps({"ansible_python_interpreter": sys.executable}), str(playbook)],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=PLAYBOOK_TIMEOUT)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    if checked:
        assert "Check the rendering - the operator's rights are the PyTorchJob controller's only" in out
    ours = json.loads((tmp_path / "resources.json").read_text())
    upstream = subprocess.run([kubectl, "kustomize", os.path.join(module, "manifests", "overlays", "standalone")],
                              capture_output=True, text=True, check=True, timeout=120).stdout
    return ours, _resources(upstream)


def test_role_renders_least_privilege_rbac(rendered):
    ours, upstream = rendered
    before, after = _cluster_role_resources(upstream), _cluster_role_resources(ours)
    # upstream grants Secrets and pods/exec, which the PyTorchJob controller does not need; ours keeps none of it
    assert {"secrets", "pods/exec"} <= before
    assert not after & NOT_FOR_PYTORCHJOB
    assert after <= before | {"pytorchjobs"}
    deployment = [d for d in ours if d["kind"] == "Deployment"][0]
    assert deployment["spec"]["template"]["spec"]["containers"][0]["args"][0] == "--enable-scheme=pytorchjob"
    webhooks = [d["metadata"]["name"] for d in ours if d["kind"] == "ValidatingWebhookConfiguration"]
    assert webhooks == [WEBHOOK]
    role = [d for d in ours if d["kind"] == "Role"][0]
    assert role["metadata"]["namespace"] == deployment["metadata"]["namespace"] == "kubeflow"
    # the same objects as upstream, plus the Role, its binding and the init container ConfigMap
    kinds = sorted((d["kind"], d["metadata"]["name"]) for d in ours)
    added = set(kinds) - set((d["kind"], d["metadata"]["name"]) for d in upstream)
    assert added == {("Role", "training-operator-webhook-cert"), ("RoleBinding", "training-operator-webhook-cert"),
                     ("ConfigMap", "training-operator-init-container")}
    # the v1 MPIJob CRD is mpi-operator's name (v2beta1): never rendered, applied or deleted by us
    removed = set((d["kind"], d["metadata"]["name"]) for d in upstream) - set(kinds)
    assert removed == {("CustomResourceDefinition", "mpijobs.kubeflow.org")}


def test_role_renders_the_gang_scheduler_flag(rendered_gang):
    """With training_operator_gang_scheduler=volcano the role's own check task passes on what kubectl rendered."""
    ours, _upstream = rendered_gang
    deployment = [d for d in ours if d["kind"] == "Deployment"][0]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[:2] == ["--enable-scheme=pytorchjob", "--gang-scheduler-name=volcano"]
    assert not [d for d in ours if d["kind"] == "CustomResourceDefinition" and d["metadata"]["name"] == "mpijobs.kubeflow.org"]
    assert [d for d in ours if d["kind"] == "CustomResourceDefinition" and d["metadata"]["name"] == "pytorchjobs.kubeflow.org"]


def test_absent_path_never_deletes_the_mpijob_crd(rendered_absent):
    """training_operator_state=absent renders the bare upstream overlay (it holds the v1 MPIJob CRD):
    the list it deletes must not hold mpijobs.kubeflow.org (mpi-operator's CRD, and every MPIJob)."""
    ours, upstream = rendered_absent
    assert ("CustomResourceDefinition", "mpijobs.kubeflow.org") in [(d["kind"], d["metadata"]["name"]) for d in upstream]
    names = [(d["kind"], d["metadata"]["name"]) for d in ours]
    assert ("CustomResourceDefinition", "mpijobs.kubeflow.org") not in names
    assert ("CustomResourceDefinition", "pytorchjobs.kubeflow.org") in names
    assert len(names) == len(upstream) - 1


def test_init_container_template_is_restricted(rendered):
    ours, _upstream = rendered
    config = [d for d in ours if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "training-operator-init-container"][0]
    text = re.sub(r"\{\{\.[A-Za-z]+\}\}", "x", config["data"]["initContainer.yaml"])
    init = yaml.safe_load(text)[0]
    assert init["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
