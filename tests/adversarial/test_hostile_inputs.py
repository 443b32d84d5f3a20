# -*- coding: utf-8 -*-
"""Bad and hostile inputs to every step, each run the way users run it.

Each case is one `ansible-playbook -i inventories/<platform> playbooks/<step>.yml -e @vars.json`
(the values in a JSON vars file so that newlines and quotes arrive intact) against a private moto
server and an unreachable cluster (tests/adversarial/conftest.py). For every case:

- refused: the run fails, and the failing task is a preflight/validation task of the roles;
- before any API call: the moto server logged no request and the cluster listener saw no
  connection during the run;
- the message names the role variable and quotes the value (JSON-quoted, as the roles print it);
- nothing exists afterwards: no role, policy, bucket, repository or cluster on the endpoint, and
  no file written under the temporary HOME outside the trainfleet cache.

The steps on the local platform run with --check (a case that were not refused must not touch
this machine's Docker engine); the AWS steps run for real against the private endpoint.
A summary (cases, refused, created, leaked) is written to out/test-reports/adversarial-figures.json
(each pytest-xdist process writes its part; conftest.py adds them up).
"""

from __future__ import annotations

import glob
import json
import os
import re

import pytest
import yaml

from tests.adversarial.conftest import FAKE_SECRETS, FIGURES_PARTS, ROOT

NL = "\n"
BIG = 10 ** 12
INJECT = "x\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: injected}"
IMAGE = "registry.example/trainfleet/trainer:adversarial"
GROUP = {"name": "cpu", "kind": "cpu", "instance_types": ["m5.large"], "min_size": 1, "desired_size": 1, "max_size": 2}


def case(step, inventory, variable, value, extra=None, quote=None, check=False, playbook=None):
    """One hostile input: `variable` (named in the message) set to `value` (quoted in it)."""
    return dict(step=step, inventory=inventory, variable=variable, value=value, extra=extra or {},
                quote=json.dumps(value) if quote is None else quote, check=check,
                playbook=playbook or "playbooks/%s.yml" % step)


