# -*- coding: utf-8 -*-
"""Every scalar a manifest or script template pastes goes through to_json.

The storage, device_plugins and kind_cluster templates are rendered with hostile values: a
newline followed by a whole extra object, quotes, a YAML flow mapping. The output must parse into
exactly the documents the template declares, with each hostile value back verbatim where it was
put (it was quoted, not interpreted). (The runc wrapper is a plain Python file that reads its paths
from JSON: tests/unit/roles/test_runc_wrapper.py.) The roles refuse such values long before (preflight); this proves
the templates would not obey them even if a check were missed.
"""

from __future__ import annotations

import os

import jinja2
import pytest
import yaml

from ansible.plugins.filter.core import FilterModule as CoreFilters
from ansible.plugins.test.core import TestModule as CoreTests

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))

EVIL = "evil\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: injected}\n"
EVIL_PATH = "/data\n    type: Directory\n  nfs: {server: attacker}"


def render(role, name, variables):
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(os.path.join(ROOT, "roles", role, "templates")),
        trim_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters.update(CoreFilters().filters())
    env.tests.update(CoreTests().tests())
    return env.get_template(name).render(ansible_managed="managed", **variables)


def docs(text):
    return [d for d in yaml.safe_load_all(text) if d]


STORAGE = {
    "storage_namespace": EVIL,
    "storage_class_name": "class\"'{x: 1}",
    "storage_pvc_name": EVIL,
    "storage_size": "5Gi\nkind: Secret",
    "storage_hostpath_path": EVIL_PATH,
    "storage_efs_file_system_id": EVIL,
    "_storage_fsx_subnet_id": EVIL,
    "_storage_fsx_security_group_ids": [EVIL],
    "storage_fsx_deployment_type": "PERSISTENT_2\n  x: y",
    "storage_fsx_data_compression_type": EVIL,
    "storage_fsx_per_unit_storage_throughput": "125\"\nx: 1",
    "storage_fsx_s3_import_path": EVIL,
    "storage_fsx_s3_export_path": "",
    "storage_fsx_extra_tags": {"project": "trainfleet", "evil": EVIL, "count": 3},
}


@pytest.mark.parametrize("name, kinds", [
    ("hostpath.yaml.j2", ["Namespace", "StorageClass", "PersistentVolume", "PersistentVolumeClaim"]),
    ("fsx.yaml.j2", ["Namespace", "StorageClass", "PersistentVolumeClaim"]),
    ("efs.yaml.j2", ["Namespace", "StorageClass", "PersistentVolumeClaim"]),
])
def test_storage_templates_quote_every_value(name, kinds):
    rendered = docs(render("storage", name, STORAGE))
    assert [d["kind"] for d in rendered] == kinds
    by_kind = dict((d["kind"], d) for d in rendered)
    assert by_kind["Namespace"]["metadata"]["name"] == EVIL
    assert by_kind["StorageClass"]["metadata"]["name"] == STORAGE["storage_class_name"]
    claim = by_kind["PersistentVolumeClaim"]
    assert claim["metadata"] == {"name": EVIL, "namespace": EVIL, "labels": {"app.kubernetes.io/managed-by": "trainfleet"}}
    assert claim["spec"]["resources"]["requests"]["storage"] == STORAGE["storage_size"]
    if name == "hostpath.yaml.j2":
        volume = by_kind["PersistentVolume"]
        assert volume["spec"]["hostPath"] == {"path": EVIL_PATH, "type": "DirectoryOrCreate"}
        assert volume["metadata"]["name"] == EVIL + "-" + EVIL
    if name == "fsx.yaml.j2":
        params = by_kind["StorageClass"]["parameters"]
        assert params["subnetId"] == EVIL and params["s3ImportPath"] == EVIL and params["s3ExportPath"] == EVIL
        assert params["perUnitStorageThroughput"] == STORAGE["storage_fsx_per_unit_storage_throughput"]
        # One string the FSx CSI driver splits into the file system's tags
        # tags that do not fit the driver's k=v,k2=v2 form (AWS tag characters only) are left out
        assert params["extraTags"] == "count=3,project=trainfleet"


