# -*- coding: utf-8 -*-
"""Role volcano: scheduler, controllers and admission webhook from the pinned Go module.

- The kustomization template leaves out the chart's certificate job (a pulled image), the
  monitoring namespace and the webhooks of paths not served; puts our images in (never pulled);
  restricts every component's pod (no hostPath); passes volcano_admissions and the scheduler
  configuration; gives the admission webhook what v1.10.0 calls, nothing more.
- The queue template turns volcano_queues into Queues, hostile values staying one value.
- Preflight refuses bad inputs (queues above all) naming the variable.
- The role's certificate tasks make a CA and a server certificate for the webhook Service that
  openssl verifies, keep them on the next run, and make new ones when they are not for this
  Service or expire within volcano_cert_renew_before_days.
- When the module is in the Go module cache and kubectl runs, the role renders the release
  manifest with `kubectl kustomize`, its own check passes, the CA bundle is in every webhook
  configuration, the Secret is not among the rendered objects, and a second render writes nothing.
"""

from __future__ import annotations

import base64
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
ROLE = os.path.join(ROOT, "roles", "volcano")
MODULE = "volcano.sh/volcano"
VERSION = "v1.10.0"
PLAYBOOK_TIMEOUT = 300
EVIL = "team\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: injected}"
COMPONENTS = {"scheduler": "volcano-scheduler", "controller-manager": "volcano-controllers", "webhook-manager": "volcano-admission"}
ADMISSIONS = ["/jobs/mutate", "/jobs/validate", "/podgroups/mutate", "/pods/validate", "/queues/mutate", "/queues/validate"]


def defaults():
    with open(os.path.join(ROLE, "defaults", "main.yml")) as handle:
        values = yaml.safe_load(handle)
    with open(os.path.join(ROLE, "vars", "main.yml")) as handle:
        values.update(yaml.safe_load(handle))
    return values


def render(name, **variables):
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.join(ROLE, "templates")),
                             trim_blocks=True, undefined=jinja2.StrictUndefined)
    core = CoreFilters().filters()
    # The Ansible filters the templates use; everything else (default, int, dictsort) is Jinja2's own.
    env.filters.update({name: core[name] for name in ("to_json", "hash", "relpath", "basename")})
    env.filters.update(("trainfleet.training." + name, f) for name, f in PodFilters().filters().items())
    env.tests.update(CoreTests().tests())
    return env.get_template(name).render(ansible_managed="managed", **variables)


def template_vars(**overrides):
    values = defaults()
    variables = {k: v for k, v in values.items() if not isinstance(v, str) or "{{" not in v}
    variables.update(
        _volcano_images={c: "trainfleet/vc-%s:%s-r1" % (c, VERSION) for c in COMPONENTS},
        _volcano_webhook_names=["volcano-admission-service" + p.replace("/", "-") for p in ADMISSIONS],
        _volcano_dropped_webhooks=[["MutatingWebhookConfiguration", "volcano-admission-service-pods-mutate"]],
        _volcano_tls_fingerprint="0123456789abcdef")
    variables.update(overrides)
    return variables


def kustomization(**overrides):
    return yaml.safe_load(render("kustomization.yaml.j2", **template_vars(**overrides)))


def patch_for(kust, kind, name):
    found = [item["patch"] for item in kust["patches"] if item["target"]["kind"] == kind and item["target"]["name"] == name]
    assert len(found) == 1, (kind, name)
    return yaml.safe_load(found[0])


def test_kustomization_drops_the_certificate_job_and_unserved_webhooks():
    kust = kustomization()
    deleted = {(item["target"]["kind"], item["target"]["name"]) for item in kust["patches"]
               if "$patch: delete" in item["patch"]}
    assert deleted == {("ServiceAccount", "volcano-admission-init"), ("Role", "volcano-admission-init"),
                       ("RoleBinding", "volcano-admission-init-role"), ("Job", "volcano-admission-init"),
                       ("Namespace", "volcano-monitoring"),
                       ("MutatingWebhookConfiguration", "volcano-admission-service-pods-mutate")}
    assert kust["resources"] == ["volcano-development.yaml"]