TRAIN = {"trainjob_image": IMAGE}
# trainjob_launcher=torchx: the Volcano Job TorchX renders.
TORCHX = {"trainjob_launcher": "torchx", "trainjob_image": IMAGE}
# trainjob_launcher=mpijob: the MPIJob with the trainer image's MPI variant.
TRAIN_MPI = {"trainjob_launcher": "mpijob", "trainjob_image": IMAGE + "-mpi"}
# A real dataset directory (tests/adversarial/dataset) and the claim copy switched on.
DATASET_DIR = str(ROOT / "tests" / "adversarial" / "dataset")
DATASET = {"dataset_source": DATASET_DIR}
DATASET_CLAIM = dict(DATASET, dataset_targets=["s3", "claim"], dataset_image=IMAGE)
TENSORBOARD = {"tensorboard_image": IMAGE}
JUPYTER = {"jupyter_image": IMAGE}
# --device xla on a claim: what a compile cache set needs.
XLA = dict(TRAIN, trainjob_trainer_device="xla", trainjob_pvc_claim_name="data")
CASES = [
    # iam
    case("iam", "aws", "iam_path", "/"),
    case("iam", "aws", "iam_path", "/trainfleet/" + NL),
    case("iam", "aws", "iam_name_prefix", "tf" + NL),
    case("iam", "aws", "iam_training_role_name", "role" + NL + "x"),
    case("iam", "aws", "iam_training_namespace", "kube system"),
    case("iam", "aws", "iam_training_service_account", "trainer" + NL),
    case("iam", "aws", "iam_cluster_name", "trainfleet" + NL),
    case("iam", "aws", "iam_s3_bucket_name", "Bad_Bucket"),
    case("iam", "aws", "iam_s3_prefix", "training/../"),
    case("iam", "aws", "iam_training_max_session_duration", BIG),
    case("iam", "aws", "iam_identity_mode", "root"),
    case("iam", "aws", "iam_s3_kms_key_arn", "arn:aws:kms:us-west-2:123456789012:key/*"),
    case("iam", "aws", "iam_ecr_repository_names", ["Trainfleet/Trainer"]),
    case("iam", "aws", "iam_eks_addon_registry_accounts", ["12345"]),
    case("iam", "aws", "iam_node_managed_policy_names", ["AmazonEKSWorkerNodePolicy", "AdministratorAccess"]),
    case("iam", "aws", "iam_node_managed_policy_names", ["AmazonEKSWorkerNodePolicy", "AmazonEC2FullAccess"]),
    case("iam", "aws", "iam_permissions_boundary_name", "trainfleet-boundary" + NL),
    case("iam", "aws", "iam_deployer_extra_statements",
         [{"Effect": "Allow", "Action": "s3:Get?bject", "Resource": "arn:aws:s3:::b/*"}], quote='"s3:Get?bject"'),
    case("iam", "aws", "iam_deployer_extra_statements",
         [{"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"}], quote='"Resource": "*"'),
    # s3
    case("s3", "aws", "s3_bucket_name", "trainfleet-bucket" + NL),
    case("s3", "aws", "s3_bucket_name", "UPPER-case"),
    case("s3", "aws", "s3_bucket_name", "192.168.1.1"),
    case("s3", "aws", "s3_checkpoint_prefix", "checkpoints/../"),
    case("s3", "aws", "s3_checkpoint_expiration_days", BIG),
    case("s3", "aws", "s3_encryption", "none"),
    # registry (ECR)
    case("registry", "aws", "ecr_repository_name", "trainfleet/trainer" + NL),
    case("registry", "aws", "ecr_repository_name", "../etc"),
    case("registry", "aws", "ecr_keep_images", BIG),
    case("registry", "aws", "ecr_encryption_type", "NONE"),
    # cluster (EKS)
    case("cluster", "aws", "eks_cluster_name", "trainfleet" + NL),
    case("cluster", "aws", "eks_cluster_vpc_cidr", "10.0.0.0/8"),
    case("cluster", "aws", "eks_cluster_vpc_cidr", "10.42.0.0/16" + NL),
    case("cluster", "aws", "eks_cluster_vpc_cidr", "300.1.2.3/16"),
    case("cluster", "aws", "eks_cluster_timeout", "100000h"),
    case("cluster", "aws", "eks_cluster_region", "us-west-2" + NL),
    case("cluster", "aws", "eks_cluster_version", "1.33" + NL),
    case("cluster", "aws", "eks_cluster_eksctl_version", "0.210.0; rm -rf /"),
    case("cluster", "aws", "eks_cluster_endpoint_public_access_cidrs", []),
    case("cluster", "aws", "eks_cluster_endpoint_public_access_cidrs", ["0.0.0.0/0"]),
    # nodegroups
    case("nodegroups", "aws", "nodegroups_groups", [dict(GROUP, max_size=100000)], quote="100000"),
    case("nodegroups", "aws", "nodegroups_groups", [dict(GROUP, name="cpu" + NL)], quote='cpu\n'),
    case("nodegroups", "aws", "nodegroups_timeout", "999h"),
    # device_plugins
    case("device_plugins", "aws", "device_plugins_namespace", "kube-system" + NL),
    case("device_plugins", "aws", "device_plugins_namespace", INJECT),
    case("device_plugins", "aws", "device_plugins_wait_timeout", BIG),
    case("device_plugins", "aws", "device_plugins_nvidia_version", "v0.17.2" + NL),
    case("device_plugins", "aws", "device_plugins_efa_image", "evil" + NL + "image"),
    # training_operator
    case("training_operator", "aws", "training_operator_overlay", "manifests/../../etc"),
    case("training_operator", "aws", "training_operator_namespace", "kubeflow" + NL),
    case("training_operator", "aws", "training_operator_wait_timeout", BIG),
    case("training_operator", "aws", "training_operator_version", "v1.9.3" + NL),
    case("training_operator", "aws", "training_operator_gang_scheduler", "volcano" + NL + "  - --enable-scheme=mpijob"),
    case("training_operator", "aws", "training_operator_gang_scheduler", "scheduler-plugins"),
    # storage
    case("storage", "aws", "storage_namespace", INJECT),
    case("storage", "aws", "storage_class_name", "Bad Class"),
    case("storage", "aws", "storage_size", "1200Gi" + NL),
    case("storage", "aws", "storage_fsx_s3_import_path", "s3://bucket/x" + NL, extra={"storage_backend": "fsx"}),
    case("storage", "local", "storage_hostpath_path", "/var/local/../../etc", check=True),
    case("storage", "local", "storage_hostpath_path", "/etc/trainfleet", check=True),
    case("storage", "local", "storage_hostpath_path", "/", check=True),
    case("storage", "local", "storage_hostpath_path", "/var/lib/kubelet", check=True),
    case("storage", "local", "storage_hostpath_path", "/var", check=True),
    # trainer_image
    case("trainer_image", "aws", "trainer_image_repository", "evil" + NL),
    case("trainer_image", "aws", "trainer_image_tag", "latest" + NL,
         extra={"trainer_image_repository": "registry.example/trainfleet/trainer"}),
    case("trainer_image", "aws", "trainer_image_build_timeout", BIG,
         extra={"trainer_image_repository": "registry.example/trainfleet/trainer"}),
    case("trainer_image", "aws", "trainer_image_variants", ["rocm"],
         extra={"trainer_image_repository": "registry.example/trainfleet/trainer"}),
    case("trainer_image", "aws", "trainer_image_variants", ["mpi" + NL],
         extra={"trainer_image_repository": "registry.example/trainfleet/trainer"}),
    case("trainer_image", "aws", "trainer_image_variants", "mpi",
         extra={"trainer_image_repository": "registry.example/trainfleet/trainer"}),
    # train
    case("train", "aws", "trainjob_name", "job" + NL, extra=TRAIN),
    # the etcd rendezvous: the etcd the role starts next to the job
    case("train", "aws", "pytorchjob_etcd_image", IMAGE + NL,
         extra=dict(TRAIN, pytorchjob_elastic=True, pytorchjob_elastic_rdzv_backend="etcd")),
    case("train", "aws", "pytorchjob_etcd_port", 70000,
         extra=dict(TRAIN, pytorchjob_elastic=True, pytorchjob_elastic_rdzv_backend="etcd-v2", pytorchjob_etcd_image=IMAGE)),
    # the launchers step: only the controllers it knows
    case("launchers", "aws", "platform_launchers", ["kueue"]),
    case("launchers", "aws", "platform_launchers", "mpi_operator" + NL),
    case("train", "aws", "trainjob_namespace", "kube system", extra=TRAIN),
    case("train", "aws", "pytorchjob_worker_replicas", 100000, extra=TRAIN),
    case("train", "aws", "pytorchjob_nproc_per_node", 1000, extra=TRAIN),
    case("train", "aws", "trainjob_trainer_batch_size", BIG, extra=TRAIN),
    case("train", "aws", "trainjob_wait_timeout", BIG, extra=TRAIN),
    case("train", "aws", "trainjob_manifest_dest", "MANIFEST_ESCAPE", extra=TRAIN),
    case("train", "aws", "trainjob_log_dest", "/tmp/../etc/trainfleet.log", extra=TRAIN),
    case("train", "aws", "trainjob_pvc_mount_path", "/data/../etc", extra=TRAIN),
    # your own code: a directory we would ship into the cluster (/etc, reached by ../), a newline
    case("train", "aws", "trainjob_script_dir", "../../../../../../etc", extra=TRAIN),
    case("train", "aws", "trainjob_script_dir", DATASET_DIR + NL, extra=TRAIN),
    case("train", "aws", "trainjob_script_mount_path", "/opt/../etc", extra=dict(TRAIN, trainjob_script_dir=DATASET_DIR)),
    case("train", "aws", "trainjob_image", IMAGE + NL),
    case("train", "aws", "trainjob_aws_endpoint_url", "http://x" + NL, extra=TRAIN),
    case("train", "aws", "trainjob_env", [{"name": "WANDB_API_KEY", "value": "wandb-literal-secret-0123456789"}],
         extra=TRAIN, quote='"WANDB_API_KEY"'),
    case("train", "aws", "trainjob_env", [{"name": "HF_Token", "value": "hf-literal-secret-0123456789"}],
         extra=TRAIN, quote='"HF_Token"'),
    # train: pod security (restricted by default, each widening needs its own opt-in)
    case("train", "aws", "trainjob_namespace", "kube-system", extra=TRAIN),
    case("train", "aws", "pytorchjob_scheduler_name", "volcano" + NL + "x", extra=TRAIN),
    case("train", "aws", "pytorchjob_queue", "team-a" + NL + "    minAvailable: 1",
         extra=dict(TRAIN, pytorchjob_scheduler_name="volcano")),
    case("train", "aws", "pytorchjob_min_available", BIG, extra=dict(TRAIN, pytorchjob_scheduler_name="volcano")),
    case("train", "aws", "trainjob_namespace", "kube-node-lease", extra=TRAIN),
    case("train", "aws", "trainjob_run_as_user", 0, extra=TRAIN),
    case("train", "aws", "trainjob_security_context", {"runAsUser": 0}, extra=TRAIN),
    case("train", "aws", "trainjob_security_context", {"runAsNonRoot": False}, extra=TRAIN),
    case("train", "aws", "trainjob_security_context", {"seccompProfile": {"type": "Unconfined"}}, extra=TRAIN),
    case("train", "aws", "trainjob_container_security_context", {"privileged": True}, extra=TRAIN),
    case("train", "aws", "trainjob_container_security_context", {"allowPrivilegeEscalation": True}, extra=TRAIN),
    case("train", "aws", "trainjob_container_security_context", {"capabilities": {"add": ["SYS_ADMIN"]}}, extra=TRAIN),
    case("train", "aws", "trainjob_container_security_context", {"runAsUser": 0}, extra=TRAIN),
    case("train", "aws", "trainjob_extra_volumes", [{"name": "host", "hostPath": {"path": "/"}}], extra=TRAIN),
    # train with the TorchX launcher (roles/torchx_job, trainjob_launcher=torchx)
    case("train", "aws", "trainjob_name", "job" + NL, extra=TORCHX),
    case("train", "aws", "trainjob_namespace", "kube-system", extra=TORCHX),
    case("train", "aws", "torchx_job_queue", "team a" + NL, extra=TORCHX),
    case("train", "aws", "trainjob_image", IMAGE + NL, extra={"trainjob_launcher": "torchx"}),
    case("train", "aws", "torchx_job_nnodes", 100000, extra=TORCHX),
    case("train", "aws", "trainjob_trainer_module", "trainer.train; id", extra=TORCHX),
    case("train", "aws", "trainjob_trainer_extra_args", ["--x" + NL + "--y"], extra=TORCHX),
    case("train", "aws", "trainjob_run_as_user", 0, extra=TORCHX),
    case("train", "aws", "trainjob_labels", {"a": INJECT}, extra=TORCHX),
    case("train", "aws", "trainjob_aws_endpoint_url", "http://x" + NL, extra=TORCHX),
    case("train", "aws", "trainjob_env", [{"name": "HF_Token", "value": "hf-literal-secret-0123456789"}],
         extra=TORCHX, quote='["HF_Token"]'),
    case("train", "aws", "trainjob_manifest_dest", "MANIFEST_ESCAPE", extra=TORCHX),
    # train: the launcher (checked first, in roles/trainjob/tasks/preflight_launcher.yml) and the MPIJob's variables
    case("train", "aws", "trainjob_launcher", "slurm", extra=TRAIN),
    case("train", "aws", "trainjob_launcher", "mpijob" + NL, extra=TRAIN),
    case("train", "aws", "trainjob_launcher", INJECT, extra=TRAIN),
    case("train", "aws", "trainjob_image", IMAGE + NL, extra={"trainjob_launcher": "mpijob"}),
    case("train", "aws", "trainjob_name", "job" + NL, extra=TRAIN_MPI),
    case("train", "aws", "trainjob_namespace", "kube system", extra=TRAIN_MPI),
    case("train", "aws", "trainjob_namespace", INJECT, extra=TRAIN_MPI),
    case("train", "aws", "mpijob_workers", 100000, extra=TRAIN_MPI),
    case("train", "aws", "mpijob_slots_per_worker", 1000, extra=TRAIN_MPI),
    case("train", "aws", "trainjob_trainer_epochs", BIG, extra=TRAIN_MPI),
    case("train", "aws", "mpijob_master_port", BIG, extra=TRAIN_MPI),
    case("train", "aws", "mpijob_ssh_port", 22, extra=TRAIN_MPI),
    case("train", "aws", "mpijob_ssh_auth_mount_path", "/home/trainer/../../etc", extra=TRAIN_MPI),
    case("train", "aws", "mpijob_sshd_command", ["/usr/sbin/sshd" + NL + "x"], extra=TRAIN_MPI),
    case("train", "aws", "mpijob_mpirun_extra_args", ["-np", "64"], extra=TRAIN_MPI, quote='"-np"'),
    case("train", "aws", "mpijob_mpirun_extra_args", ["--hostfile=/etc/passwd"], extra=TRAIN_MPI, quote='"--hostfile=/etc/passwd"'),
    case("train", "aws", "mpijob_launcher_memory_limit", "lots", extra=TRAIN_MPI),
    case("train", "aws", "mpijob_clean_pod_policy", "All", extra=TRAIN_MPI),
    case("train", "aws", "trainjob_wait_timeout", BIG, extra=TRAIN_MPI),
    case("train", "aws", "trainjob_log_dest", "/tmp/../etc/trainfleet.log", extra=TRAIN_MPI),
    case("train", "aws", "trainjob_manifest_dest", "MANIFEST_ESCAPE", extra=TRAIN_MPI),
    case("train", "aws", "trainjob_env_from", [{"secretRef": {"name": "x"}}], extra=TRAIN_MPI, quote='"secretRef"'),
    # the settings an MPIJob shares with a PyTorchJob are checked under their own names
    case("train", "aws", "trainjob_container_security_context", {"privileged": True}, extra=TRAIN_MPI),
    # dataset (a real source directory; every case refused before S3 or the cluster is asked)
    case("dataset", "aws", "dataset_source", "/nonexistent/trainfleet-dataset"),
    case("dataset", "aws", "dataset_source", DATASET_DIR + "/../dataset"),
    case("dataset", "aws", "dataset_source", DATASET_DIR + NL),
    case("dataset", "aws", "dataset_source", "/tmp/{% raw %}{{ lookup('pipe', 'id') }}{% endraw %}",
         quote=json.dumps("/tmp/{{ lookup('pipe', 'id') }}")),
    case("dataset", "aws", "dataset_source", ["/etc/passwd"], quote='"/etc/passwd"'),
    case("dataset", "aws", "dataset_name", "Breast Cancer", extra=DATASET),
    case("dataset", "aws", "dataset_name", "bc" + NL + "x", extra=DATASET),
    case("dataset", "aws", "dataset_s3_prefix", "training/datasets/../../other/", extra=DATASET),
    case("dataset", "aws", "dataset_s3_prefix", "other/datasets/bc/", extra=DATASET),
    case("dataset", "aws", "dataset_s3_prefix", "training/", extra=DATASET),
    case("dataset", "aws", "dataset_s3_prefix", "training/checkpoints/bc/", extra=DATASET),
    case("dataset", "aws", "dataset_s3_prefix", "training/bc" + NL + "/", extra=DATASET),
    case("dataset", "aws", "dataset_s3_bucket", "someone-elses-bucket", extra=DATASET),
    case("dataset", "aws", "dataset_targets", ["claim"], extra=DATASET),
    case("dataset", "aws", "dataset_targets", ["s3", "everywhere"], extra=DATASET, quote="everywhere"),
    case("dataset", "aws", "dataset_max_files", BIG, extra=DATASET),
    case("dataset", "aws", "dataset_namespace", "kube-system", extra=DATASET_CLAIM),
    case("dataset", "aws", "dataset_namespace", INJECT, extra=DATASET_CLAIM),
    case("dataset", "aws", "dataset_claim_mount_path", "/data/../etc", extra=DATASET_CLAIM),
    case("dataset", "aws", "dataset_claim_dir", "../../etc", extra=DATASET_CLAIM),
    case("dataset", "aws", "dataset_image", IMAGE + NL, extra=DATASET_CLAIM),
    case("dataset", "aws", "dataset_aws_endpoint_url", "http://x" + NL, extra=DATASET_CLAIM),
    case("dataset", "aws", "dataset_run_as_user", 0, extra=DATASET_CLAIM),
    case("dataset", "aws", "dataset_claim_timeout", BIG, extra=DATASET_CLAIM),
    case("dataset", "aws", "dataset_manifest_dest", "MANIFEST_ESCAPE", extra=DATASET_CLAIM),
    # tensorboard: nothing reachable from outside the cluster without CIDRs, nothing injected
    case("tensorboard", "aws", "tensorboard_namespace", INJECT, extra=TENSORBOARD),
    case("tensorboard", "aws", "tensorboard_namespace", "kube-system", extra=TENSORBOARD),
    case("tensorboard", "aws", "tensorboard_name", "tb" + NL, extra=TENSORBOARD),
    case("tensorboard", "aws", "tensorboard_logdir", "s3://bucket-1/runs" + NL + "--bind_all", extra=TENSORBOARD),
    case("tensorboard", "aws", "tensorboard_logdir", "/etc", extra=dict(TENSORBOARD, tensorboard_pvc_claim_name="data")),
    case("tensorboard", "aws", "tensorboard_run", "../../secrets", extra=TENSORBOARD),
    case("tensorboard", "aws", "tensorboard_s3_prefix", "training/../", extra=TENSORBOARD),
    case("tensorboard", "aws", "tensorboard_s3_endpoint_url", "http://x" + NL, extra=TENSORBOARD),
    case("tensorboard", "aws", "tensorboard_image", IMAGE + NL),
    case("tensorboard", "aws", "tensorboard_version", "2.21.0; rm -rf /", extra=TENSORBOARD),
    case("tensorboard", "aws", "tensorboard_extra_args", ["--bind_all"], extra=TENSORBOARD, quote='"--bind_all"'),
    case("tensorboard", "aws", "tensorboard_extra_args", ["--host=0.0.0.0"], extra=TENSORBOARD, quote='"--host=0.0.0.0"'),
    case("tensorboard", "aws", "tensorboard_run_as_user", 0, extra=TENSORBOARD),
    case("tensorboard", "aws", "tensorboard_memory_limit", "lots", extra=TENSORBOARD),
    case("tensorboard", "aws", "tensorboard_wait_timeout", BIG, extra=TENSORBOARD),
    case("tensorboard", "aws", "tensorboard_load_balancer_source_ranges", [],
         extra=dict(TENSORBOARD, tensorboard_internal_load_balancer=True)),
    case("tensorboard", "aws", "tensorboard_load_balancer_source_ranges", ["0.0.0.0/0"],
         extra=dict(TENSORBOARD, tensorboard_internal_load_balancer=True), quote='"0.0.0.0/0"'),
    case("tensorboard", "aws", "tensorboard_load_balancer_source_ranges", ["10.0.0.0/8" + NL + "x"],
         extra=dict(TENSORBOARD, tensorboard_internal_load_balancer=True), quote=json.dumps("10.0.0.0/8" + NL + "x")),
    case("tensorboard", "aws", "tensorboard_load_balancer_annotations", {},
         extra=dict(TENSORBOARD, tensorboard_internal_load_balancer=True, tensorboard_load_balancer_source_ranges=["10.0.0.0/8"])),
    case("tensorboard", "aws", "tensorboard_manifest_dest", "MANIFEST_ESCAPE", extra=TENSORBOARD),
    case("tensorboard", "local", "tensorboard_namespace", INJECT, extra=TENSORBOARD, check=True),
    case("tensorboard", "local", "tensorboard_load_balancer_source_ranges", [],
         extra=dict(TENSORBOARD, tensorboard_internal_load_balancer=True), check=True),
    # evaluate (after train, or alone for an earlier run by name)
    case("train", "aws", "trainjob_evaluate_timeout", BIG, extra=dict(TRAIN, trainjob_evaluate=True)),
    # the compile cache set: one directory of the claim, only with --device xla and a claim
    case("train", "aws", "trainjob_compile_cache_set", "../bert", extra=XLA),
    case("train", "aws", "trainjob_compile_cache_set", "bert" + NL + "x", extra=XLA),
    case("train", "aws", "trainjob_compile_cache_set", "{% raw %}{{ lookup('pipe', 'id') }}{% endraw %}", extra=XLA,
         quote=json.dumps("{{ lookup('pipe', 'id') }}")),
    case("train", "aws", "trainjob_compile_cache_set", "bert-large", extra=dict(XLA, trainjob_trainer_device="cpu")),
    case("train", "aws", "trainjob_compile_cache_set", "bert-large", extra=dict(XLA, trainjob_pvc_claim_name="")),
    case("train", "aws", "trainjob_trainer_device", "tpu", extra=TRAIN),
    case("evaluate", "aws", "trainjob_name", "../../other-run", extra=TRAIN),
    case("evaluate", "aws", "trainjob_name", "run" + NL + "x", extra=TRAIN),
    case("evaluate", "aws", "trainjob_trainer_output_dir", "s3://b-1/runs" + NL + "x", extra=TRAIN),
    case("evaluate", "aws", "trainjob_evaluate_timeout", 5, extra=TRAIN),
    # jupyter: a notebook server runs code, so nothing reachable from outside without CIDRs, nothing injected
    case("jupyter", "aws", "jupyter_namespace", INJECT, extra=JUPYTER),
    case("jupyter", "aws", "jupyter_name", "lab" + NL, extra=JUPYTER),
    case("jupyter", "aws", "jupyter_run", "../../secrets", extra=JUPYTER),
    case("jupyter", "aws", "jupyter_s3_prefix", "training/../", extra=JUPYTER),
    case("jupyter", "aws", "jupyter_aws_endpoint_url", "http://x" + NL, extra=JUPYTER),
    case("jupyter", "aws", "jupyter_image", IMAGE + NL),
    case("jupyter", "aws", "jupyter_lab_version", "4.6.6; rm -rf /", extra=JUPYTER),
    case("jupyter", "aws", "jupyter_run_as_user", 0, extra=JUPYTER),
    case("jupyter", "aws", "jupyter_pvc_mount_path", "/work", extra=dict(JUPYTER, jupyter_pvc_claim_name="data")),
    case("jupyter", "aws", "jupyter_load_balancer_source_ranges", ["0.0.0.0/0"],
         extra=dict(JUPYTER, jupyter_internal_load_balancer=True), quote='"0.0.0.0/0"'),
    case("jupyter", "aws", "jupyter_load_balancer_source_ranges", [], extra=dict(JUPYTER, jupyter_internal_load_balancer=True)),
    case("jupyter", "aws", "jupyter_manifest_dest", "MANIFEST_ESCAPE", extra=JUPYTER),
    case("jupyter", "local", "jupyter_namespace", INJECT, extra=JUPYTER, check=True),
    # teardown
    case("teardown", "aws", "teardown_tags", {}),
    case("teardown", "aws", "teardown_iam_path", "/"),
    case("teardown", "aws", "teardown_s3_bucket_names", ["bucket" + NL]),
    case("teardown", "aws", "teardown_retries", 1000),
    # local steps (check mode: a case that were not refused must not touch this machine)
    case("local_host", "local", "docker_engine_runc_path", '/usr/bin/runc")' + NL + "import os", check=True),
    case("local_host", "local", "docker_engine_start_timeout", BIG, check=True),
    case("local_host", "local", "docker_engine_runc_path", "/usr/local/libexec/trainfleet/runc-capclamp", check=True),
    case("local_host", "local", "docker_engine_data_root", "/var/lib/../docker", check=True),
    case("local_host", "local", "docker_engine_capclamp_images", ["trainfleet/kind-node" + NL + "x"], check=True),
    # local stack: nothing published beyond this machine without an opt-in
    case("local_aws", "local", "local_aws_host", "0.0.0.0", check=True, playbook="tests/adversarial/playbooks/local_aws.yml"),
    case("local_aws", "local", "local_aws_host", "192.168.1.10", check=True,
         playbook="tests/adversarial/playbooks/local_aws.yml"),
    case("registry", "local", "local_registry_bind_address", "0.0.0.0", check=True),
    case("registry", "local", "local_registry_bind_address", "10.0.0.5", check=True),
    case("registry", "local", "local_registry_name", "registry" + NL, check=True),
    case("cluster", "local", "kind_cluster_state", "bogus", check=True),
    case("cluster", "local", "kind_cluster_coredns_node_lost_toleration_seconds", 0, check=True),
    # the shared directory is mounted over that path on every node: never a system directory
    case("cluster", "local", "kind_cluster_shared_path", "/var/lib/containerd", check=True),
    case("cluster", "local", "kind_cluster_shared_path", "/var/local/../../etc", check=True),
]
SECRET_VALUES = ("wandb-literal-secret-0123456789", "hf-literal-secret-0123456789")


