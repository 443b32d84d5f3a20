# -*- coding: utf-8 -*-
"""module_utils/launcher_checks.py (filter input_problems): each launcher's checks of its own inputs.

Pure data: the role defaults have no problem; a bad value gives one problem that names the variable
and quotes the value as JSON. The same checks run through the roles in tests/unit/roles
(test_pytorchjob_template.py, test_mpijob_template.py, test_torchx_job_role.py) and tests/adversarial.
"""

from __future__ import absolute_import, division, print_function

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.trainfleet.training.plugins.filter.checks import FilterModule
from ansible_collections.trainfleet.training.plugins.module_utils import launcher_checks

SHARED = {"trainjob_name": "trainfleet-digits", "trainjob_namespace": "trainfleet", "trainjob_env_from": [],
          "trainjob_env": [{"name": "OMP_NUM_THREADS", "value": "1"}], "trainjob_trainer_module": "trainer.train",
          "trainjob_trainer_dataset": "digits", "trainjob_trainer_epochs": 5, "trainjob_run_as_user": 10001,
          "trainjob_run_as_group": 10001}
# role -> (launcher, NAMES, the role's defaults with their templates resolved as the inventories do)
GOOD = {
    "pytorchjob": ("pytorchjob", launcher_checks.PYTORCHJOB, {
        "pytorchjob_elastic": True, "pytorchjob_master_replicas": 0, "pytorchjob_worker_replicas": 2,
        "pytorchjob_nproc_per_node": 1, "pytorchjob_port": 23456, "pytorchjob_elastic_min_replicas": 1,
        "pytorchjob_elastic_max_replicas": "2", "pytorchjob_elastic_max_restarts": 3, "pytorchjob_elastic_rdzv_id": "x",
        "pytorchjob_elastic_rdzv_conf": {}, "pytorchjob_elastic_rdzv_backend": "c10d", "pytorchjob_etcd_image": "etcd:3.5.16-0",
        "pytorchjob_etcd_port": 2379, "pytorchjob_etcd_resources": {}, "pytorchjob_etcd_wait_timeout": 120,
        "pytorchjob_scheduler_name": "", "pytorchjob_queue": "", "pytorchjob_min_available": "2", "pytorchjob_command": [],
        "pytorchjob_launcher": ["torchrun"], "pytorchjob_args": [], "pytorchjob_torchrun_extra_args": [],
        "pytorchjob_backoff_limit": 6, "pytorchjob_active_deadline_seconds": 7200, "pytorchjob_ttl_seconds_after_finished": 0,
        "pytorchjob_restart_policy": "OnFailure", "pytorchjob_clean_pod_policy": "None"}),
    "mpijob": ("mpijob", launcher_checks.MPIJOB, {
        "mpijob_workers": 2, "mpijob_slots_per_worker": 1, "mpijob_master_port": 29500,
        "mpijob_ssh_auth_mount_path": "/home/trainer/.ssh", "mpijob_ssh_port": 2222,
        "mpijob_sshd_command": ["/usr/sbin/sshd", "-De"], "mpijob_mpirun_extra_args": ["--bind-to", "none"],
        "mpijob_launcher_cpu_request": "100m", "mpijob_launcher_memory_request": "256Mi", "mpijob_launcher_memory_limit": "512Mi",
        "mpijob_backoff_limit": 1, "mpijob_active_deadline_seconds": 7200, "mpijob_clean_pod_policy": "Running"}),
    "torchx_job": ("torchx", launcher_checks.TORCHX, {
        "torchx_job_queue": "", "torchx_job_nnodes": 2, "torchx_job_nproc_per_node": 1, "torchx_job_rdzv_port": 29500,
        "torchx_job_max_retries": 0, "torchx_job_launcher": ["torchrun"], "torchx_job_log_level": "INFO"}),
}


def values(role, **overrides):
    _launcher, names, own = GOOD[role]
    return dict({name: dict(SHARED, **own)[name] for name in names}, **overrides)


def check(role, **overrides):
    return FilterModule().filters()["input_problems"](values(role, **overrides), GOOD[role][0])


@pytest.mark.parametrize("role", sorted(GOOD))
def test_the_defaults_have_no_problem(role):
    assert check(role) == []


def test_a_missing_input_or_an_unknown_launcher_is_named():
    short = values("mpijob")
    del short["mpijob_ssh_port"]
    with pytest.raises(AnsibleFilterError, match="mpijob_ssh_port"):
        FilterModule().filters()["input_problems"](short, "mpijob")
    with pytest.raises(AnsibleFilterError, match="no step kubeflow .*mpijob, .*pytorchjob, .*torchx"):
        FilterModule().filters()["input_problems"]({}, "kubeflow")


@pytest.mark.parametrize("role, name, value, quoted", [
    ("pytorchjob", "pytorchjob_master_replicas", 1, "pytorchjob_master_replicas=1"),
    ("pytorchjob", "pytorchjob_elastic_max_replicas", 1, "max=1"),
    ("pytorchjob", "pytorchjob_min_available", True, "(got true)"),
    ("pytorchjob", "pytorchjob_queue", "team-a", '"team-a"'),  # a queue without volcano
    ("pytorchjob", "pytorchjob_args", "--lr=1", '"--lr=1"'),
    ("pytorchjob", "pytorchjob_restart_policy", "Sometimes", '"Sometimes"'),
    ("mpijob", "trainjob_name", "a" * 41, '"%s"' % ("a" * 41)),
    ("mpijob", "mpijob_ssh_port", 29500, "29500"),  # the master's port
    ("mpijob", "mpijob_mpirun_extra_args", ["-np=64"], '"-np=64"'),
    ("mpijob", "mpijob_sshd_command", ["sshd\nx"], '"sshd\\nx"'),
    ("mpijob", "mpijob_clean_pod_policy", "All", '"All"'),
    ("mpijob", "trainjob_env_from", [{"secretRef": {"name": "s"}}], '"secretRef"'),
    ("torchx_job", "trainjob_namespace", "kube-system", '"kube-system"'),
    ("torchx_job", "torchx_job_queue", "team a\n", '"team a\\n"'),
    ("torchx_job", "torchx_job_nnodes", 100000, "100000"),
    ("torchx_job", "trainjob_trainer_module", "trainer.transformer", '"trainer.transformer"'),
    ("torchx_job", "trainjob_run_as_user", 0, "(got 0)"),
    ("torchx_job", "trainjob_env", [{"name": "MY-VAR", "value": "1"}], '["MY-VAR"]'),
])
def test_a_bad_value_is_named_and_quoted(role, name, value, quoted):
    found = check(role, **{name: value})
    assert len(found) == 1
    assert name in found[0] and quoted in found[0], found


def test_the_etcd_rendezvous_is_checked_only_when_the_job_uses_it():
    assert check("pytorchjob", pytorchjob_etcd_port="x") == []
    found = check("pytorchjob", pytorchjob_elastic_rdzv_backend="etcd-v2", pytorchjob_etcd_port="x")
    assert "pytorchjob_etcd_port" in found[0] and '"x"' in found[0]
    assert check("pytorchjob", pytorchjob_elastic_rdzv_backend="etcd", trainjob_name="a" * 59)[0].endswith('"%s").' % ("a" * 59))
