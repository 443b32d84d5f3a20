# -*- coding: utf-8 -*-
"""module_utils/local_checks.py (filter input_problems): the local platform's input checks (the registry,
the AWS endpoint, the kind cluster, the images it is built from).

Pure data: good inputs have no problem; a bad value gives one problem that names the variable and
quotes the value as JSON; an address beyond loopback for a server without authentication is refused
unless asked for. The same checks run through the roles in tests/unit/roles
(test_local_stack_binding.py, test_kind_images_source.py, test_template_injection.py) and
tests/adversarial.
"""

from __future__ import absolute_import, division, print_function

import json
import os

import pytest
import yaml

from ansible_collections.trainfleet.training.plugins.filter.checks import FilterModule
from ansible_collections.trainfleet.training.plugins.module_utils import local_checks

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
CACHE = "/root/.cache/trainfleet"
GOOD = {
    "local_registry": {
        "local_registry_state": "present", "local_registry_name": "trainfleet-registry", "local_registry_network": "kind",
        "local_registry_volume": "trainfleet-registry-data", "local_registry_port": 5000, "local_registry_host_port": "5001",
        "local_registry_bind_address": "127.0.0.1", "local_registry_image_repository": "trainfleet/registry",
        "local_registry_cache_dir": CACHE + "/registry", "local_registry_packages": ["docker-registry", "ca-certificates"],
        "local_registry_log_level": "info", "local_registry_wait_timeout": 60, "local_registry_allow_non_loopback": False},
    "local_aws": {
        "local_aws_state": "present", "local_aws_port": 5050, "local_aws_host": "127.0.0.1", "local_aws_python": "/usr/bin/python3",
        "local_aws_run_dir": CACHE + "/run", "local_aws_pidfile": CACHE + "/run/moto-server.pid",
        "local_aws_logfile": CACHE + "/run/moto-server.log", "local_aws_wait_timeout": 60, "local_aws_stop_timeout": "20",
        "local_aws_pod_network": "kind", "local_aws_allow_non_loopback": "no"},
    "kind_cluster": {
        "kind_cluster_state": "present", "kind_cluster_name": "trainfleet", "kind_cluster_workers": 2,
        "kind_cluster_kubeconfig": CACHE + "/kubeconfig-trainfleet", "kind_cluster_kind_bin": CACHE + "/kind/v0.26.0/kind",
        "kind_cluster_pod_subnet": "10.244.0.0/16", "kind_cluster_service_subnet": "10.96.0.0/16",
        "kind_cluster_registry_mirrors": [{"host": "localhost:5001", "endpoint": "http://trainfleet-registry:5000"}],
        "kind_cluster_create_timeout": 900, "kind_cluster_ready_timeout": 600, "kind_cluster_coredns_node_lost_toleration_seconds": 30,
        "kind_cluster_container_log_max_size": "256Mi", "kind_cluster_container_log_max_files": 2,
        "kind_cluster_node_image": "trainfleet/kind-node:v1.32.2", "kind_cluster_verify_image": "docker.io/library/alpine:3.10",
        "kind_cluster_verify_namespace": "trainfleet-probe", "kind_cluster_cni": "trainfleet", "kind_cluster_shared_path": ""},
    "kind_images": {
        "kind_images_kind_version": "v0.26.0", "kind_images_kubernetes_version": "v1.32.2", "kind_images_etcd_version": "v3.5.16",
        "kind_images_coredns_version": "v1.11.3", "kind_images_containerd_version": "debian", "kind_images_pause_version": "3.10",
        "kind_images_cache_dir": CACHE, "kind_images_debian_suite": "bookworm", "kind_images_trainer_debian_suite": "trixie",
        "kind_images_node_image": "trainfleet/kind-node:v1.32.2", "kind_images_debian_base_image": "trainfleet/debian-base:bookworm",
        "kind_images_trainer_base_image": "trainfleet/debian-base:trixie", "kind_images_init_image": "docker.io/library/alpine:3.10",
        "kind_images_extra_images": [], "kind_images_build_timeout": 5400, "kind_images_source": "auto",
        "kind_images_source_probe_timeout": 5, "kind_images_pull_timeout": 900,
        "kind_images_pull_node_image": "kindest/node:v1.32.0@sha256:" + "c4" * 32,
        "kind_images_pull_init_image_digest": "sha256:" + "45" * 32, "kind_images_pull_local_node_image": "trainfleet/kind-node:pulled",
        "kind_images_debian_mirror": ""},
}


def check(step, **overrides):
    return FilterModule().filters()["input_problems"](dict(GOOD[step], **overrides), step)


@pytest.mark.parametrize("step", sorted(GOOD))
def test_good_inputs_have_no_problem(step):
    assert set(GOOD[step]) == set(getattr(local_checks, step.upper()))
    assert check(step) == []


