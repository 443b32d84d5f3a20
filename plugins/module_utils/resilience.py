# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether a rendered PyTorchJob manifest survives the loss of one pod or node (no cluster needed)."""

from __future__ import annotations

from ansible_collections.trainfleet.training.plugins.module_utils.jobkinds import PYTORCHJOB, to_int

RISK_STATIC_RENDEZVOUS = "static-rendezvous"
RISK_RESTART_NEVER = "restart-policy-never"
RISK_RESTART_EXIT_CODE = "restart-policy-exit-code"
RISK_BACKOFF_LIMIT = "backoff-limit"
RISK_ELASTIC_NO_RESTARTS = "elastic-max-restarts"
RISK_ELASTIC_NO_SLACK = "elastic-min-equals-replicas"
RISK_NO_SNAPSHOTS = "no-snapshots"


def lost_pod_risks(manifest):
    """Why a PyTorchJob manifest cannot survive the loss of one pod (a deleted pod, a lost node).

    Returns a list of {code, message}; empty when one lost pod is survivable: an elasticPolicy
    (c10d rendezvous: the survivors re-rendezvous with the replacement pod) that may restart,
    a restart policy that restarts a survivor whatever its exit code (OnFailure, Always), a
    backoffLimit above the restarts a lost pod costs, and snapshots to resume from (otherwise
    a restart trains from epoch 1 again).
    """
    spec = manifest.get("spec") or {}
    replicas = spec.get("pytorchReplicaSpecs") or {}
    run_policy = spec.get("runPolicy") or {}
    elastic = spec.get("elasticPolicy")
    pods = sum(to_int((r or {}).get("replicas"), 1) for r in replicas.values())
    risks = []
    if elastic is None and "Master" in replicas and pods > 1:
        risks.append({"code": RISK_STATIC_RENDEZVOUS, "message": (
            "static rendezvous (Master + %d Worker(s), no elasticPolicy): when one pod is lost the others fail on "
            "the broken collective or wait in it until their timeout, and the restarted pods cannot re-rendezvous "
            "with a replacement reliably; set pytorchjob_elastic: true (c10d rendezvous, Workers only)"
            % (pods - 1))})
    never = sorted(rtype for rtype, r in replicas.items() if (r or {}).get("restartPolicy") == "Never")
    if never:
        risks.append({"code": RISK_RESTART_NEVER, "message": (
            "restartPolicy Never (%s): a pod that dies is not restarted and the job fails; use OnFailure or "
            "ExitCode (pytorchjob_restart_policy)" % ", ".join(never))})
    exit_code = sorted(rtype for rtype, r in replicas.items() if (r or {}).get("restartPolicy") == "ExitCode")
    if exit_code and pods > 1:
        risks.append({"code": RISK_RESTART_EXIT_CODE, "message": (
            "restartPolicy ExitCode (%s) with %d pods: when a peer is lost, a surviving pod's torchrun gives up "
            "with exit code 1 once its restarts fail, which ExitCode takes for a permanent error, and the job "
            "fails; use OnFailure (pytorchjob_restart_policy)" % (", ".join(exit_code), pods))})
    backoff = to_int(run_policy.get("backoffLimit"))
    if backoff is not None and not never and backoff < pods:
        risks.append({"code": RISK_BACKOFF_LIMIT, "message": (
            "backoffLimit %d is below the job's %d pods: losing one pod can cost a restart of each of them, and "
            "the operator then fails the job and deletes its pods; raise pytorchjob_backoff_limit to %d or more"
            % (backoff, pods, pods))})
    if elastic is not None:
        if to_int(elastic.get("maxRestarts"), 0) < 1:
            risks.append({"code": RISK_ELASTIC_NO_RESTARTS, "message": (
                "elasticPolicy.maxRestarts is %s: torchrun gives up at the first lost peer; set "
                "pytorchjob_elastic_max_restarts to 1 or more" % elastic.get("maxRestarts", "unset"))})
        workers = to_int((replicas.get("Worker") or {}).get("replicas"), 1)
        if to_int(elastic.get("minReplicas"), 1) >= workers > 1:
            risks.append({"code": RISK_ELASTIC_NO_SLACK, "message": (
                "elasticPolicy.minReplicas %s equals the %d Workers: the survivors of a lost pod wait for its "
                "replacement (it may never come when a node is lost) instead of going on with fewer; set "
                "pytorchjob_elastic_min_replicas below pytorchjob_worker_replicas"
                % (elastic.get("minReplicas"), workers))})
    args = PYTORCHJOB.trainer_args(manifest)
    uses_trainer = any(a.startswith("trainer.") or "trainer.train" in a for a in args)
    if uses_trainer and not any(a == "--snapshot-dir" or a.startswith("--snapshot-dir=") for a in args):
        risks.append({"code": RISK_NO_SNAPSHOTS, "message": (
            "no --snapshot-dir: a restarted pod trains from epoch 1 again; set trainjob_trainer_snapshot_dir "
            "(an s3:// prefix or a shared volume)")})
    return risks
