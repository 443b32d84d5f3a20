#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: torchx_job_request
short_description: Render the Volcano Job TorchX's kubernetes scheduler would submit for the trainer, made restricted
version_added: 0.2.0
description:
  - Uses the installed C(torchx) (requirements.txt pins the version) in-process, the way
    C(torchx run -s kubernetes --dryrun dist.ddp -j <nnodes>x<nproc> -m <module> ...) does, to get
    the C(batch.volcano.sh/v1alpha1) Job of the C(dist.ddp) component, then makes it ours, since
    TorchX's AppDef cannot express it, a fixed name (TorchX adds a random suffix) used also as the
    rendezvous id, C(app.kubernetes.io/managed-by=trainfleet) labels, the restricted pod and
    container securityContext, the S3 settings and credentials (from a Secret), pull Secrets,
    node placement, requests and limits, and the trainer image's launcher in place of
    C(torchrun) (same arguments).
  - Never contacts a cluster; returns the Job for M(kubernetes.core.k8s) to submit.
  - Fails with a clear message when C(torchx) cannot be imported.
options:
  name: {type: str, required: true, description: Name of the Volcano Job (a DNS label).}
  namespace: {type: str, required: true, description: Namespace of the job.}
  queue: {type: str, required: true, description: Volcano queue.}
  image: {type: str, required: true, description: Trainer image reference.}
  image_pull_policy: {type: str, default: IfNotPresent, choices: [Always, IfNotPresent, Never], description: Pull policy.}
  image_pull_secrets: {type: list, elements: str, default: [], description: Names of pull Secrets.}
  module: {type: str, default: trainer.train, description: Python module torchrun runs (C(-m)).}
  trainer_args: {type: list, elements: str, default: [], description: Arguments after the module.}
  launcher:
    type: list
    elements: str
    default: [torchrun]
    description: Replaces C(torchrun) at the start of TorchX's command (takes torchrun's arguments).
  nnodes: {type: int, default: 2, description: Replicas (nodes); one Volcano task each.}
  nproc_per_node: {type: int, default: 1, description: Processes per node.}
  rdzv_port: {type: int, default: 29500, description: Port of the c10d store on rank 0's node.}
  max_retries: {type: int, default: 0, description: Volcano retries (TorchX max_retries).}
  log_level: {type: str, default: WARNING, description: LOGLEVEL of torchrun.}
  service_account: {type: str, default: '', description: Service account of the pods; empty for the default.}
  labels: {type: dict, default: {}, description: Extra labels on the job and its pods.}
  annotations: {type: dict, default: {}, description: Annotations of the job.}
  env: {type: list, elements: dict, default: [], description: Extra container env entries.}
  s3_bucket: {type: str, default: '', description: TRAINFLEET_S3_BUCKET.}
  s3_prefix: {type: str, default: '', description: TRAINFLEET_S3_PREFIX.}
  output_dir: {type: str, default: '', description: TRAINFLEET_OUTPUT_DIR (the trainer's --output-dir).}
  aws_region: {type: str, default: '', description: AWS_REGION and AWS_DEFAULT_REGION.}
  aws_endpoint_url: {type: str, default: '', description: AWS_ENDPOINT_URL as the pods see it; empty for none.}
  aws_credentials_secret: {type: str, default: '', description: Secret with AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY; empty for none.}
  cpu_request: {type: str, default: 500m, description: CPU request.}
  cpu_limit: {type: str, default: '', description: CPU limit; empty for none.}
  memory_request: {type: str, default: 1Gi, description: Memory request.}
  memory_limit: {type: str, default: 2Gi, description: Memory limit; empty for none.}
  gpus: {type: int, default: 0, description: nvidia.com/gpu per pod.}
  neuron_devices: {type: int, default: 0, description: aws.amazon.com/neuron per pod (request = limit).}
  efa_devices: {type: int, default: 0, description: vpc.amazonaws.com/efa per pod (request = limit).}
  shm_size: {type: str, default: '', description: sizeLimit of TorchX's /dev/shm emptyDir; empty for none.}
  script_configmap: {type: str, default: '', description: ConfigMap of trainjob_script_dir mounted read-only as volume script; empty for none.}
  script_mount_path: {type: str, default: /opt/script, description: Where the pods see that ConfigMap's files.}
  pvc_claim_name: {type: str, default: '', description: PersistentVolumeClaim mounted as volume data in every pod; empty for none.}
  pvc_mount_path: {type: str, default: /data, description: Where the pods see the claim.}
  pvc_read_only: {type: bool, default: false, description: Mount the claim read-only.}
  extra_volumes: {type: list, elements: dict, default: [], description: 'More pod volumes, none named data, dshm or script.'}
  extra_volume_mounts: {type: list, elements: dict, default: [], description: Their mounts in the trainer container.}
  node_selector: {type: dict, default: {}, description: Node selector.}
  tolerations: {type: list, elements: dict, default: [], description: Tolerations.}
  node_lost_toleration_seconds:
    type: int
    description:
      - Seconds (1..3600) a pod stays bound to a not-ready or unreachable node before it is evicted; rendered as
        NoExecute tolerations of C(node.kubernetes.io/not-ready) and C(node.kubernetes.io/unreachable)
        after O(tolerations) (a NoExecute toleration given there for either key wins).
      - Unset, no such tolerations are added (Kubernetes' default of 300 seconds applies).
  affinity: {type: dict, default: {}, description: Affinity of the pods; empty for none.}
  run_as_user: {type: int, default: 10001, description: Numeric non-root user of the pods.}
  run_as_group: {type: int, default: 10001, description: Group of the pods.}
  security_context:
    type: dict
    default: {}
    description:
      - Keys of the pod securityContext, merged recursively over the restricted defaults
        (runAsNonRoot, runAsUser, runAsGroup, the RuntimeDefault seccompProfile), like the
        trainjob role's C(trainjob_security_context).
      - Running as root (runAsUser 0 or runAsNonRoot false) is refused.
  container_security_context:
    type: dict
    default: {}
    description:
      - Keys of the container securityContext, merged recursively over the restricted defaults
        (allowPrivilegeEscalation false, privileged false, every capability dropped), like the
        trainjob role's C(trainjob_container_security_context); allowPrivilegeEscalation
        becomes true with privileged or an added SYS_ADMIN capability.
      - Running as root (runAsUser 0 or runAsNonRoot false) is refused.
author:
  - trainfleet developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Render the TorchX job
  trainfleet.training.torchx_job_request:
    name: trainfleet-digits-torchx
    namespace: trainfleet
    queue: default
    image: localhost:5001/trainfleet/trainer:dev
    trainer_args: [--dataset=digits, --epochs=5]
  register: request

- name: Submit it
  kubernetes.core.k8s:
    state: present
    definition: "{{ request.job }}"
"""

RETURN = r"""
job:
  description: The Volcano Job (batch.volcano.sh/v1alpha1) to submit.
  returned: success
  type: dict
app_handle:
  description: The handle for C(torchx status) and C(torchx log), C(kubernetes://torchx/<namespace>:<name>).
  returned: success
  type: str
app_id:
  description: C(<namespace>:<name>).
  returned: success
  type: str
role:
  description: The TorchX role (the module's last dotted part); tasks are C(<role>-<replica>).
  returned: success
  type: str
tasks:
  description: The Volcano task names.
  returned: success
  type: list
  elements: str
rank0_pod:
  description: The pod of task C(<role>-0), the node whose c10d store the others join.
  returned: success
  type: str
rdzv_endpoints:
  description: The --rdzv_endpoint shell text of replica 0 (C(rank0)) and of the others (C(others)).
  returned: success
  type: dict
torchx_version:
  description: The torchx version that rendered the job.
  returned: success
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.trainfleet.training.plugins.module_utils.errors import TrainfleetError
from ansible_collections.trainfleet.training.plugins.module_utils.torchx_request import render


def argspec():
    return dict(
        name=dict(type="str", required=True),
        namespace=dict(type="str", required=True),
        queue=dict(type="str", required=True),
        image=dict(type="str", required=True),
        image_pull_policy=dict(type="str", default="IfNotPresent", choices=["Always", "IfNotPresent", "Never"]),
        image_pull_secrets=dict(type="list", elements="str", default=[], no_log=False),
        module=dict(type="str", default="trainer.train"),
        trainer_args=dict(type="list", elements="str", default=[]),
        launcher=dict(type="list", elements="str", default=["torchrun"]),
        nnodes=dict(type="int", default=2),
        nproc_per_node=dict(type="int", default=1),
        rdzv_port=dict(type="int", default=29500),
        max_retries=dict(type="int", default=0),
        log_level=dict(type="str", default="WARNING"),
        service_account=dict(type="str", default=""),
        labels=dict(type="dict", default={}),
        annotations=dict(type="dict", default={}),
        env=dict(type="list", elements="dict", default=[]),
        s3_bucket=dict(type="str", default=""),
        s3_prefix=dict(type="str", default=""),
        output_dir=dict(type="str", default=""),
        aws_region=dict(type="str", default=""),
        aws_endpoint_url=dict(type="str", default=""),
        aws_credentials_secret=dict(type="str", default="", no_log=False),
        cpu_request=dict(type="str", default="500m"),
        cpu_limit=dict(type="str", default=""),
        memory_request=dict(type="str", default="1Gi"),
        memory_limit=dict(type="str", default="2Gi"),
        gpus=dict(type="int", default=0),
        neuron_devices=dict(type="int", default=0),
        efa_devices=dict(type="int", default=0),
        shm_size=dict(type="str", default=""),
        script_configmap=dict(type="str", default=""),
        script_mount_path=dict(type="str", default="/opt/script"),
        pvc_claim_name=dict(type="str", default=""),
        pvc_mount_path=dict(type="str", default="/data"),
        pvc_read_only=dict(type="bool", default=False),
        extra_volumes=dict(type="list", elements="dict", default=[]),
        extra_volume_mounts=dict(type="list", elements="dict", default=[]),
        node_selector=dict(type="dict", default={}),
        tolerations=dict(type="list", elements="dict", default=[]),
        node_lost_toleration_seconds=dict(type="int"),
        affinity=dict(type="dict", default={}),
        run_as_user=dict(type="int", default=10001),
        run_as_group=dict(type="int", default=10001),
        security_context=dict(type="dict", default={}),
        container_security_context=dict(type="dict", default={}),
    )


def check_params(module):
    """The role's preflight checks every value; these are the module's own last guards."""
    params = module.params
    for option in ("nnodes", "nproc_per_node"):
        if params[option] < 1:
            module.fail_json(msg="%s must be 1 or more, got %d" % (option, params[option]))
    if not 1 <= params["rdzv_port"] <= 65535:
        module.fail_json(msg="rdzv_port must be 1..65535, got %d" % params["rdzv_port"])
    if params["run_as_user"] <= 0:
        module.fail_json(msg="run_as_user must be a non-root uid (1 or more), got %d" % params["run_as_user"])
    for option in ("security_context", "container_security_context"):
        context = params[option]
        if context.get("runAsUser") == 0 or context.get("runAsNonRoot") is False:
            module.fail_json(msg="%s must not run the pods as root (runAsUser 0 or runAsNonRoot false), got %r"
                             % (option, context))
    for option in ("neuron_devices", "efa_devices"):
        if params[option] < 0:
            module.fail_json(msg="%s must be 0 or more, got %d" % (option, params[option]))
    seconds = params["node_lost_toleration_seconds"]
    if seconds is not None and not 1 <= seconds <= 3600:
        module.fail_json(msg="node_lost_toleration_seconds must be 1..3600, got %d" % seconds)
    if not params["launcher"]:
        module.fail_json(msg="launcher must name a program (e.g. [torchrun] or [python3, -m, torch.distributed.run])")
    for item in params["env"]:
        if not isinstance(item.get("name"), str) or not item["name"]:
            module.fail_json(msg="every env entry needs a name, got %r" % (item,))


def main():
    module = AnsibleModule(argument_spec=argspec(), supports_check_mode=True)
    check_params(module)
    try:
        job, info = render(module.params)
    except TrainfleetError as exc:  # TorchxRequestError, or pod_settings' PodSettingsError
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, job=job, **info)


if __name__ == "__main__":
    main()