@pytest.mark.parametrize("component", sorted(COMPONENTS))
def test_every_component_runs_our_image_restricted(component):
    ops = {op["path"]: op for op in patch_for(kustomization(), "Deployment", COMPONENTS[component])}
    assert ops["/spec/template/spec/containers/0/image"]["value"] == "trainfleet/vc-%s:%s-r1" % (component, VERSION)
    assert ops["/spec/template/spec/containers/0/imagePullPolicy"]["value"] == "IfNotPresent"
    assert ops["/spec/template/spec/containers/0/securityContext"]["value"] == {
        "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}}
    pod = ops["/spec/template/spec/securityContext"]["value"]
    assert pod["runAsNonRoot"] is True and pod["seccompProfile"] == {"type": "RuntimeDefault"}
    if component == "scheduler":
        assert ops["/spec/template/spec/volumes/1"]["value"] == {"name": "klog-sock", "emptyDir": {}}
    if component == "webhook-manager":
        args = ops["/spec/template/spec/containers/0/args"]["value"]
        assert args[0] == "--enabled-admission=" + ",".join(ADMISSIONS)
        assert "--webhook-namespace=volcano-system" in args and "2>&1" not in args
        assert ops["/spec/template/metadata/annotations"]["value"] == {"trainfleet.io/tls-sha256": "0123456789abcdef"}


def test_scheduler_configuration_and_admission_rules():
    kust = kustomization()
    config = patch_for(kust, "ConfigMap", "volcano-scheduler-configmap")[0]["value"]["volcano-scheduler.conf"]
    plugins = [p["name"] for tier in yaml.safe_load(config)["tiers"] for p in tier["plugins"]]
    assert "gang" in plugins and "proportion" in plugins and "capacity" not in plugins
    rules = patch_for(kust, "ClusterRole", "volcano-admission")[0]["value"]
    resources = {r for rule in rules for r in rule["resources"]}
    assert not resources & {"certificatesigningrequests", "certificatesigningrequests/approval", "secrets", "*"}
    updates = [rule for rule in rules if "update" in rule["verbs"]]
    assert len(updates) == 1 and sorted(updates[0]["resourceNames"]) == sorted(template_vars()["_volcano_webhook_names"])


def test_queue_template():
    queues = [{"name": "team-a", "weight": 3, "capability": {"cpu": 4, "memory": "8Gi"}}, {"name": "team-b"}]
    docs = [d for d in yaml.safe_load_all(render("queues.yaml.j2", volcano_queues=queues)) if d]
    assert [d["metadata"]["name"] for d in docs] == ["team-a", "team-b"]
    assert docs[0]["spec"] == {"weight": 3, "reclaimable": True, "capability": {"cpu": "4", "memory": "8Gi"}}
    assert docs[1]["spec"] == {"weight": 1, "reclaimable": True}
    assert all(d["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "trainfleet",
                                           "app.kubernetes.io/component": "volcano-queue"} for d in docs)


def test_hostile_values_stay_one_value():
    queues = [{"name": EVIL, "weight": 1, "capability": {EVIL: EVIL}}]
    docs = [d for d in yaml.safe_load_all(render("queues.yaml.j2", volcano_queues=queues)) if d]
    assert len(docs) == 1 and docs[0]["metadata"]["name"] == EVIL and docs[0]["spec"]["capability"] == {EVIL: EVIL}
    kust = kustomization(volcano_namespace=EVIL, volcano_scheduler_conf=EVIL)
    args = {op["path"]: op for op in patch_for(kust, "Deployment", "volcano-admission")}[
        "/spec/template/spec/containers/0/args"]["value"]
    assert "--webhook-namespace=" + EVIL in args
    assert patch_for(kust, "ConfigMap", "volcano-scheduler-configmap")[0]["value"] == {"volcano-scheduler.conf": EVIL}


# --------------------------------------------------------------------------- the role, run by ansible-playbook


def playbook(tmp_path, plays, *extra):
    path = tmp_path / "play.yml"
    path.write_text(yaml.safe_dump(plays, sort_keys=False))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"))
    binary = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    proc = subprocess.run([binary if os.path.exists(binary) else "ansible-playbook", "-i", "localhost,",
                           "-e", json.dumps({"ansible_python_interpreter": sys.executable}), *extra, str(path)],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=PLAYBOOK_TIMEOUT)
    return proc.returncode, proc.stdout + proc.stderr


def play(tmp_path, tasks, **variables):
    base = {"trainfleet_name": "trainfleet",
            "trainfleet_cluster": {"kubeconfig": str(tmp_path / "no-kubeconfig"), "context": "",
                                   "registry": {"base_image": "trainfleet/debian-base:bookworm"},
                                   "launchers": {"mpi_operator": True, "volcano": True, "images": "built"},
                                   "operator": {"init_image": "trainfleet/pytorch-init:1.35.0-r4"}},
            "trainfleet_cache_dir": str(tmp_path / "cache")}
    base.update(variables)
    return {"name": "volcano test", "hosts": "localhost", "gather_facts": False, "connection": "local",
            "vars": base, "tasks": tasks}


def role_tasks(*names):
    return [{"ansible.builtin.include_role": {"name": "trainfleet.training.volcano", "tasks_from": name}} for name in names]


@pytest.mark.parametrize("variable, value", [
    ("volcano_queues", [{"name": "team-a", "weight": 0}]),
    ("volcano_queues", [{"name": "default"}]),
    ("volcano_queues", [{"name": "team-a"}, {"name": "team-a"}]),
    ("volcano_queues", [{"name": "team-a", "capability": {"cpu": "four"}}]),
    ("volcano_queues", [{"name": "team-a", "wieght": 2}]),
    ("volcano_queues", "team-a"),
    ("volcano_admissions", ["/pods/exec"]),
    ("volcano_images", {"scheduler": "bad image"}),
    ("volcano_images", {"kube-scheduler": "x"}),
    ("volcano_namespace", "kube-system"),
    ("volcano_cert_renew_before_days", 5000),
])
def test_preflight_refuses_bad_input_naming_it(tmp_path, variable, value):
    rc, out = playbook(tmp_path, [play(tmp_path, role_tasks("preflight.yml"), **{variable: value})], "--check")
    assert rc != 0, out[-2000:]
    assert variable in out, out[-2000:]


def openssl(*argv):
    return subprocess.run(["openssl", *argv], capture_output=True, text=True, check=False, timeout=60)


NO_CLUSTER = json.dumps({"_volcano_reachable": False})


def certificates(tmp_path):
    """Run certs.yml as if no cluster answered (it makes new certificates); return them as PEM strings.

    Preflight wants the kubeconfig file to exist outside check mode; an empty one stands for it, and
    the extra variable (above set_fact) keeps the role from reading the Secret through it.
    """
    (tmp_path / "kubeconfig").write_text("")
    out_file = tmp_path / "tls.json"
    tasks = role_tasks("preflight.yml", "certs.yml") + [
        {"ansible.builtin.copy": {"content": "{{ _volcano_tls | to_json }}", "dest": str(out_file), "mode": "0600"},
         "no_log": True}]
    rc, out = playbook(tmp_path, [play(tmp_path, tasks, volcano_kubeconfig=str(tmp_path / "kubeconfig"))], "-e", NO_CLUSTER)
    assert rc == 0, out[-4000:]
    assert "BEGIN" not in out, "a key or certificate was printed"
    return json.loads(out_file.read_text()), out


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    return certificates(tmp_path_factory.mktemp("volcano-certs"))


def test_certificates_verify_for_the_webhook_service(tls, tmp_path):
    pem, out = tls
    assert "made anew" in out
    for name, text in pem.items():
        (tmp_path / name).write_text(text)
    assert openssl("verify", "-CAfile", str(tmp_path / "ca.crt"), str(tmp_path / "tls.crt")).returncode == 0
    text = openssl("x509", "-in", str(tmp_path / "tls.crt"), "-noout", "-text").stdout
    for name in ("volcano-admission-service", "volcano-admission-service.volcano-system",
                 "volcano-admission-service.volcano-system.svc"):
        assert "DNS:%s" % name in text
    assert "TLS Web Server Authentication" in text
    ca_text = openssl("x509", "-in", str(tmp_path / "ca.crt"), "-noout", "-text").stdout
    assert "CA:TRUE" in ca_text
    key_mod = openssl("rsa", "-in", str(tmp_path / "tls.key"), "-noout", "-modulus").stdout
    crt_mod = openssl("x509", "-in", str(tmp_path / "tls.crt"), "-noout", "-modulus").stdout
    assert key_mod and key_mod == crt_mod


@pytest.mark.parametrize("namespace, renew_days, keep", [
    ("volcano-system", 30, True),
    ("other-namespace", 30, False),
    # made for 3650 days: not valid 3651 days from now (validity raised so that preflight accepts it)
    ("volcano-system", 3651, False),
])
def test_certificates_are_kept_only_while_valid_for_the_service(tls, tmp_path, namespace, renew_days, keep):
    pem, _out = tls
    result = tmp_path / "keep.json"
    tasks = [{"ansible.builtin.set_fact": {"_volcano_tls_current": pem}, "no_log": True}] + \
        role_tasks("preflight.yml", "certs_check.yml") + \
        [{"ansible.builtin.copy": {"content": "{{ _volcano_tls_keep | bool | to_json }}", "dest": str(result), "mode": "0644"}}]
    (tmp_path / "kubeconfig").write_text("")
    variables = {"volcano_namespace": namespace, "volcano_cert_renew_before_days": renew_days,
                 "volcano_cert_validity_days": 4000, "volcano_kubeconfig": str(tmp_path / "kubeconfig")}
    rc, out = playbook(tmp_path, [play(tmp_path, tasks, **variables)])
    assert rc == 0, out[-4000:]
    assert json.loads(result.read_text()) is keep


def module_dir():
    """The pinned module in the Go module cache, fetched the way the role fetches it when missing."""
    go = shutil.which("go")
    if not go:
        return None
    proc = subprocess.run([go, "mod", "download", "-json", "%s@%s" % (MODULE, VERSION)], cwd="/",
                          env=dict(os.environ, GO111MODULE="on", GOFLAGS="-mod=mod"),
                          capture_output=True, text=True, timeout=600, check=False)
    path = json.loads(proc.stdout).get("Dir", "") if proc.returncode == 0 and proc.stdout.strip() else ""
    return path if path and os.path.isfile(os.path.join(path, "installer", "volcano-development.yaml")) else None


def kubectl():
    found = shutil.which("kubectl")
    if found:
        return found
    cache = os.environ.get("TRAINFLEET_CACHE") or os.path.expanduser("~/.cache/trainfleet")
    candidates = sorted(glob.glob(os.path.join(cache, "kubernetes", "*", "bin", "kubectl")))
    return candidates[-1] if candidates else None


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    module, binary = module_dir(), kubectl()
    if not module or not binary:
        pytest.skip("needs %s@%s in the Go module cache and kubectl (module: %s, kubectl: %s)" % (MODULE, VERSION, module, binary))
    tmp_path = tmp_path_factory.mktemp("volcano-render")
    tasks = role_tasks("preflight.yml", "source.yml", "certs.yml", "manifests.yml") + [
        {"ansible.builtin.copy": {"content": "{{ _volcano_resources | to_json }}", "dest": str(tmp_path / "resources.json"),
                                  "mode": "0644"}},
        {"ansible.builtin.copy": {"content": "{{ _volcano_ca_bundle }}", "dest": str(tmp_path / "ca.b64"), "mode": "0644"}}]
    (tmp_path / "kubeconfig").write_text("")
    variables = {"volcano_kubectl": binary, "volcano_kubeconfig": str(tmp_path / "kubeconfig")}
    rc, first = playbook(tmp_path, [play(tmp_path, tasks, **variables)], "-e", NO_CLUSTER)
    assert rc == 0, first[-4000:]
    assert "Check the rendering - our images, restricted pods, no pulled job, no hostPath, our webhooks" in first
    return json.loads((tmp_path / "resources.json").read_text()), (tmp_path / "ca.b64").read_text(), first


def test_role_renders_the_release_manifest(rendered):
    resources, ca_bundle, _out = rendered
    kinds = {(d["kind"], d["metadata"]["name"]) for d in resources}
    assert ("Job", "volcano-admission-init") not in kinds and ("Namespace", "volcano-monitoring") not in kinds
    assert ("Secret", "volcano-admission-secret") not in kinds
    assert {("CustomResourceDefinition", "podgroups.scheduling.volcano.sh"),
            ("CustomResourceDefinition", "queues.scheduling.volcano.sh")} <= kinds
    webhooks = [d for d in resources if d["kind"].endswith("WebhookConfiguration")]
    assert sorted(d["metadata"]["name"] for d in webhooks) == sorted("volcano-admission-service" + p.replace("/", "-")
                                                                     for p in ADMISSIONS)
    assert {w["clientConfig"]["caBundle"] for d in webhooks for w in d["webhooks"]} == {ca_bundle}
    assert base64.b64decode(ca_bundle).startswith(b"-----BEGIN CERTIFICATE-----")
    images = sorted(c["image"] for d in resources if d["kind"] == "Deployment" for c in d["spec"]["template"]["spec"]["containers"])
    assert images == sorted("trainfleet/vc-%s:%s-r1" % (c, VERSION) for c in COMPONENTS)
    assert all(d["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "trainfleet" for d in resources)
    # A lost node: each component leaves it after 30 s, not Kubernetes' 300.
    for deployment in (d for d in resources if d["kind"] == "Deployment"):
        tolerations = deployment["spec"]["template"]["spec"]["tolerations"]
        assert sorted((t["key"], t["effect"], t["tolerationSeconds"]) for t in tolerations) == [
            ("node.kubernetes.io/not-ready", "NoExecute", 30), ("node.kubernetes.io/unreachable", "NoExecute", 30)], deployment["metadata"]["name"]
    # Only the pods the Volcano scheduler places go through its pod check: no other pod creation of
    # the cluster waits on the admission pod.
    pods_check = [w for d in webhooks for w in d["webhooks"] if w["clientConfig"]["service"]["path"] == "/pods/validate"]
    assert [w["matchConditions"] for w in pods_check] == [
        [{"name": "volcano-scheduled-pods-only", "expression": "object.spec.schedulerName == 'volcano'"}]]
    assert all("matchConditions" not in w for d in webhooks for w in d["webhooks"] if w not in pods_check)


def test_check_mode_without_cluster_renders_and_applies_nothing(tmp_path):
    module, binary = module_dir(), kubectl()
    if not module or not binary:
        pytest.skip("needs %s@%s in the Go module cache and kubectl (module: %s, kubectl: %s)" % (MODULE, VERSION, module, binary))
    tasks = [{"ansible.builtin.include_role": {"name": "trainfleet.training.volcano"}}]
    rc, out = playbook(tmp_path, [play(tmp_path, tasks, volcano_kubectl=binary, volcano_queues=[{"name": "team-a", "weight": 2}])],
                       "--check")
    assert rc == 0, out[-4000:]
    assert "(bare release manifest)" in out and "check mode: skipped applying the 30 rendered resources, the 1 queue(s)" in out
    assert "BEGIN" not in out
    assert not (tmp_path / "cache").exists()


def test_no_platform_branch():
    """The role reads the contract (trainfleet_cluster), never trainfleet_platform (as test_platform_contract's NEUTRAL roles)."""
    hits = []
    for base, _dirs, files in os.walk(ROLE):
        for name in files:
            with open(os.path.join(base, name), errors="replace") as handle:
                hits += ["%s:%d" % (name, number) for number, line in enumerate(handle, 1)
                         if re.search(r"trainfleet_platform|_platform\s*==|platform\s*==\s*'(local|aws|existing)'", line)]
    assert not hits, hits
