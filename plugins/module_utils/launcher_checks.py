# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The launchers' checks of their own inputs (roles/pytorchjob, mpijob, torchx_job: tasks/preflight.yml).

Each runs after the train step's shared checks (trainjob_checks.py) and before anything is created,
with what its kind of job asks more of the shared inputs; module_utils/checks.py says how.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.trainfleet.training.plugins.module_utils.checks import (
    DNS_1123_LABEL, DNS_LABEL_63, DOT_OR_DOTDOT, MOUNT_PATH, first, is_list, length, matches, q, quantity, strings, text, to_int,
    whole)
from ansible_collections.trainfleet.training.plugins.module_utils.pod_settings import to_bool

IMAGE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.:/@_-]*\Z")
PORT = re.compile(r"^[0-9]{1,5}\Z")
CONTROL_NO_DEL = re.compile(r"[\x00-\x1f]")
RANK_OPTIONS = re.compile(r"^(-np|-n|--np|-c|--hostfile|-hostfile|--machinefile|-machinefile)(=|\Z)")
DATASET = re.compile(r"^[A-Za-z0-9_.-]+\Z")
SHELL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")


# --------------------------------------------------------------------------- PyTorchJob


def _pytorchjob_layout(v):
    elastic, masters = to_bool(v["pytorchjob_elastic"]), to_int(v["pytorchjob_master_replicas"])
    if not (0 <= to_int(v["pytorchjob_worker_replicas"]) <= 1024 and 1 <= to_int(v["pytorchjob_nproc_per_node"]) <= 64
            and 1 <= to_int(v["pytorchjob_port"]) <= 65535 and masters == (0 if elastic else 1)):
        return ("A static job (pytorchjob_elastic=false) needs pytorchjob_master_replicas=1 (the master is node rank 0 and "
                "MASTER_ADDR); an elastic job (pytorchjob_elastic=true) needs pytorchjob_master_replicas=0 (rendezvous on "
                "worker-0). pytorchjob_worker_replicas must be 0..1024, pytorchjob_nproc_per_node 1..64 and pytorchjob_port in "
                "1..65535. Got pytorchjob_elastic=%s, pytorchjob_master_replicas=%s, pytorchjob_worker_replicas=%s, "
                "pytorchjob_nproc_per_node=%s, pytorchjob_port=%s."
                % tuple(q(v[name]) for name in ("pytorchjob_elastic", "pytorchjob_master_replicas", "pytorchjob_worker_replicas",
                                                "pytorchjob_nproc_per_node", "pytorchjob_port")))
    return None


def _pytorchjob_elastic(v):
    if not to_bool(v["pytorchjob_elastic"]):
        return None
    workers, low, high = (to_int(v[name]) for name in (
        "pytorchjob_worker_replicas", "pytorchjob_elastic_min_replicas", "pytorchjob_elastic_max_replicas"))
    if not (1 <= workers and 1 <= low <= workers <= high <= 1024 and 0 <= to_int(v["pytorchjob_elastic_max_restarts"]) <= 1000
            and text(v["pytorchjob_elastic_rdzv_id"]) != "" and isinstance(v["pytorchjob_elastic_rdzv_conf"], dict)):
        return ("An elastic job needs 1 <= pytorchjob_elastic_min_replicas <= pytorchjob_worker_replicas <= "
                "pytorchjob_elastic_max_replicas <= 1024, pytorchjob_elastic_max_restarts 0..1000, a non-empty "
                "pytorchjob_elastic_rdzv_id and pytorchjob_elastic_rdzv_conf as a dict. Got min=%s, workers=%s, max=%s, "
                "max_restarts=%s." % tuple(q(v[name]) for name in (
                    "pytorchjob_elastic_min_replicas", "pytorchjob_worker_replicas", "pytorchjob_elastic_max_replicas",
                    "pytorchjob_elastic_max_restarts")))
    if v["pytorchjob_elastic_rdzv_backend"] in ("etcd", "etcd-v2") and not (
            matches(IMAGE, v["pytorchjob_etcd_image"])
            and matches(PORT, text(v["pytorchjob_etcd_port"])) and 1 <= to_int(v["pytorchjob_etcd_port"]) <= 65535
            and isinstance(v["pytorchjob_etcd_resources"], dict)
            and matches(PORT, text(v["pytorchjob_etcd_wait_timeout"])) and to_int(v["pytorchjob_etcd_wait_timeout"]) >= 10
            and len(text(v["trainjob_name"]) + "-etcd") <= 63):
        return ("pytorchjob_elastic_rdzv_backend %s runs an etcd next to the job and needs pytorchjob_etcd_image (an image "
                "reference the nodes have or can pull; got %s), pytorchjob_etcd_port 1..65535 (got %s), pytorchjob_etcd_resources "
                "as a dict (got %s), pytorchjob_etcd_wait_timeout 10..99999 seconds (got %s) and trainjob_name at most 58 "
                "characters (got %s)." % tuple(q(v[name]) for name in (
                    "pytorchjob_elastic_rdzv_backend", "pytorchjob_etcd_image", "pytorchjob_etcd_port", "pytorchjob_etcd_resources",
                    "pytorchjob_etcd_wait_timeout", "trainjob_name")))
    return None