@pytest.mark.parametrize("step, name, value", [
    ("local_registry", "local_registry_state", "started"),
    ("local_registry", "local_registry_name", "-registry"),
    ("local_registry", "local_registry_network", "kind\n"),
    ("local_registry", "local_registry_port", 0),
    ("local_registry", "local_registry_host_port", "65536"),
    ("local_registry", "local_registry_bind_address", "256.0.0.1"),
    ("local_registry", "local_registry_image_repository", "Trainfleet/registry"),
    ("local_registry", "local_registry_cache_dir", "cache/registry"),
    ("local_registry", "local_registry_packages", ["ca-certificates"]),
    ("local_registry", "local_registry_packages", ["docker-registry", "evil; rm -rf /"]),
    ("local_registry", "local_registry_packages", None),
    ("local_registry", "local_registry_log_level", "trace"),
    ("local_registry", "local_registry_wait_timeout", 601),
    ("local_aws", "local_aws_state", "running"),
    ("local_aws", "local_aws_port", "http"),
    ("local_aws", "local_aws_host", "localhost"),
    ("local_aws", "local_aws_python", "python3"),
    ("local_aws", "local_aws_pidfile", "../moto.pid"),
    ("local_aws", "local_aws_stop_timeout", 0),
    ("local_aws", "local_aws_pod_network", "kind net"),
    ("kind_cluster", "kind_cluster_name", "Trainfleet"),
    ("kind_cluster", "kind_cluster_name", "a" * 33),
    ("kind_cluster", "kind_cluster_workers", 11),
    ("kind_cluster", "kind_cluster_pod_subnet", "10.244.0.0"),
    ("kind_cluster", "kind_cluster_registry_mirrors", [{"host": "localhost:5001", "endpoint": "ftp://registry"}]),
    ("kind_cluster", "kind_cluster_registry_mirrors", [{"host": "a b", "endpoint": "http://registry"}]),
    ("kind_cluster", "kind_cluster_registry_mirrors", ["localhost:5001"]),
    ("kind_cluster", "kind_cluster_create_timeout", 59),
    ("kind_cluster", "kind_cluster_coredns_node_lost_toleration_seconds", True),
    ("kind_cluster", "kind_cluster_coredns_node_lost_toleration_seconds", "30s"),
    ("kind_cluster", "kind_cluster_container_log_max_size", "256M"),
    ("kind_cluster", "kind_cluster_container_log_max_files", 1),
    ("kind_cluster", "kind_cluster_node_image", "trainfleet/kind-node:v1.32.2\n"),
    ("kind_cluster", "kind_cluster_verify_namespace", "kube_system"),
    ("kind_cluster", "kind_cluster_cni", "calico"),
    ("kind_cluster", "kind_cluster_shared_path", "/etc/kubernetes"),
    ("kind_cluster", "kind_cluster_shared_path", "/srv/../etc"),
    ("kind_cluster", "kind_cluster_shared_path", ["/srv/data"]),
    ("kind_images", "kind_images_kind_version", "0.26.0"),
    ("kind_images", "kind_images_kubernetes_version", "v2.0.0"),
    ("kind_images", "kind_images_containerd_version", "latest"),
    ("kind_images", "kind_images_pause_version", "3.10.1"),
    ("kind_images", "kind_images_debian_suite", "bookworm-backports"),
    ("kind_images", "kind_images_node_image", "trainfleet/kind-node"),
    ("kind_images", "kind_images_extra_images", 3),
    ("kind_images", "kind_images_build_timeout", 14401),
    ("kind_images", "kind_images_source", "mirror"),
    ("kind_images", "kind_images_pull_node_image", "kindest/node:v1.32.0"),
    ("kind_images", "kind_images_pull_init_image_digest", "sha256:abc"),
    ("kind_images", "kind_images_debian_mirror", "file:///srv/debian"),
    ("kind_images", "kind_images_debian_mirror", "http://deb.example/debian\nX"),
])
def test_a_bad_value_is_one_problem_naming_the_variable(step, name, value):
    problems = check(step, **{name: value})
    assert len(problems) == 1, problems
    assert name in problems[0]
    shown = {"kind_cluster_kubeconfig", "kind_cluster_kind_bin", "kind_cluster_pod_subnet", "kind_images_node_image",
             "kind_images_pause_version", "kind_images_extra_images", "kind_images_containerd_version"}
    if name not in shown:  # the ones the message names without quoting, as before
        assert json.dumps(value) in problems[0], problems[0]


@pytest.mark.parametrize("step, address", [("local_registry", "local_registry_bind_address"), ("local_aws", "local_aws_host")])
def test_a_server_without_authentication_stays_on_loopback_unless_asked(step, address):
    for value, where in (("0.0.0.0", "on every interface of this machine"), ("192.168.1.5", "beyond this machine")):
        problems = check(step, **{address: value})
        assert len(problems) == 1 and problems[0].startswith("%s %s would publish" % (address, json.dumps(value)))
        assert where in problems[0] and "%s_allow_non_loopback: true" % step in problems[0]
        assert check(step, **{address: value, step + "_allow_non_loopback": True}) == []
        assert check(step, **{address: value, step + "_state": "absent"}) == []
    assert check(step, **{address: "127.0.0.2"}) == []


def test_a_debian_mirror_url_is_taken():
    """The Jinja check this replaced failed on any mirror at all (its regex did not compile: bad escape \\Z)."""
    assert check("kind_images", kind_images_debian_mirror="http://deb.example/debian") == []
    assert check("kind_images", kind_images_debian_mirror="https://mirror.example:8443/debian/") == []
    assert check("kind_images", kind_images_debian_mirror="http://deb.example/debian\"x")


def test_the_preflights_keep_the_checks_that_look_at_this_machine():
    """What needs this machine (apt-cache, moto's Python, the kind binary, the node image) stays a task."""
    for role, name in (("local_registry", "Look up the package versions"), ("local_aws", "Check the Python that runs moto server"),
                       ("kind_cluster", "Require the kind binary"), ("kind_cluster", "Require the local node image (it is never pulled)")):
        with open(os.path.join(ROOT, "roles", role, "tasks", "preflight.yml")) as handle:
            assert name in [task.get("name") for task in yaml.safe_load(handle)], (role, name)
