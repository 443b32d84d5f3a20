# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What on a cluster is trainfleet's, for the teardown's workloads part (k8s_ownership_info).

Ours = labelled app.kubernetes.io/managed-by=trainfleet; everything else is kept and listed.
The sort_* functions are pure (plain dicts in, plain dicts out); gather() reads what they need
through a reader (module_utils.k8s.ResourceReader: list(api_version, kind, namespace,
label_selector), get(api_version, kind, name, namespace)) and returns the teardown's lists.
The messages are the ones roles/teardown prints.
"""

from __future__ import annotations

from ansible_collections.trainfleet.training.plugins.module_utils.checks import unique
from ansible_collections.trainfleet.training.plugins.module_utils.errors import TrainfleetError
from ansible_collections.trainfleet.training.plugins.module_utils.jobkinds import KINDS

LABEL_KEY = "app.kubernetes.io/managed-by"
LABEL_VALUE = "trainfleet"
MARKER = "%s=%s" % (LABEL_KEY, LABEL_VALUE)
NOT_MARKED = "%s!=%s" % (LABEL_KEY, LABEL_VALUE)
COMPONENT_KEY = "app.kubernetes.io/component"
OPERATOR_COMPONENT = "training-operator"
OPERATOR_MARKER = "%s=%s" % (COMPONENT_KEY, OPERATOR_COMPONENT)
# Only the training_operator step's server-side apply writes this annotation on the controller.
OPERATOR_ANNOTATION = "trainfleet.io/manifests-sha256"

# API version of each training job kind the train step submits (module_utils.jobkinds: PyTorchJob,
# MPIJob, VolcanoJob); kubeflow.org/v1 for a kind not listed.
JOB_API_VERSIONS = dict((label, kind.api_version) for label, kind in KINDS.items())
DEFAULT_JOB_API_VERSION = "kubeflow.org/v1"
# Our workloads besides the training jobs, in the order they are deleted: the tensorboard and jupyter
# steps' Services and Deployments, the jupyter step's token Secret, the evaluate step's Jobs.
WORKLOAD_KINDS = (("v1", "Service"), ("apps/v1", "Deployment"), ("v1", "Secret"), ("batch/v1", "Job"))
# A namespace with our label goes only when it holds none of these without our label (objects
# with an owner are judged through their owner); Secrets are read too, their values never kept.
NAMESPACE_CONTENT_KINDS = (
    ("v1", "Pod"), ("v1", "Service"), ("v1", "ConfigMap"), ("v1", "ServiceAccount"), ("v1", "PersistentVolumeClaim"),
    ("v1", "ResourceQuota"), ("v1", "LimitRange"), ("apps/v1", "Deployment"), ("apps/v1", "StatefulSet"),
    ("apps/v1", "DaemonSet"), ("batch/v1", "Job"), ("batch/v1", "CronJob"), ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"), ("networking.k8s.io/v1", "NetworkPolicy"),
    ("networking.k8s.io/v1", "Ingress"))
# What Kubernetes itself puts in every namespace.
NAMESPACE_BUILTINS = ("ConfigMap/kube-root-ca.crt", "ServiceAccount/default")
SERVICE_ACCOUNT_TOKEN = "kubernetes.io/service-account-token"


class OwnershipError(TrainfleetError):
    """The cluster's objects cannot be sorted (an object without a name, a bad option)."""


def _meta(obj):
    return (obj or {}).get("metadata") or {}


def labels(obj):
    return _meta(obj).get("labels") or {}


def is_ours(obj):
    return labels(obj).get(LABEL_KEY) == LABEL_VALUE


def _name(obj):
    name = _meta(obj).get("name")
    if not name:
        raise OwnershipError("an object without metadata.name: %r" % (obj,))
    return name


def _namespace(obj):
    return _meta(obj).get("namespace") or ""


def job_api_version(kind, api_versions=None):
    return (api_versions or JOB_API_VERSIONS).get(kind, DEFAULT_JOB_API_VERSION)


def job_api_kind(kind):
    """The API's kind of a job kind as the teardown names it: VolcanoJob is Volcano's "Job"
    (batch.volcano.sh); the others are their own."""
    return KINDS[kind].name if kind in KINDS else kind


def sort_jobs(listed):
    """listed: [(kind, api_version, [job objects])] in reading order -> (ours, others); each an
    entry {api_version, kind (the API's), namespace, name, ref (with the kind as named)}."""
    ours, others = [], []
    for kind, api_version, objects in listed:
        for obj in objects:
            entry = dict(api_version=api_version, kind=job_api_kind(kind), namespace=_namespace(obj), name=_name(obj))
            entry["ref"] = "%s %s/%s" % (kind, entry["namespace"], entry["name"])
            (ours if is_ours(obj) else others).append(entry)
    return ours, others