def _pytorchjob_gang(v):
    scheduler, queue, least = v["pytorchjob_scheduler_name"], v["pytorchjob_queue"], v["pytorchjob_min_available"]
    replicas = to_int(v["pytorchjob_master_replicas"]) + to_int(v["pytorchjob_worker_replicas"])
    if not (scheduler in ("", "volcano") and isinstance(queue, str) and (queue == "" or DNS_LABEL_63.match(queue))
            and whole(least, 1, replicas) and (scheduler == "volcano" or queue == "")):
        return ("pytorchjob_scheduler_name must be \"\" (the default scheduler) or \"volcano\" (got %s); pytorchjob_queue empty or "
                "a Volcano queue name, a DNS label (got %s), and set only with pytorchjob_scheduler_name \"volcano\"; "
                "pytorchjob_min_available an integer from 1 to the job's %d replicas (got %s)."
                % (q(scheduler), q(queue), replicas, q(least)))
    return None


def _pytorchjob_command(v):
    if not (is_list(v["pytorchjob_command"]) and is_list(v["pytorchjob_launcher"]) and len(v["pytorchjob_launcher"]) > 0
            and is_list(v["pytorchjob_args"]) and is_list(v["pytorchjob_torchrun_extra_args"])):
        return ("pytorchjob_launcher (non-empty), pytorchjob_command, pytorchjob_args and pytorchjob_torchrun_extra_args must be "
                "lists of strings (got %s, %s, %s and %s)." % tuple(q(v[name]) for name in (
                    "pytorchjob_launcher", "pytorchjob_command", "pytorchjob_args", "pytorchjob_torchrun_extra_args")))
    return None


def _pytorchjob_run_policy(v):
    if not (0 <= to_int(v["pytorchjob_backoff_limit"]) <= 100 and 0 <= to_int(v["pytorchjob_active_deadline_seconds"]) <= 2592000
            and 0 <= to_int(v["pytorchjob_ttl_seconds_after_finished"]) <= 2592000
            and v["pytorchjob_restart_policy"] in ("Always", "OnFailure", "Never", "ExitCode")
            and v["pytorchjob_clean_pod_policy"] in ("None", "Running", "All")):
        return ("pytorchjob_backoff_limit must be 0..100 (got %s), pytorchjob_active_deadline_seconds and "
                "pytorchjob_ttl_seconds_after_finished 0..2592000 (30 days; got %s and %s); pytorchjob_restart_policy one of "
                "Always, OnFailure, Never, ExitCode (got %s); pytorchjob_clean_pod_policy one of None, Running, All (got %s)."
                % tuple(q(v[name]) for name in (
                    "pytorchjob_backoff_limit", "pytorchjob_active_deadline_seconds", "pytorchjob_ttl_seconds_after_finished",
                    "pytorchjob_restart_policy", "pytorchjob_clean_pod_policy")))
    return None


PYTORCHJOB = (
    "trainjob_name", "pytorchjob_elastic", "pytorchjob_master_replicas", "pytorchjob_worker_replicas", "pytorchjob_nproc_per_node",
    "pytorchjob_port", "pytorchjob_elastic_min_replicas", "pytorchjob_elastic_max_replicas", "pytorchjob_elastic_max_restarts",
    "pytorchjob_elastic_rdzv_id", "pytorchjob_elastic_rdzv_conf", "pytorchjob_elastic_rdzv_backend", "pytorchjob_etcd_image",
    "pytorchjob_etcd_port", "pytorchjob_etcd_resources", "pytorchjob_etcd_wait_timeout", "pytorchjob_scheduler_name",
    "pytorchjob_queue", "pytorchjob_min_available", "pytorchjob_command", "pytorchjob_launcher", "pytorchjob_args",
    "pytorchjob_torchrun_extra_args", "pytorchjob_backoff_limit", "pytorchjob_active_deadline_seconds",
    "pytorchjob_ttl_seconds_after_finished", "pytorchjob_restart_policy", "pytorchjob_clean_pod_policy",
)


