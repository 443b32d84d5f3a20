# -*- coding: utf-8 -*-
"""The arithmetic and the proofs of molecule/default/faults.yml, without a cluster.

faults.yml measures each fault from the trainer's own lines (pytorchjob_logs match mode: the
kubelet's timestamps) with tasks/fault_compute.yml and checks the figures with
tasks/fault_proofs.yml. Both are pure Ansible tasks; here they run with ansible-playbook on
localhost, on made-up timelines built from the trainer's real line formats (trainer.metrics) and
parsed like the module parses them, once as a good run (the figures are checked) and once per
kind of bad run (the matching proof must fail).
"""

from __future__ import annotations

import copy
import datetime
import json
import os
import re
import subprocess
import sys

import pytest

from ansible_collections.trainfleet.training.plugins.module_utils import trainerlog as tlog
from trainer import metrics

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TASKS = os.path.join(ROOT, "molecule", "default", "tasks")
CASE_TIMEOUT = 300  # per case: the bound of one case's playbook before they shared a run
T0 = 1735725600.0  # 2025-01-01T10:00:00Z
EPOCHS = 8
NODE_A, NODE_B = "trainfleet-worker", "trainfleet-worker2"
BASELINE_ACC = 0.95875


def _utc(epoch_s):
    return datetime.datetime.fromtimestamp(epoch_s, datetime.timezone.utc).replace(tzinfo=None)


def line(job, index, node, at, text):
    """One match as pytorchjob_logs returns it."""
    return {"pod": "%s-worker-%d" % (job, index), "replica_type": "worker", "replica_index": index, "node": node,
            "time": _utc(at).strftime("%Y-%m-%dT%H:%M:%S.%fZ"), "epoch_s": round(at, 6), "line": text,
            "trainer": tlog.parse_trainer_line(text)}


def epochs(job, index, node, start, first, last, period=5.0, acc=BASELINE_ACC, snapshots=True):
    out = []
    for epoch in range(first, last + 1):
        at = start + (epoch - first + 1) * period
        record = {"epoch": epoch, "loss": 0.1, "test_acc": acc if epoch == last else 0.9, "samples_per_s": 900.0}
        out.append(line(job, index, node, at, metrics.epoch_line(record)))
        if snapshots:
            uri = "s3://trainfleet-local/training/%s/snapshots/%s" % (job, "snapshot-epoch-%05d.pt" % epoch)
            out.append(line(job, index, node, at + 0.2, metrics.snapshot_line(epoch, uri)))
    return out


def ranks(job, at, world=2, nodes=(NODE_A, NODE_B)):
    return [line(job, i, nodes[i], at, metrics.rank_line(i, 0, world, i, "%s-worker-%d" % (job, i))) for i in range(world)]


def result(job, index, node, at, acc=BASELINE_ACC, resumed=0, restarts=0, world=2):
    return line(job, index, node, at, metrics.result_line({
        "final_accuracy": acc, "epochs": EPOCHS, "resumed_from_epoch": resumed, "restarts": restarts, "world_size": world}))


def resume(job, index, node, at, epoch, restarts=0):
    uri = "s3://trainfleet-local/training/%s/snapshots/snapshot-epoch-%05d.pt" % (job, epoch)
    return line(job, index, node, at, metrics.resume_line(epoch, uri, restarts))


def info(phase="Succeeded", start=T0, end=T0 + 60, failure=None, restarts=0):
    return {"phase": phase, "terminal": True, "elapsed_seconds": end - start,
            "completion_time": _utc(end).strftime("%Y-%m-%dT%H:%M:%SZ"), "restarts": restarts,
            "restarts_by_replica": {"Worker": {"restarts": restarts, "failed": 0, "pods": {}}},
            "restart_reasons": [{"pod": "x-worker-1", "container": "pytorch", "reason": "Error", "exit_code": 1,
                                 "log_tail": ["RuntimeError: store lost"], "log_error": None}] if restarts else [],
            "failure": failure, "conditions": [{"type": "Created"}, {"type": "Running"}, {"type": phase}]}


