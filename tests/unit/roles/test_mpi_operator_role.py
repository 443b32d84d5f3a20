# -*- coding: utf-8 -*-
"""Role mpi_operator: kubeflow.org/v2beta1 MPIJob controller from the pinned Go module.

- The kustomization template puts our image in (never pulled), restricts the controller's pod
  (non-root, no privilege escalation, no capability, RuntimeDefault seccomp, read-only root),
  replaces the upstream ClusterRole's rules with what the v0.6.0 controller calls (no pods/exec,
  endpoints, CRD creation, leases or `*`), grants its leader-election lease in its namespace only,
  and adds --gang-scheduling=volcano (with PodGroup rights) only when asked.
- Hostile values stay one YAML value.
- Preflight refuses bad inputs naming the variable.
- When the module is in the Go module cache and kubectl runs, the role's own tasks render it with
  `kubectl kustomize` (its check task runs on what kubectl rendered), a second run writes nothing,
  and the result is compared with the upstream overlay. In check mode with no cluster the role
  renders the bare overlay and says why nothing is applied.
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
ROLE = os.path.join(ROOT, "roles", "mpi_operator")
MODULE = "github.com/kubeflow/mpi-operator"
VERSION = "v0.6.0"
IMAGE = "trainfleet/mpi-operator:v0.6.0-r1"
PLAYBOOK_TIMEOUT = 300
EVIL = "mpi\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: injected}"


def render(name, **variables):
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.join(ROLE, "templates")),
                             trim_blocks=True, undefined=jinja2.StrictUndefined)
    core = CoreFilters().filters()
    # The Ansible filters the templates use; everything else (default, int, dictsort) is Jinja2's own.
    env.filters.update({name: core[name] for name in ("to_json", "hash", "relpath", "basename")})
    env.filters.update(("trainfleet.training." + name, f) for name, f in PodFilters().filters().items())
    env.tests.update(CoreTests().tests())
    return env.get_template(name).render(ansible_managed="managed", **variables)


def template_vars(tmp_path, **overrides):
    variables = dict(_mpi_operator_overlay_dir="/gomod/mpi-operator@%s/manifests/overlays/standalone" % VERSION,
                     _mpi_operator_kustomize_dir=str(tmp_path), _mpi_operator_image=IMAGE,
                     mpi_operator_module=MODULE, mpi_operator_version=VERSION, mpi_operator_namespace="mpi-operator",
                     mpi_operator_deployment="mpi-operator", mpi_operator_gang_scheduler="",
                     mpi_operator_resources={"requests": {"cpu": "50m", "memory": "64Mi"}},
                     mpi_operator_base_image="trainfleet/debian-base:bookworm", mpi_operator_package="cmd/mpi-operator",
                     mpi_operator_node_lost_toleration_seconds=30)
    variables.update(overrides)
    return variables


def patches(kustomization, kind):
    return [yaml.safe_load(item["patch"]) for item in kustomization["patches"] if item["target"]["kind"] == kind]


def deployment_ops(kustomization):
    return {op["path"]: op for op in patches(kustomization, "Deployment")[0]}


@pytest.mark.parametrize("gang", ["", "volcano"])
def test_kustomization_image_pod_and_rules(tmp_path, gang):
    kustomization = yaml.safe_load(render("kustomization.yaml.j2", **template_vars(tmp_path, mpi_operator_gang_scheduler=gang)))
    overlay = os.path.normpath(os.path.join(str(tmp_path), kustomization["resources"][0]))
    assert overlay == "/gomod/mpi-operator@v0.6.0/manifests/overlays/standalone"
    assert kustomization["resources"][1:] == ["trainfleet-rbac.yaml"]
    ops = deployment_ops(kustomization)
    image = ops["/spec/template/spec/containers/0/image"]
    assert image["op"] == "replace" and image["value"] == IMAGE
    assert ops["/spec/template/spec/containers/0/imagePullPolicy"]["value"] == "IfNotPresent"
    args = ops["/spec/template/spec/containers/0/args"]["value"]
    assert args[:2] == ["-logtostderr", "--lock-namespace=mpi-operator"]
    assert ("--gang-scheduling=volcano" in args) == (gang == "volcano")
    assert "-alsologtostderr" not in args
    container = ops["/spec/template/spec/containers/0/securityContext"]["value"]
    assert container == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}}
    pod = ops["/spec/template/spec/securityContext"]["value"]
    assert pod["runAsNonRoot"] is True and pod["runAsUser"] != 0 and pod["seccompProfile"] == {"type": "RuntimeDefault"}
    rules = patches(kustomization, "ClusterRole")[0][0]["value"]
    resources = {r for rule in rules for r in rule["resources"]}
    assert not resources & {"pods/exec", "endpoints", "customresourcedefinitions", "leases", "*"}
    assert all("*" not in rule["verbs"] for rule in rules)
    # what the v2beta1 controller creates for a job: workers, launcher Job, Service, hostfile, SSH key
    assert {"mpijobs", "mpijobs/status", "pods", "jobs", "services", "configmaps", "secrets", "events"} <= resources
    assert ("podgroups" in resources) == (gang == "volcano")
    namespace = patches(kustomization, "Namespace")[0][0]["value"]
    assert namespace == {"app.kubernetes.io/managed-by": "trainfleet", "pod-security.kubernetes.io/enforce": "restricted"}


def test_leases_are_granted_in_the_operator_namespace_only(tmp_path):
    docs = [d for d in yaml.safe_load_all(render("trainfleet-rbac.yaml.j2", **template_vars(tmp_path))) if d]
    assert [d["kind"] for d in docs] == ["Role", "RoleBinding"]
    role, binding = docs
    assert role["metadata"]["namespace"] == "mpi-operator"
    assert role["rules"] == [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update"]}]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "mpi-operator", "namespace": "mpi-operator"}]


def test_hostile_values_stay_one_value(tmp_path):
    variables = template_vars(tmp_path, mpi_operator_namespace=EVIL, _mpi_operator_image=EVIL)
    docs = [d for d in yaml.safe_load_all(render("trainfleet-rbac.yaml.j2", **variables)) if d]
    assert [d["kind"] for d in docs] == ["Role", "RoleBinding"] and docs[0]["metadata"]["namespace"] == EVIL
    kustomization = yaml.safe_load(render("kustomization.yaml.j2", **variables))
    assert deployment_ops(kustomization)["/spec/template/spec/containers/0/image"]["value"] == EVIL
    dockerfile = render("Dockerfile.j2", **template_vars(tmp_path))
    assert dockerfile.splitlines()[-4:] == ["FROM trainfleet/debian-base:bookworm", "COPY mpi-operator /opt/mpi-operator",
                                            "USER 65532:65532", 'ENTRYPOINT ["/opt/mpi-operator"]']


# --------------------------------------------------------------------------- the role, run by ansible-playbook


def playbook(tmp_path, tasks, variables, *extra):
    path = tmp_path / "play.yml"
    path.write_text(yaml.safe_dump([{"name": "mpi_operator test", "hosts": "localhost", "gather_facts": False,
                                     "connection": "local", "vars": variables, "tasks": tasks}], sort_keys=False))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"))
    binary = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    proc = subprocess.run([binary if os.path.exists(binary) else "ansible-playbook", "-i", "localhost,",
                           "-e", json.dumps({"ansible_python_interpreter": sys.executable}), *extra, str(path)],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=PLAYBOOK_TIMEOUT)
    return proc.returncode, proc.stdout + proc.stderr


def cluster_vars(tmp_path):
    return {"trainfleet_name": "trainfleet",
            "trainfleet_cluster": {"kubeconfig": str(tmp_path / "no-kubeconfig"), "context": "",
                                   "registry": {"base_image": "trainfleet/debian-base:bookworm"},
                                   "launchers": {"mpi_operator": True, "volcano": True, "images": "built"},
                                   "operator": {"init_image": "trainfleet/pytorch-init:1.35.0-r4"}},
            "trainfleet_cache_dir": str(tmp_path / "cache")}


@pytest.mark.parametrize("variable, value", [
    ("mpi_operator_gang_scheduler", "kueue"),
    ("mpi_operator_image", "Bad Image\n"),
    ("mpi_operator_namespace", "kube-system"),
    ("mpi_operator_version", "0.6.0"),
    ("mpi_operator_overlay", "manifests/../../etc"),
    ("mpi_operator_wait_timeout", 0),
])
def test_preflight_refuses_bad_input_naming_it(tmp_path, variable, value):
    variables = cluster_vars(tmp_path)
    variables[variable] = value
    rc, out = playbook(tmp_path, [{"ansible.builtin.include_role": {"name": "trainfleet.training.mpi_operator",
                                                                    "tasks_from": "preflight.yml"}}], variables, "--check")
    assert rc != 0, out[-2000:]
    assert variable in out and json.dumps(value) in out.replace("\\\\", "\\"), out[-2000:]


def module_dir():
    """The pinned module in the Go module cache, fetched the way the role fetches it when missing."""
    go = shutil.which("go")
    if not go:
        return None
    proc = subprocess.run([go, "mod", "download", "-json", "%s@%s" % (MODULE, VERSION)], cwd="/",
                          env=dict(os.environ, GO111MODULE="on", GOFLAGS="-mod=mod"),
                          capture_output=True, text=True, timeout=600, check=False)
    path = json.loads(proc.stdout).get("Dir", "") if proc.returncode == 0 and proc.stdout.strip() else ""
    return path if path and os.path.isdir(os.path.join(path, "manifests")) else None


def kubectl():
    found = shutil.which("kubectl")
    if found:
        return found
    cache = os.environ.get("TRAINFLEET_CACHE") or os.path.expanduser("~/.cache/trainfleet")
    candidates = sorted(glob.glob(os.path.join(cache, "kubernetes", "*", "bin", "kubectl")))
    return candidates[-1] if candidates else None


@pytest.fixture(scope="module")
def tools():
    module, binary = module_dir(), kubectl()
    if not module or not binary:
        pytest.skip("needs %s@%s in the Go module cache and kubectl (module: %s, kubectl: %s)" % (MODULE, VERSION, module, binary))
    return module, binary


@pytest.fixture(scope="module")
def rendered(tools, tmp_path_factory):
    module, binary = tools
    tmp_path = tmp_path_factory.mktemp("mpi-operator-render")
    variables = cluster_vars(tmp_path)
    variables.update({"mpi_operator_kubectl": binary, "mpi_operator_gang_scheduler": "volcano"})
    tasks = [
        {"ansible.builtin.include_role": {"name": "trainfleet.training.mpi_operator", "tasks_from": "preflight.yml"}},
        {"ansible.builtin.include_role": {"name": "trainfleet.training.mpi_operator", "tasks_from": "source.yml"}},
        {"ansible.builtin.include_role": {"name": "trainfleet.training.mpi_operator", "tasks_from": "manifests.yml"}},
        {"ansible.builtin.copy": {"content": "{{ _mpi_operator_resources | to_json }}",
                                  "dest": str(tmp_path / "resources.json"), "mode": "0644"}},
    ]
    # preflight needs a kubeconfig outside check mode; an empty file stands for it (nothing is applied)
    (tmp_path / "no-kubeconfig").write_text("")
    first_rc, first = playbook(tmp_path, tasks, variables)
    assert first_rc == 0, first[-4000:]
    assert "Check the rendering - MPIJob v2beta1, our image, restricted pod, least-privilege RBAC" in first
    second_rc, second = playbook(tmp_path, tasks[:-1], variables)
    assert second_rc == 0, second[-4000:]
    upstream = subprocess.run([binary, "kustomize", os.path.join(module, "manifests", "overlays", "standalone")],
                              capture_output=True, text=True, check=True, timeout=120).stdout
    return json.loads((tmp_path / "resources.json").read_text()), [d for d in yaml.safe_load_all(upstream) if d], second


def by_kind(docs, kind, name=None):
    return [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]


def test_role_renders_the_v2beta1_controller_restricted(rendered):
    ours, _upstream, _second = rendered
    crd = by_kind(ours, "CustomResourceDefinition", "mpijobs.kubeflow.org")[0]
    assert [v["name"] for v in crd["spec"]["versions"] if v["served"]] == ["v2beta1"]
    deployment = by_kind(ours, "Deployment", "mpi-operator")[0]
    assert deployment["metadata"]["namespace"] == "mpi-operator"
    spec = deployment["spec"]["template"]["spec"]
    container = spec["containers"][0]
    assert container["image"] == IMAGE and container["imagePullPolicy"] == "IfNotPresent"
    assert container["args"] == ["-logtostderr", "--lock-namespace=mpi-operator", "--gang-scheduling=volcano"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert sorted((t["key"], t["effect"], t["tolerationSeconds"]) for t in spec["tolerations"]) == [
        ("node.kubernetes.io/not-ready", "NoExecute", 30), ("node.kubernetes.io/unreachable", "NoExecute", 30)]
    assert by_kind(ours, "Namespace")[0]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert all(d["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "trainfleet" for d in ours)


def test_role_rules_are_a_subset_of_upstream(rendered):
    ours, upstream, _second = rendered
    mine = {r for rule in by_kind(ours, "ClusterRole", "mpi-operator")[0]["rules"] for r in rule["resources"]}
    theirs = {r for rule in by_kind(upstream, "ClusterRole", "mpi-operator")[0]["rules"] for r in rule["resources"]}
    assert {"pods/exec", "endpoints", "customresourcedefinitions", "leases"} <= theirs
    assert mine <= theirs and not mine & {"pods/exec", "endpoints", "customresourcedefinitions", "leases"}
    added = {(d["kind"], d["metadata"]["name"]) for d in ours} - {(d["kind"], d["metadata"]["name"]) for d in upstream}
    assert added == {("Role", "mpi-operator-leader-election"), ("RoleBinding", "mpi-operator-leader-election")}


def test_second_render_writes_nothing(rendered):
    _ours, _upstream, second = rendered
    recap = [line for line in second.splitlines() if line.startswith("localhost")][-1]
    assert "changed=0" in recap and "failed=0" in recap, recap


def test_check_mode_without_cluster_renders_and_applies_nothing(tools, tmp_path):
    _module, binary = tools
    variables = cluster_vars(tmp_path)
    variables["mpi_operator_kubectl"] = binary
    rc, out = playbook(tmp_path, [{"ansible.builtin.include_role": {"name": "trainfleet.training.mpi_operator"}}],
                       variables, "--check")
    assert rc == 0, out[-4000:]
    assert "check mode: skipped applying the" in out and "mpi_operator_kubeconfig=" in out
    assert not (tmp_path / "cache" / "mpi-operator" / VERSION / "kustomize").exists()


def test_no_platform_branch():
    """The role reads the contract (trainfleet_cluster), never trainfleet_platform (as test_platform_contract's NEUTRAL roles)."""
    hits = []
    for base, _dirs, files in os.walk(ROLE):
        for name in files:
            with open(os.path.join(base, name), errors="replace") as handle:
                hits += ["%s:%d" % (name, number) for number, line in enumerate(handle, 1)
                         if re.search(r"trainfleet_platform|_platform\s*==|platform\s*==\s*'(local|aws|existing)'", line)]
    assert not hits, hits