def test_fsx_without_extra_tags_has_no_parameter():
    rendered = docs(render("storage", "fsx.yaml.j2", dict(STORAGE, storage_fsx_extra_tags={})))
    assert "extraTags" not in [d for d in rendered if d["kind"] == "StorageClass"][0]["parameters"]


DEVICE_PLUGINS = {
    "device_plugins_namespace": EVIL,
    "device_plugins_nvidia_image": EVIL, "device_plugins_nvidia_version": EVIL,
    "device_plugins_neuron_image": EVIL, "device_plugins_neuron_version": EVIL,
    "device_plugins_efa_image": EVIL, "device_plugins_efa_version": EVIL,
    "device_plugins_eksctl_efa_daemonset": EVIL,
}


@pytest.mark.parametrize("name, kinds", [
    ("nvidia-device-plugin.yaml.j2", ["DaemonSet"]),
    ("neuron-device-plugin.yaml.j2", ["DaemonSet"]),
    ("efa-device-plugin.yaml.j2", ["DaemonSet"]),
    ("neuron-rbac.yaml.j2", ["ServiceAccount", "ClusterRole", "ClusterRoleBinding"]),
])
def test_device_plugin_templates_quote_every_value(name, kinds):
    rendered = docs(render("device_plugins", name, DEVICE_PLUGINS))
    assert [d["kind"] for d in rendered] == kinds
    for doc in rendered:
        if doc["kind"] in ("DaemonSet", "ServiceAccount"):
            assert doc["metadata"]["namespace"] == EVIL
        if doc["kind"] == "DaemonSet":
            assert doc["spec"]["template"]["spec"]["containers"][0]["image"] == EVIL + ":" + EVIL
            assert doc["metadata"]["labels"]["app.kubernetes.io/version"] == EVIL


def test_kind_templates_quote_every_value():
    config = yaml.safe_load(render("kind_cluster", "kind-config.yaml.j2", {
        "kind_cluster_name": EVIL, "kind_cluster_pod_subnet": EVIL, "kind_cluster_service_subnet": EVIL,
        "_kind_cluster_restrict_oom": False, "kind_cluster_container_log_max_size": EVIL,
        "kind_cluster_container_log_max_files": 2, "kind_cluster_node_image": EVIL, "_kind_cluster_dir": EVIL,
        "kind_cluster_workers": 1, "kind_cluster_cni": "trainfleet", "kind_cluster_shared_path": EVIL}))
    assert config["name"] == EVIL and config["networking"]["podSubnet"] == EVIL
    assert [n["image"] for n in config["nodes"]] == [EVIL, EVIL]
    # every node mounts the same shared directory at the same path
    for node in config["nodes"]:
        assert node["extraMounts"][1] == {"hostPath": EVIL + "/shared", "containerPath": EVIL}
    pod = docs(render("kind_cluster", "probe-pod.yaml.j2", {
        "item": EVIL, "kind_cluster_verify_namespace": EVIL, "kind_cluster_verify_image": EVIL}))
    assert len(pod) == 1 and pod[0]["metadata"]["namespace"] == EVIL and pod[0]["metadata"]["name"] == "probe-" + EVIL
    service = docs(render("kind_cluster", "probe-service.yaml.j2", {
        "kind_cluster_verify_namespace": EVIL, "_kind_cluster_workers_names": [EVIL]}))
    assert len(service) == 1 and service[0]["spec"]["selector"] == {"trainfleet.io/probe": EVIL}


def test_containerd_hosts_toml_quotes_the_endpoint():
    tomllib = pytest.importorskip("tomllib")
    endpoint = 'http://x"\n[host."http://attacker"]\n  capabilities = ["push"]'
    parsed = tomllib.loads(render("kind_cluster", "hosts.toml.j2", {"item": {"host": EVIL, "endpoint": endpoint}}))
    assert parsed["server"] == endpoint
    assert list(parsed["host"]) == [endpoint]