def fault(at, action):
    return {"epoch_s": at, "utc": _utc(at).isoformat(), "time": _utc(at).isoformat() + "Z", "action": action}


def recovering(job, fault_at, resume_at, rank0_before=(0, NODE_A), rank0_after=(0, NODE_A), resumed=3, acc=0.9581,
               world_after=2, after_epochs=None):
    """A run whose rank 0 wrote epochs 1..3 before the fault and resumed from `resumed` after it."""
    i0, n0 = rank0_before
    i1, n1 = rank0_after
    seen = ranks(job, T0) + epochs(job, i0, n0, T0, 1, 3)
    after = [resume(job, i1, n1, resume_at, resumed)]
    after += ranks(job, resume_at - 1, world=world_after, nodes=(n1, NODE_B))
    for epoch in after_epochs or range(resumed + 1, EPOCHS + 1):
        after += epochs(job, i1, n1, resume_at + (epoch - resumed - 1) * 5.0, epoch, epoch, acc=acc)
    after.append(result(job, i1, n1, resume_at + 5.0 * (EPOCHS - resumed) + 1, acc=acc, resumed=resumed, restarts=1,
                        world=world_after))
    return seen, after


def scenario():
    """A good run of all seven jobs: (vars for the playbook, what is expected)."""
    jobs, seen, at = {}, {}, {}
    base = ranks("fault-baseline", T0) + epochs("fault-baseline", 0, NODE_A, T0, 1, EPOCHS)
    base.append(result("fault-baseline", 0, NODE_A, T0 + 5 * EPOCHS + 1))
    jobs["fault-baseline"] = {"read": base, "info": info()}

    at["fault-worker"] = fault(T0 + 17.0, "delete pod fault-worker-worker-1")
    seen["fault-worker"], after = recovering("fault-worker", T0 + 17.0, T0 + 41.0)
    # the Worker that stayed restarts its process in place: no container restart
    jobs["fault-worker"] = {"read": after, "info": info(end=T0 + 90, restarts=0)}

    # rank 0 was on worker-1 (ranks follow join order); worker-0 deleted; the survivor resumes
    at["fault-rdzv"] = fault(T0 + 17.5, "delete pod fault-rdzv-worker-0")
    seen["fault-rdzv"], after = recovering("fault-rdzv", T0 + 17.5, T0 + 60.0, rank0_before=(1, NODE_B),
                                           rank0_after=(1, NODE_B))
    jobs["fault-rdzv"] = {"read": after, "info": info(end=T0 + 110, restarts=2)}

    # the operator's pod: no restart at all
    at["fault-operator"] = fault(T0 + 17.0, "delete the training operator pod(s) training-operator-abc")
    run = ranks("fault-operator", T0) + epochs("fault-operator", 0, NODE_A, T0, 1, EPOCHS)
    run.append(result("fault-operator", 0, NODE_A, T0 + 5 * EPOCHS + 1))
    seen["fault-operator"] = run[:6]
    jobs["fault-operator"] = {"read": run, "info": info()}

    # S3 away after epoch 3: 3 retries of the metrics write, the snapshot of epoch 4 fails, 5.. are whole
    at["fault-s3"] = fault(T0 + 17.0, "REJECT pod traffic to S3")
    run = ranks("fault-s3", T0) + epochs("fault-s3", 0, NODE_A, T0, 1, 3)
    run += epochs("fault-s3", 0, NODE_A, T0 + 15, 4, 4, snapshots=False)
    run += [line("fault-s3", 0, NODE_A, T0 + 20.5 + k, metrics.storage_retry_line(
        "write", "s3://trainfleet-local/training/fault-s3/metrics.jsonl", k + 1, 4, 0.5, ConnectionResetError("reset")))
        for k in range(3)]
    run.append(line("fault-s3", 0, NODE_A, T0 + 27.0, metrics.snapshot_failed_line(4, OSError("refused"))))
    run += epochs("fault-s3", 0, NODE_A, T0 + 27, 5, EPOCHS)
    run.append(result("fault-s3", 0, NODE_A, T0 + 27 + 5 * 4 + 1, acc=0.95875))
    jobs["fault-s3"] = {"read": run, "info": info(end=T0 + 75)}

    # a node: rank 0 on worker-0 (the survivor's node) goes on alone
    at["fault-node"] = fault(T0 + 17.0, "docker stop of node " + NODE_B)
    seen["fault-node"], after = recovering("fault-node", T0 + 17.0, T0 + 52.0, acc=0.9556, world_after=1)
    jobs["fault-node"] = {"read": after, "info": info(end=T0 + 120, restarts=0)}

    jobs["fault-fatal"] = {"read": [], "info": info(
        phase="Failed", end=T0 + 75, restarts=6, failure={
            "reason": "PyTorchJobFailed", "message": "Job fault-fatal has failed because it has reached the specified backoff limit",
            "source": "snapshot", "pod": "fault-fatal-worker-0", "exit_code": 1})}

    extras = {
        "fault-operator": {"operator_ready_at": "2025-01-01T10:00:31Z", "operator_recovery_s": 14.0},
        "fault-s3": {"outage_s": 12.5, "retries_in_outage": 3, "snapshot_failed_in_outage": [4],
                     "back_to_whole_snapshot_s": 3.0, "snapshot_after_outage": 5},
    }
    variables = {"jobs": jobs, "seen": seen, "at": at, "extras": extras, "_fault_epochs": EPOCHS,
                 "_fault_accuracy_tolerance": 0.02, "_fault_recovery_timeout": 480, "_fault_finish_timeout": 600,
                 "_fault_deadline": 900, "_fault_victim": NODE_B, "_fault_survivor_node": NODE_A}
    return variables