def pytorchjob_problems(values, context=None):  # pylint: disable=unused-argument
    """The first problem of the PyTorchJob's own inputs (PYTORCHJOB -> value), as a list."""
    return first(values, PYTORCHJOB, (_pytorchjob_layout, _pytorchjob_elastic, _pytorchjob_gang, _pytorchjob_command,
                                      _pytorchjob_run_policy))


# --------------------------------------------------------------------------- MPIJob


def _mpijob_layout(v):
    # <job>-launcher-<5> (the launcher Job's pod) and <job>-worker-<i> stay within 63 characters
    if length(v["trainjob_name"]) > 40:
        return ("With trainjob_launcher=mpijob, trainjob_name must have at most 40 characters (the launcher's pod and the workers "
                "append to it); got trainjob_name=%s." % q(v["trainjob_name"]))
    if not (whole(v["mpijob_workers"], 1, 1024) and whole(v["mpijob_slots_per_worker"], 1, 64)
            and whole(v["mpijob_master_port"], 1024, 65535)):
        return ("mpijob_workers must be an integer 1..1024 (got %s), mpijob_slots_per_worker 1..64 (got %s) and mpijob_master_port "
                "1024..65535 (got %s)." % (q(v["mpijob_workers"]), q(v["mpijob_slots_per_worker"]), q(v["mpijob_master_port"])))
    mount = v["mpijob_ssh_auth_mount_path"]
    if not (matches(MOUNT_PATH, mount) and not DOT_OR_DOTDOT.search(mount) and whole(v["mpijob_ssh_port"], 1024, 65535)
            and to_int(v["mpijob_ssh_port"]) != to_int(v["mpijob_master_port"])):
        return ("mpijob_ssh_auth_mount_path must be an absolute path of letters, digits and ._- without . or .. components (got "
                "%s); mpijob_ssh_port a port 1024..65535 (sshd runs as the trainer's uid, which cannot bind below 1024) other "
                "than mpijob_master_port (got %s)." % (q(mount), q(v["mpijob_ssh_port"])))
    return None


def _mpijob_commands(v):
    sshd, extra = v["mpijob_sshd_command"], v["mpijob_mpirun_extra_args"]
    # -np, --hostfile and -x are the role's: a second one would change the ranks silently
    if not (strings(sshd, CONTROL_NO_DEL) and len(sshd) > 0 and strings(extra, CONTROL_NO_DEL)
            and not [arg for arg in extra if RANK_OPTIONS.match(arg)]):
        return ("mpijob_sshd_command must be a non-empty list of strings (got %s); mpijob_mpirun_extra_args a list of strings "
                "without control characters and without -np, -n, --hostfile or --machinefile, which the role sets (got %s)."
                % (q(sshd), q(extra)))
    if not all(quantity(v[name]) for name in (
            "mpijob_launcher_cpu_request", "mpijob_launcher_memory_request", "mpijob_launcher_memory_limit")):
        return ("mpijob_launcher_cpu_request, mpijob_launcher_memory_request and mpijob_launcher_memory_limit must be Kubernetes "
                "quantities such as 100m, 256Mi or 1Gi; got %s, %s and %s." % tuple(q(v[name]) for name in (
                    "mpijob_launcher_cpu_request", "mpijob_launcher_memory_request", "mpijob_launcher_memory_limit")))
    if not (whole(v["mpijob_backoff_limit"], 0, 100) and whole(v["mpijob_active_deadline_seconds"], 0, 2592000)
            and v["mpijob_clean_pod_policy"] in ("Running", "None")):
        return ("mpijob_backoff_limit must be 0..100 (got %s), mpijob_active_deadline_seconds 0..2592000 (got %s), "
                "mpijob_clean_pod_policy Running or None (All would delete the launcher and with it rank 0's log; got %s)."
                % (q(v["mpijob_backoff_limit"]), q(v["mpijob_active_deadline_seconds"]), q(v["mpijob_clean_pod_policy"])))
    # mpirun forwards the variables it is told about (-x NAME, for every name of trainjob_env and the
    # role's own); an envFrom source's variables have no name the role knows, and an sshd session does
    # not inherit the container's environment: the ranks would never see them.
    if v["trainjob_env_from"]:
        return ("trainjob_env_from %s cannot reach the ranks of an MPIJob (mpirun forwards named variables only): list the "
                "variables in trainjob_env instead (valueFrom.secretKeyRef / configMapKeyRef), or use "
                "trainjob_launcher=pytorchjob." % q(v["trainjob_env_from"]))
    return None