def name_workloads(listed):
    """listed: [(api_version, kind, [objects already selected by our marker])] -> entries."""
    out = []
    for api_version, kind, objects in listed:
        for obj in objects:
            entry = dict(api_version=api_version, kind=kind, namespace=_namespace(obj), name=_name(obj))
            entry["ref"] = "%s %s/%s" % (kind, entry["namespace"], entry["name"])
            out.append(entry)
    return out


def sort_claims_and_volumes(claims, volumes, namespaces):
    """Our claims, and the volumes that go with them.

    dynamic: bound to one of our claims, not static, reclaimPolicy Delete: its CSI driver deletes
    it with the claim (waited for). retained: the same with another policy: kept, said why.
    static: labelled ours with a claimRef in one of `namespaces`: deleted after the claims.
    Returns dict(claims, kept, dynamic_volumes, static_volumes, kept_why)."""
    our_claims, kept = [], []
    our_volume_names = []
    for obj in claims:
        entry = dict(namespace=_namespace(obj), name=_name(obj))
        entry["ref"] = "PersistentVolumeClaim %s/%s" % (entry["namespace"], entry["name"])
        if is_ours(obj):
            our_claims.append(entry)
            volume = ((obj.get("spec") or {}).get("volumeName")) or ""
            if volume:
                our_volume_names.append(volume)
        else:
            kept.append(entry["ref"])
    static = [_name(v) for v in volumes
              if is_ours(v) and (((v.get("spec") or {}).get("claimRef") or {}).get("namespace") or "") in namespaces]
    bound = [v for v in volumes if _name(v) in our_volume_names and _name(v) not in static]
    dynamic = [_name(v) for v in bound if (v.get("spec") or {}).get("persistentVolumeReclaimPolicy") == "Delete"]
    kept_why = ["PersistentVolume %s (reclaimPolicy Retain: its data stays; delete it by hand)" % _name(v)
                for v in bound if (v.get("spec") or {}).get("persistentVolumeReclaimPolicy") != "Delete"]
    return dict(claims=our_claims, kept=kept, dynamic_volumes=dynamic, static_volumes=static, kept_why=kept_why)


def sort_storage_classes(classes, names):
    """Ours: labelled ours and named in `names`. Returns dict(storage_classes, kept, kept_why)."""
    marked = [_name(c) for c in classes if is_ours(c)]
    return dict(
        storage_classes=[n for n in marked if n in names],
        kept=["StorageClass " + _name(c) for c in classes if _name(c) not in marked],
        kept_why=["StorageClass %s (labelled trainfleet but not in teardown_storage_class_names)" % n
                  for n in marked if n not in names])


def operator_state(controller):
    """The controller Deployment (or None) -> dict(exists, ours, marked).

    Installed by trainfleet (ours): the training_operator step's apply wrote its annotation, or
    it carries our labels; only a marked (labelled) install can be found, and removed, by label."""
    meta = _meta(controller)
    found = labels(controller)
    applied = OPERATOR_ANNOTATION in (meta.get("annotations") or {})
    marked = found.get(LABEL_KEY) == LABEL_VALUE and found.get(COMPONENT_KEY) == OPERATOR_COMPONENT
    return dict(exists=bool(controller), ours=bool(applied or marked), marked=bool(marked))


def crd_job_kind(crd):
    """(api_version, kind, plural) a CRD serves: its group and storage version."""
    spec = (crd or {}).get("spec") or {}
    versions = spec.get("versions") or []
    storage = [v for v in versions if v.get("storage")] or versions
    if not storage or not spec.get("group"):
        raise OwnershipError("CustomResourceDefinition %s names no group or version" % _meta(crd).get("name"))
    names = spec.get("names") or {}
    return "%s/%s" % (spec["group"], storage[0]["name"]), names.get("kind"), names.get("plural")


def operator_blockers(listed, namespaces):
    """listed: [(kind, [objects of the operator's kinds, all namespaces])] -> refs of those that are
    not ours in `namespaces` (its CRDs would take them with them)."""
    return ["%s %s/%s" % (kind, _namespace(obj), _name(obj))
            for kind, objects in listed for obj in objects
            if not (_namespace(obj) in namespaces and is_ours(obj))]


def decide_operator(state, blockers, remove_wanted, namespace, deployment):
    """dict(remove, kept, kept_why) for the training operator."""
    operator = "Deployment %s/%s" % (namespace, deployment)
    kept, why = [], []
    if state["exists"] and not state["ours"]:
        kept.append(operator + " (training operator)")
    if state["ours"] and not remove_wanted:
        why.append(operator + " (teardown_training_operator is false)")
    if state["ours"] and not state["marked"] and remove_wanted:
        why.append(operator + " (installed by a trainfleet older than its labels: run the training_operator step once,"
                   " then the teardown again)")
    if blockers:
        why.append(operator + " (jobs that are not ours would go with its CRDs: " + ", ".join(blockers) + ")")
    return dict(remove=bool(remove_wanted and state["marked"] and not blockers), kept=kept, kept_why=why)