# One play per case, all in one ansible-playbook run (one process start instead of one per case).
# Each play computes its case's figures, writes them, and checks them inside block/rescue; it prints
# CASE <id>: PASSED, or FAILED <the first task that failed>.
PLAY = """
- name: {case}
  hosts: localhost
  gather_facts: false
  connection: local
  vars_files: [{varfile}]
  tasks:
    - name: Compute and check the figures
      block:
        - name: Start empty
          ansible.builtin.set_fact:
            _fault_figures: {{}}
            _fault_seen: "{{{{ seen }}}}"
            _fault_at: "{{{{ at }}}}"

        - name: Compute each job's figures
          ansible.builtin.include_tasks: {tasks}/fault_compute.yml
          loop: "{{{{ jobs | dict2items }}}}"
          vars:
            _job: "{{{{ item.key }}}}"
            _fault_read: "{{{{ item.value.read }}}}"
            _fault_job_info: "{{{{ item.value.info }}}}"

        - name: Add what faults.yml measures besides (operator, S3)
          ansible.builtin.set_fact:
            _fault_figures: "{{{{ _fault_figures | combine(extras, recursive=true) }}}}"

        - name: Keep the figures
          ansible.builtin.copy:
            content: "{{{{ _fault_figures | to_nice_json }}}}"
            dest: {out}
            mode: "0600"

        - name: Check them
          ansible.builtin.include_tasks: {tasks}/fault_proofs.yml

        - name: Passed
          ansible.builtin.set_fact:
            _outcome: PASSED
      rescue:
        - name: Failed
          ansible.builtin.set_fact:
            _outcome: "FAILED {{{{ ansible_failed_task.name }}}}"

    - name: Outcome
      ansible.builtin.debug:
        msg: "CASE {case}: {{{{ _outcome }}}}"
"""