def _ids():
    seen = {}
    out = []
    for item in CASES:
        key = "%s-%s-%s" % (item["inventory"], item["step"], item["variable"])
        seen[key] = seen.get(key, 0) + 1
        out.append("%s-%d" % (key, seen[key]))
    return out


def _validation_tasks():
    """Names of the tasks that validate inputs: every task of roles/*/tasks/preflight*.yml."""
    names = set()
    for path in glob.glob(os.path.join(str(ROOT), "roles", "*", "tasks", "preflight*.yml")):
        role = path.split(os.sep)[-3]
        with open(path) as handle:
            for task in yaml.safe_load(handle) or []:
                if task.get("name"):
                    names.add("trainfleet.training.%s : %s" % (role, task["name"]))
    return names


VALIDATION_TASKS = _validation_tasks()
FAILED_RE = re.compile(r"^(fatal|failed): \[localhost\]", re.M)
TASK_RE = re.compile(r"^TASK \[(.*)\] \**$", re.M)
FIGURES = {"cases": len(CASES), "refused": 0, "created": 0, "leaked": 0, "api_calls": 0}


def failed_task(out):
    """(task header, result dict) of the first failed result in the output (a loop item's too).

    A label with a newline spreads "failed: [host] (item=...) => {json}" over several lines, so
    the result is read from the text after the first " => " that follows the failure mark.
    """
    match = FAILED_RE.search(out)
    if match is None:
        return None, None
    headers = TASK_RE.findall(out[:match.start()])
    rest = out[match.start():]
    result, _end = json.JSONDecoder().raw_decode(rest[rest.index(" => ") + 4:])
    return (headers[-1] if headers else None), result


