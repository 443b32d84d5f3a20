# -*- coding: utf-8 -*-
"""module_utils/controller_checks.py (filter input_problems): the three controllers' input checks.

Pure data: good inputs have no problem; a bad value gives one problem that names the variable and
quotes the value as JSON; what the controllers share is checked alike. The same checks run through
the roles in tests/unit/roles (test_training_operator_rbac.py, test_mpi_operator_role.py,
test_volcano_role.py) and tests/adversarial.
"""

from __future__ import absolute_import, division, print_function

import pytest

from ansible_collections.trainfleet.training.plugins.filter.checks import FilterModule
from ansible_collections.trainfleet.training.plugins.module_utils import controller_checks


def shared(p, kubeconfig):
    return {p + "_state": "present", p + "_version": "v1.9.3", p + "_module": "github.com/kubeflow/" + p,
            p + "_namespace": "trainfleet-system", p + "_cache_dir": "/root/.cache/trainfleet", p + "_build_timeout": 1800,
            p + "_wait_timeout": "300", p + "_wait_delay": 5, p + "_field_manager": "trainfleet",
            p + "_node_lost_toleration_seconds": 30, p + "_kubeconfig": kubeconfig}


def good(role, kubeconfig):
    manifests = {"_package": "manifests", "_overlay": "manifests/overlays/standalone", "_deployment": "controller"}
    own = {
        "training_operator": dict(manifests, _init_package="busybox", _init_image_repository="trainfleet/init",
                                  _gang_scheduler=""),
        "mpi_operator": dict(manifests, _image="", _image_repository="trainfleet/mpi-operator", _image_revision=1,
                             _gang_scheduler="volcano", _resources={}),
        "volcano": {"_manifest": "installer/volcano-development.yaml", "_images": {"scheduler": "localhost:5001/vc-scheduler:v1"},
                    "_image_repository_prefix": "trainfleet", "_image_revision": "2", "_admissions": ["/jobs/mutate"],
                    "_scheduler_conf": "actions: \"enqueue, allocate\"\n", "_resources": {"scheduler": {}, "controllers": {}},
                    "_cert_validity_days": 3650, "_cert_renew_before_days": 30,
                    "_queues": [{"name": "team-a", "weight": 2, "capability": {"cpu": "4", "memory": "8Gi"}}]},
    }[role]
    values = dict(shared(role, kubeconfig), **{role + key: value for key, value in own.items()})
    if role == "volcano":
        values.update(_volcano_components={"scheduler": "", "controllers": ""},
                      _volcano_upstream_admissions=["/jobs/mutate", "/jobs/validate"])
    return values


def check(role, tmp_path, context=None, **overrides):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("")
    return FilterModule().filters()["input_problems"](dict(good(role, str(kubeconfig)), **overrides), role, context)


@pytest.mark.parametrize("role", ["training_operator", "mpi_operator", "volcano"])
def test_good_inputs_have_no_problem(role, tmp_path):
    assert set(good(role, "")) == set(getattr(controller_checks, role.upper()))
    assert check(role, tmp_path) == []


@pytest.mark.parametrize("role", ["training_operator", "mpi_operator", "volcano"])
@pytest.mark.parametrize("suffix, value, quoted", [
    ("_version", "v1.9.3\n", '"v1.9.3\\n"'),
    ("_module", "github.com/x/../y", '"github.com/x/../y"'),
    ("_namespace", "Kube System", '"Kube System"'),
    ("_cache_dir", "cache", '"cache"'),
    ("_wait_timeout", 100000, "100000"),
    ("_node_lost_toleration_seconds", True, "true"),
])
def test_what_the_controllers_share_is_checked_alike(role, suffix, value, quoted, tmp_path):
    found = check(role, tmp_path, **{role + suffix: value})
    assert len(found) == 1 and role + suffix in found[0] and quoted in found[0], found


@pytest.mark.parametrize("role, name, value, quoted", [
    ("training_operator", "training_operator_overlay", "manifests/../../etc", '"manifests/../../etc"'),
    ("training_operator", "training_operator_gang_scheduler", "volcano\n  - --x", '"volcano\\n  - --x"'),
    ("mpi_operator", "mpi_operator_namespace", "kube-system", '"kube-system"'),
    ("mpi_operator", "mpi_operator_package", "./manifests", '"./manifests"'),
    ("mpi_operator", "mpi_operator_image", "evil\nimage", '"evil\\nimage"'),
    ("volcano", "volcano_admissions", ["/pods/mutate"], '["/pods/mutate"]'),
    ("volcano", "volcano_resources", {"scheduler": {}}, '{"scheduler": {}}'),
    ("volcano", "volcano_cert_renew_before_days", 3650, "3650"),
    ("volcano", "volcano_queues", [{"name": "team-a", "weight": 0}], '"weight": 0'),
    ("volcano", "volcano_queues", [{"name": "default"}], '"name": "default"'),
    ("volcano", "volcano_queues", [{"name": "a"}, {"name": "a"}], '[{"name": "a"}, {"name": "a"}]'),
    ("volcano", "volcano_queues", [{"name": "a", "capability": {"cpu": "lots"}}], '"cpu": "lots"'),
])
def test_each_controllers_own_inputs(role, name, value, quoted, tmp_path):
    found = check(role, tmp_path, **{name: value})
    assert len(found) == 1 and name in found[0] and quoted in found[0], found


def test_a_missing_kubeconfig_fails_outside_check_mode_only(tmp_path):
    missing = str(tmp_path / "nowhere")
    assert '"%s" does not exist' % missing in check("volcano", tmp_path, volcano_kubeconfig=missing)[0]
    assert check("volcano", tmp_path, {"check_mode": True}, volcano_kubeconfig=missing) == []