MPIJOB = (
    "trainjob_name", "trainjob_env_from", "mpijob_workers", "mpijob_slots_per_worker", "mpijob_master_port",
    "mpijob_ssh_auth_mount_path", "mpijob_ssh_port", "mpijob_sshd_command", "mpijob_mpirun_extra_args",
    "mpijob_launcher_cpu_request", "mpijob_launcher_memory_request", "mpijob_launcher_memory_limit", "mpijob_backoff_limit",
    "mpijob_active_deadline_seconds", "mpijob_clean_pod_policy",
)


def mpijob_problems(values, context=None):  # pylint: disable=unused-argument
    """The first problem of the MPIJob's own inputs and of what it asks more of the shared ones, as a list."""
    return first(values, MPIJOB, (_mpijob_layout, _mpijob_commands))


# --------------------------------------------------------------------------- TorchX


def _torchx_layout(v):
    # TorchX's pods have no opt-in to a namespace of Kubernetes itself
    if text(v["trainjob_namespace"]).startswith("kube-"):
        return ("With trainjob_launcher=torchx, trainjob_namespace must not be a namespace of Kubernetes itself (kube-*; "
                "trainjob_allow_system_namespace does not apply); got trainjob_namespace=%s." % q(v["trainjob_namespace"]))
    queue = v["torchx_job_queue"]
    if not (isinstance(queue, str) and (queue == "" or (DNS_1123_LABEL.match(queue) and len(queue) <= 63))):
        return ("torchx_job_queue must be empty (the first of volcano_queues, else Volcano's default queue) or a queue name (a "
                "DNS-1123 label), got %s." % q(queue))
    if not (whole(v["torchx_job_nnodes"], 1, 64) and whole(v["torchx_job_nproc_per_node"], 1, 64)
            and whole(v["torchx_job_rdzv_port"], 1024, 65535) and whole(v["torchx_job_max_retries"], 0, 10)):
        return ("torchx_job_nnodes must be 1..64 (got %s), torchx_job_nproc_per_node 1..64 (got %s), torchx_job_rdzv_port "
                "1024..65535 (got %s) and torchx_job_max_retries 0..10 (got %s)." % tuple(q(v[name]) for name in (
                    "torchx_job_nnodes", "torchx_job_nproc_per_node", "torchx_job_rdzv_port", "torchx_job_max_retries")))
    return None


def _torchx_launcher(v):
    launcher, module = v["torchx_job_launcher"], text(v["trainjob_trainer_module"])
    if not (strings(launcher) and len(launcher) > 0 and v["torchx_job_log_level"] in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
            and len(module.rpartition(".")[2]) <= 10 and matches(DATASET, v["trainjob_trainer_dataset"])
            and to_int(v["trainjob_trainer_epochs"]) <= 10000):
        return ("torchx_job_launcher must be a non-empty list of strings without control characters (got %s); "
                "torchx_job_log_level one of DEBUG, INFO, WARNING, ERROR, CRITICAL (got %s); with torchx, "
                "trainjob_trainer_module's last part has at most 10 characters (it names the Volcano tasks; got %s), "
                "trainjob_trainer_dataset is a name (got %s) and trainjob_trainer_epochs at most 10000 (got %s)."
                % tuple(q(v[name]) for name in ("torchx_job_launcher", "torchx_job_log_level", "trainjob_trainer_module",
                                                "trainjob_trainer_dataset", "trainjob_trainer_epochs")))
    # the pods are restricted: root is never allowed
    if not (whole(v["trainjob_run_as_user"], 1, 2147483647) and whole(v["trainjob_run_as_group"], 0, 2147483647)):
        return ("trainjob_run_as_user must be a numeric non-root uid 1..2147483647 (got %s) and trainjob_run_as_group a numeric "
                "gid 0..2147483647 (got %s)." % (q(v["trainjob_run_as_user"]), q(v["trainjob_run_as_group"])))
    names = [item.get("name") for item in v["trainjob_env"]]
    if not all(matches(SHELL_NAME, name) for name in names):
        return ("With torchx, every name in trainjob_env must be a shell variable name (letters, digits, _; the launcher script "
                "exports them), got %s." % q(names))
    return None


TORCHX = (
    "trainjob_namespace", "trainjob_trainer_module", "trainjob_trainer_dataset", "trainjob_trainer_epochs",
    "trainjob_run_as_user", "trainjob_run_as_group", "trainjob_env", "torchx_job_queue", "torchx_job_nnodes",
    "torchx_job_nproc_per_node", "torchx_job_rdzv_port", "torchx_job_max_retries", "torchx_job_launcher", "torchx_job_log_level",
)


def torchx_problems(values, context=None):  # pylint: disable=unused-argument
    """The first problem of the TorchX launcher's own inputs and of what it asks more of the shared ones, as a list."""
    return first(values, TORCHX, (_torchx_layout, _torchx_launcher))
