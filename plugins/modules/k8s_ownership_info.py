#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: k8s_ownership_info
short_description: Tell what on a Kubernetes cluster trainfleet put there, sorted the way the teardown deletes it
version_added: 0.1.0
description:
  - The Kubernetes counterpart of M(trainfleet.training.aws_ownership_info). In one run, reads the
    training jobs, Deployments and Services, claims, volumes, StorageClasses, the training
    operator and the namespaces the teardown's workloads part deletes, and returns which are
    trainfleet's (labelled C(app.kubernetes.io/managed-by=trainfleet)) in deletion order, and which
    are kept and why.
  - A job kind or CRD the server does not serve is read as having no objects.
  - Secrets are read only for their names and types; their values are never returned.
  - Read-only; never changes anything.
author:
  - trainfleet developers (!UNKNOWN)
options:
  namespaces:
    description: Namespaces of the training jobs, workloads and claims (the role's C(teardown_namespaces)).
    type: list
    elements: str
    required: true
  job_kinds:
    description:
      - Kinds of the training jobs (PyTorchJob is C(kubeflow.org/v1), MPIJob C(kubeflow.org/v2beta1), VolcanoJob
        Volcano's C(Job) in C(batch.volcano.sh/v1alpha1), other kinds C(kubeflow.org/v1) unless named in
        O(job_api_versions)). The result's C(jobs) carry the API's kind (C(Job) for a VolcanoJob).
    type: list
    elements: str
    default: [PyTorchJob, MPIJob, VolcanoJob]
  job_api_versions:
    description: API version of a job kind, by kind, over the defaults above.
    type: dict
    default: {}
  storage_class_names:
    description: StorageClasses the storage step created; ours only when they also carry our label.
    type: list
    elements: str
    default: []
  training_operator:
    description: Whether the training operator is to be removed when trainfleet installed it (and no job that is not ours keeps it).
    type: bool
    default: true
  operator_namespace:
    description: Namespace of the training operator.
    type: str
    default: kubeflow
  operator_deployment:
    description: Name of the training operator's controller Deployment.
    type: str
    default: training-operator
extends_documentation_fragment:
  - trainfleet.training.k8s_auth
"""

EXAMPLES = r"""
- name: What on the cluster is trainfleet's
  trainfleet.training.k8s_ownership_info:
    kubeconfig: ~/.cache/trainfleet/kubeconfig-trainfleet
    namespaces: [trainfleet]
    storage_class_names: [trainfleet-fsx]
  register: ownership

- name: Delete our claims
  kubernetes.core.k8s:
    kubeconfig: ~/.cache/trainfleet/kubeconfig-trainfleet
    kind: PersistentVolumeClaim
    namespace: "{{ item.namespace }}"
    name: "{{ item.name }}"
    state: absent
  loop: "{{ ownership.claims }}"
"""

RETURN = r"""
jobs:
  description: Our training jobs in O(namespaces) (namespace by namespace, kind by kind).
  returned: success
  type: list
  elements: dict
  contains:
    api_version:
      description: API version of the job's kind.
      type: str
    kind:
      description: Kind of the job.
      type: str
    namespace:
      description: Its namespace.
      type: str
    name:
      description: Its name.
      type: str
    ref:
      description: C(Kind namespace/name).
      type: str
workloads:
  description: Our Services and Deployments in O(namespaces), but the training operator's (same keys as RV(jobs)).
  returned: success
  type: list
  elements: dict
claims:
  description: Our PersistentVolumeClaims in O(namespaces) (keys namespace, name, ref).
  returned: success
  type: list
  elements: dict
dynamic_volumes:
  description: Volumes bound to our claims with reclaimPolicy Delete, which their CSI driver deletes with the claims.
  returned: success
  type: list
  elements: str
static_volumes:
  description: Volumes labelled ours whose claimRef is in one of O(namespaces) (deleted after the claims).
  returned: success
  type: list
  elements: str
storage_classes:
  description: StorageClasses labelled ours and named in O(storage_class_names).
  returned: success
  type: list
  elements: str
operator:
  description: The training operator.
  returned: success
  type: dict
  contains:
    exists:
      description: Whether its controller Deployment exists.
      type: bool
    ours:
      description: Whether trainfleet installed it (annotation C(trainfleet.io/manifests-sha256) or our labels on the controller).
      type: bool
    marked:
      description: Whether its controller carries our labels (its objects can be found by label).
      type: bool
    remove:
      description: Whether it goes (O(training_operator), marked, and no blocker).
      type: bool
    blockers:
      description: Jobs of its CRDs' kinds, anywhere, that are not ours in O(namespaces) (its CRDs would take them with them).
      type: list
      elements: str
    selectors:
      description:
        - The label selectors that find its objects (our C(app.kubernetes.io/managed-by) and its
          C(app.kubernetes.io/component)), for deleting them.
      type: list
      elements: str
namespaces:
  description: Our namespaces (and the operator's when it goes) that hold nothing else; deleted last.
  returned: success
  type: list
  elements: str
namespaces_kept:
  description: Our namespaces that hold what is not ours, each with that content (C(Kind/name)).
  returned: success
  type: dict
kept:
  description: What was found and is not trainfleet's (C(Kind namespace/name)).
  returned: success
  type: list
  elements: str
kept_why:
  description: What is trainfleet's but kept, each with the reason.
  returned: success
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.trainfleet.training.plugins.module_utils.errors import TrainfleetError
from ansible_collections.trainfleet.training.plugins.module_utils.k8s import (
    ResourceReader,
    auth_arg_spec,
    get_api_client,
    require_kubernetes,
)
from ansible_collections.trainfleet.training.plugins.module_utils.k8s_ownership import JOB_API_VERSIONS, gather


def argspec():
    spec = auth_arg_spec()
    spec.update(
        namespaces=dict(type="list", elements="str", required=True),
        job_kinds=dict(type="list", elements="str", default=["PyTorchJob", "MPIJob", "VolcanoJob"]),
        job_api_versions=dict(type="dict", default={}),
        storage_class_names=dict(type="list", elements="str", default=[]),
        training_operator=dict(type="bool", default=True),
        operator_namespace=dict(type="str", default="kubeflow"),
        operator_deployment=dict(type="str", default="training-operator"),
    )
    return spec


def main():
    module = AnsibleModule(argument_spec=argspec(), supports_check_mode=True)
    require_kubernetes(module)
    params = module.params
    api_versions = dict((str(k), str(v)) for k, v in params["job_api_versions"].items())
    try:
        reader = ResourceReader(get_api_client(params))
        result = gather(reader, params["namespaces"], params["job_kinds"], params["storage_class_names"],
                        training_operator=params["training_operator"], operator_namespace=params["operator_namespace"],
                        operator_deployment=params["operator_deployment"],
                        job_api_versions=dict(JOB_API_VERSIONS, **api_versions))
    except TrainfleetError as exc:
        module.fail_json(msg=exc.msg, **exc.details)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