def sort_namespaces(found):
    """found: the Namespace objects that exist, in candidate order -> (marked names, kept refs)."""
    marked = [_name(n) for n in found if is_ours(n)]
    kept = ["Namespace " + _name(n) for n in found if not is_ours(n)]
    return marked, kept


def foreign_content(content, other_jobs, marked):
    """What our namespaces hold that is not ours.

    content: [(namespace, kind, [objects without our label])], Secrets included (only their
    metadata and type are looked at); other_jobs: the job entries that are not ours.
    Returns {namespace: ["Kind/name", ...]} for the namespaces that hold something."""
    out = {}
    for namespace, kind, objects in content:
        for obj in objects:
            ref = "%s/%s" % (kind, _name(obj))
            if "ownerReferences" in _meta(obj) or ref in NAMESPACE_BUILTINS or obj.get("type") == SERVICE_ACCOUNT_TOKEN:
                continue
            out.setdefault(namespace, []).append(ref)
    for job in other_jobs:
        if job["namespace"] in marked:
            out.setdefault(job["namespace"], []).append("%s/%s" % (job["kind"], job["name"]))
    return out


def _names_only(objects):
    """Secrets reduced to what the sort needs: their values never leave the reader's call."""
    return [dict(metadata=dict((k, v) for k, v in _meta(o).items() if k in ("name", "namespace", "ownerReferences")),
                 type=o.get("type")) for o in objects]


def gather(reader, namespaces, job_kinds, storage_class_names, training_operator=True,
           operator_namespace="kubeflow", operator_deployment="training-operator", job_api_versions=None):
    """Read what the teardown needs, sorted. Returns the module's result (see k8s_ownership_info)."""
    namespaces = list(namespaces)
    kept, kept_why = [], []

    listed = [(kind, job_api_version(kind, job_api_versions),
               reader.list(job_api_version(kind, job_api_versions), job_api_kind(kind), ns))
              for ns in namespaces for kind in job_kinds]
    jobs, other_jobs = sort_jobs(listed)
    kept += [j["ref"] for j in other_jobs]

    workloads = name_workloads([(api_version, kind, reader.list(api_version, kind, ns, MARKER + ",%s!=%s" % (COMPONENT_KEY, OPERATOR_COMPONENT)))
                                for ns in namespaces for api_version, kind in WORKLOAD_KINDS])

    claims = [c for ns in namespaces for c in reader.list("v1", "PersistentVolumeClaim", ns)]
    storage = sort_claims_and_volumes(claims, reader.list("v1", "PersistentVolume"), namespaces)
    kept += storage["kept"]
    kept_why += storage["kept_why"]

    classes = sort_storage_classes(reader.list("storage.k8s.io/v1", "StorageClass"), list(storage_class_names))
    kept += classes["kept"]
    kept_why += classes["kept_why"]

    state = operator_state(reader.get("apps/v1", "Deployment", operator_deployment, operator_namespace))
    blockers = []
    if training_operator and state["marked"]:
        crds = reader.list("apiextensions.k8s.io/v1", "CustomResourceDefinition", label_selector=MARKER + "," + OPERATOR_MARKER)
        served = [crd_job_kind(crd) for crd in crds]
        blockers = operator_blockers([(kind, reader.list(api_version, kind)) for api_version, kind, _plural in served], namespaces)
    operator = decide_operator(state, blockers, bool(training_operator), operator_namespace, operator_deployment)
    kept += operator["kept"]
    kept_why += operator["kept_why"]

    candidates = unique(namespaces + ([operator_namespace] if operator["remove"] else []))
    found = [n for n in (reader.get("v1", "Namespace", ns) for ns in candidates) if n]
    marked, kept_namespaces = sort_namespaces(found)
    kept += kept_namespaces
    content = [(ns, kind, reader.list(api_version, kind, ns, NOT_MARKED))
               for ns in marked for api_version, kind in NAMESPACE_CONTENT_KINDS]
    content += [(ns, "Secret", _names_only(reader.list("v1", "Secret", ns, NOT_MARKED))) for ns in marked]
    foreign = foreign_content(content, other_jobs, marked)
    kept_why += ["Namespace %s (holds what is not ours: %s)" % (ns, ", ".join(foreign[ns])) for ns in sorted(foreign)]

    return dict(
        jobs=jobs,
        workloads=workloads,
        claims=storage["claims"],
        dynamic_volumes=storage["dynamic_volumes"],
        static_volumes=storage["static_volumes"],
        storage_classes=classes["storage_classes"],
        operator=dict(exists=state["exists"], ours=state["ours"], marked=state["marked"], remove=operator["remove"],
                      blockers=blockers, selectors=[MARKER, OPERATOR_MARKER]),
        namespaces=[ns for ns in marked if ns not in foreign],
        namespaces_kept=foreign,
        kept=kept,
        kept_why=kept_why,
    )