def run_cases(tmp_path, cases):
    """Run every case (id -> variables) in one playbook: ({id: (outcome, figures)}, output)."""
    plays = []
    for case, variables in cases.items():
        varfile = tmp_path / ("vars-%s.json" % case)
        varfile.write_text(json.dumps(variables))
        plays.append(PLAY.format(case=case, varfile=varfile, tasks=TASKS, out=tmp_path / ("figures-%s.json" % case)))
    playbook = tmp_path / "proofs.yml"
    playbook.write_text("---" + "".join(plays))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), ANSIBLE_STDOUT_CALLBACK="default",
               ANSIBLE_FILTER_PLUGINS=os.path.join(ROOT, "molecule", "default", "filter_plugins"))
    playbook_bin = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    if not os.path.exists(playbook_bin):
        playbook_bin = "ansible-playbook"
    proc = subprocess.run([playbook_bin, "-i", "localhost,", "-e", json.dumps({"ansible_python_interpreter": sys.executable}),
                           str(playbook)], cwd=ROOT, env=env, capture_output=True, text=True, check=False,
                          timeout=CASE_TIMEOUT * len(cases))
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    outcomes = dict(re.findall(r'"msg": "CASE ([a-z0-9_]+): ([^"]*)"', output))
    assert set(outcomes) == set(cases), output[-4000:]
    results = {}
    for case in cases:
        figures_file = tmp_path / ("figures-%s.json" % case)
        results[case] = (outcomes[case], json.loads(figures_file.read_text()) if figures_file.exists() else None)
    return results, output


def test_good_run_figures_and_proofs(proof_runs):
    results, output = proof_runs
    outcome, figures = results["good"]
    assert outcome == "PASSED", output[-4000:]
    worker = figures["fault-worker"]
    assert worker["recovery_s"] == 24.0  # fault at +17 s, resume line at +41 s
    assert worker["progress_s"] == 29.0  # epoch 4 done 5 s after the resume
    assert (worker["last_epoch_before_fault"], worker["last_snapshot_before_fault"]) == (3, 3)
    assert worker["resumed_from_epoch"] == 3 and worker["epochs_lost"] == 0
    assert worker["final_segment"] == [4, 5, 6, 7, 8]
    assert worker["rank0_pod_at_fault"] == "fault-worker-worker-0" and worker["resumed_by"] == "fault-worker-worker-0"
    assert worker["fault_to_end_s"] == 73.0
    assert figures["fault-rdzv"]["rank0_pod_at_fault"] == "fault-rdzv-worker-1"
    assert figures["fault-rdzv"]["recovery_s"] == 42.5
    assert figures["fault-rdzv"]["restart_logs"] == 1 and figures["fault-rdzv"]["restart_logs_missing"] == []
    node = figures["fault-node"]
    assert (node["final_world_size"], node["final_rank0_node"]) == (1, NODE_A)
    baseline = figures["fault-baseline"]
    assert baseline["epoch_lines"] == list(range(1, EPOCHS + 1)) and baseline["recovery_s"] is None
    assert baseline["final_accuracy"] == BASELINE_ACC and baseline["world_sizes"] == [2, 2]
    s3 = figures["fault-s3"]
    assert s3["snapshot_failures"] == [4] and s3["storage_retries"] == 3 and s3["resumes"] == []
    assert s3["snapshots"] == [1, 2, 3, 5, 6, 7, 8]
    fatal = figures["fault-fatal"]
    assert fatal["phase"] == "Failed" and fatal["submitted_to_end_s"] == 75


def _bad(mutate):
    variables = scenario()
    mutate(variables)
    return variables


def _retrain_epoch_5(v):
    job = v["jobs"]["fault-worker"]
    extra = [m for m in job["read"] if m["trainer"]["kind"] == "epoch" and m["trainer"]["epoch"] == 5][0]
    again = copy.deepcopy(extra)
    again["epoch_s"] += 2.0
    job["read"].append(again)