@pytest.fixture(scope="module", autouse=True)
def figures():
    """This process's counts; conftest.pytest_sessionfinish adds up every process's part."""
    yield FIGURES
    FIGURES_PARTS.mkdir(parents=True, exist_ok=True)
    part = FIGURES_PARTS / ("%s.json" % os.environ.get("PYTEST_XDIST_WORKER", "main"))
    part.write_text(json.dumps(FIGURES) + "\n")


@pytest.mark.parametrize("item", CASES, ids=_ids())
def test_hostile_input_is_refused_before_anything(world, item):
    value = item["value"]
    quote = item["quote"]
    if value == "MANIFEST_ESCAPE":
        value = str(world.cache) + "/manifests/../../escaped-manifest.yaml"
        quote = json.dumps(value)
    world.reset_if_dirty()
    calls_before, conns_before = world.api_calls(), world.cluster.count
    extra = dict(item["extra"])
    extra[item["variable"]] = value
    run = world.run(item["playbook"], item["inventory"], extra, args=["--check"] if item["check"] else [],
                    name=item["step"] + "-" + item["variable"])
    out = run["out"]
    api_calls = world.api_calls() - calls_before
    connections = world.cluster.count - conns_before
    FIGURES["api_calls"] += api_calls + connections
    assert run["rc"] not in (0, None), "not refused (rc=%s):\n%s" % (run["rc"], out[-4000:])
    task, result = failed_task(out)
    assert task is not None, out[-4000:]
    assert task in VALIDATION_TASKS or "Validating arguments against arg spec" in task, \
        "failed in %r, not in a preflight task:\n%s" % (task, out[-3000:])
    msg = result.get("msg", "")
    assert item["variable"] in msg, "message does not name %s: %s" % (item["variable"], msg)
    # The argument spec (types, choices) quotes the value its own way: "..., got: VALUE".
    spec_quote = "got: %s" % (value,)
    assert quote in msg or ("arg spec" in task and spec_quote in msg), \
        "message does not quote %s: %s" % (quote, msg)
    FIGURES["refused"] += 1
    assert api_calls == 0 and connections == 0, \
        "%d API call(s), %d cluster connection(s) before the refusal" % (api_calls, connections)
    created = world.aws_resources() + world.files_outside_cache()
    FIGURES["created"] += len(created)
    assert created == [], created
    leaked = [s for s in SECRET_VALUES + tuple(FAKE_SECRETS.values()) if s in out]
    FIGURES["leaked"] += len(leaked)
    assert leaked == []