def _resume_from_an_older_snapshot(v):
    for match in v["jobs"]["fault-rdzv"]["read"]:
        if match["trainer"]["kind"] == "resume":
            match["trainer"]["epoch"] = 2
            match["line"] = match["line"].replace("epoch=3 next_epoch=4", "epoch=2 next_epoch=3")
        if match["trainer"]["kind"] == "result":
            match["trainer"]["resumed_from_epoch"] = 2


def _accuracy_off(v):
    for match in v["jobs"]["fault-node"]["read"]:
        if match["trainer"]["kind"] == "result":
            match["trainer"]["final_accuracy"] = 0.90


def _deadline_not_backoff(v):
    v["jobs"]["fault-fatal"]["info"]["failure"]["message"] = "Job fault-fatal has failed because it was active longer than specified deadline"


def _operator_fault_restarted_the_run(v):
    v["jobs"]["fault-operator"]["read"].append(resume("fault-operator", 0, NODE_A, T0 + 30.0, 3))


def _finished_on_the_stopped_node(v):
    for match in v["jobs"]["fault-node"]["read"]:
        if match["trainer"]["kind"] == "result":
            match["node"] = NODE_B


def _fault_too_late(v):
    """The fault landed after the snapshot of epoch 7: the resume leaves one epoch, which proves little."""
    fault_at = T0 + 37.0
    v["at"]["fault-worker"] = fault(fault_at, "delete pod fault-worker-worker-1")
    seen, after = recovering("fault-worker", fault_at, T0 + 50.0, resumed=EPOCHS - 1)
    v["seen"]["fault-worker"] = seen + epochs("fault-worker", 0, NODE_A, T0 + 15.0, 4, EPOCHS - 1)
    v["jobs"]["fault-worker"]["read"] = after


def _survivor_container_restarted(v):
    """The agent that stayed ended (RendezvousClosedError) and its container restarted."""
    v["jobs"]["fault-worker"]["info"] = info(end=T0 + 90, restarts=1)


def _survivor_worker_never_restarted(v):
    for match in v["jobs"]["fault-worker"]["read"]:
        if match["trainer"]["kind"] == "result":
            match["trainer"]["restarts"] = 0


def _restart_log_lost(v):
    """A restarted container's crashed run was recorded without its last lines."""
    v["jobs"]["fault-rdzv"]["info"]["restart_reasons"][0].update(log_tail=[], log_error="container not found")


def _no_snapshot_failed_during_the_outage(v):
    v["extras"]["fault-s3"]["snapshot_failed_in_outage"] = []


BAD_RUNS = [
    (_retrain_epoch_5, "1, 2 and 4"),
    (_resume_from_an_older_snapshot, "1, 2 and 4"),
    (_accuracy_off, "1, 2 and 4"),
    (_deadline_not_backoff, "6 - the unrecoverable job"),
    (_operator_fault_restarted_the_run, "3 and 5"),
    (_finished_on_the_stopped_node, "4 - the job finished on the remaining node"),
    (_fault_too_late, "1, 2 and 4"),
    (_no_snapshot_failed_during_the_outage, "5 - the trainer retried"),
    (_survivor_container_restarted, "1 - no container restarted"),
    (_survivor_worker_never_restarted, "1 - no container restarted"),
    (_restart_log_lost, "2 - every restarted container kept"),
]


@pytest.fixture(scope="module")
def proof_runs(tmp_path_factory):
    """The good run and every bad run, each a play of one ansible-playbook run."""
    cases = {"good": scenario()}
    cases.update((mutate.__name__, _bad(mutate)) for mutate, _proof in BAD_RUNS)
    return run_cases(tmp_path_factory.mktemp("fault-proofs"), cases)


@pytest.mark.parametrize("mutate, proof", BAD_RUNS)
def test_bad_runs_fail_their_proof(proof_runs, mutate, proof):
    results, output = proof_runs
    outcome, _figures = results[mutate.__name__]
    assert outcome.startswith("FAILED " + proof), (outcome, output[-4000:])
