"""Sustained chaos: one long elastic job through the train step, a random fault every --every seconds.

First a fault-free run of the same job (--baseline-epochs) gives the throughput to compare with and
the epoch length; then the chaos run gets as many epochs as fill --minutes, and while it trains a
fault from --faults is injected every --every seconds (the first after one interval), in a seeded
random order that takes every kind once before any twice:

  pod       a worker's pod deleted (the operator makes it again)
  kill      a worker's trainer process killed with SIGKILL inside its container
  stop      a worker's trainer process frozen with SIGSTOP (a hang, not a crash: the other rank's
            watchdog must notice, trainer/watchdog.py)
  net       a worker pod's traffic dropped on its node (iptables, both directions) for --net-down s
  operator  the training operator's pod deleted
  s3        the pods' S3 endpoint refused (TCP reset on every node) for --s3-down s
  node      the kind node of a worker stopped (docker stop) and started again after --node-down s

Per fault it prints the recovery (fault -> the start of the first epoch that ends after it, so 0
for a fault training went through), its cost (every wait between two epoch ends after it, until the
next fault, beyond the pace: an S3 outage stalls rank 0's writes after an epoch rather than the epoch
itself) and the epochs lost (completed before the fault, done again after it). Overall: ETTR, the
epochs the run kept times the fault-free run's wall seconds per epoch (its pace once training:
steps, evaluation and snapshot) over the job's wall time (creation -> completion), so start-up,
recoveries and lost epochs are what it loses; the share of the wall spent in training steps
(metrics.jsonl's epoch_time_s); p50/p95 recovery, the longest time without an epoch ending against
2x the trainer's collective timeout, and the throughput under chaos against the fault-free run's.
The figures go to out/bench/chaos.json; the train step's output to out/bench/chaos-<run>.log.

The local stack must be up (make demo). It trains in the train step's namespace (trainfleet) under
its own job names (chaos-base-<t>, chaos-<t>) and deletes nothing of the demo's.

Both runs get the trainer's --timeout-s (--collective-timeout, the inventory's 300 s) and
--stall-timeout-s (--stall-timeout, 30 s: a frozen rank holds the others up at least that long).

The kill and stop faults signal a rank: the trainer process torchrun started (LOCAL_RANK in its
environment), never torchrun's agent; the victim column names its RANK and its state after the
signal ("T (stopped)" for a freeze, or the fault is reported as not made).

--check is make test's short run (molecule/default, beside the other proofs): no fault-free run
(--baseline-epochs 0; ETTR at the run's own pace between faults), a fixed --epochs paced by the
trainer's --min-epoch-s, each kind of --faults once, each only once the job recovered from the
previous one (an epoch ended after it; after a pod, kill or stop, after a rank resumed); it exits
1 unless the job Succeeded, every fault was made, each recovered within 2x the collective timeout
and was followed by a resume from a snapshot, a freeze by a watchdog line, and no gap between
epochs exceeded that bound.

Usage: .venv/bin/python benchmarks/chaos.py [--minutes 20] [--every 180] [--seed 1]
           [--faults pod,kill,stop,net,operator,s3,node] [--baseline-epochs 20] [--stall-timeout 30]
       .venv/bin/python benchmarks/chaos.py --check --faults kill,stop,pod --victim-rank 0 --baseline-epochs 0
           --epochs 80 --min-epoch-s 2 --every 25 --stall-timeout 20 --minutes 5 --figures out/test-reports/chaos-figures.json
"""

import argparse
import calendar
import json
import math
import os
import pathlib
import random
import re
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as c  # noqa: E402  pylint: disable=wrong-import-position

sys.path.insert(0, str(c.REPO))  # the trainer's line formats: one source (trainer.metrics)
import boto3  # noqa: E402  pylint: disable=wrong-import-position,wrong-import-order
from trainer import EPOCH_PREFIX, RESULT_PREFIX, RESUME_PREFIX, STALL_PREFIX  # noqa: E402  pylint: disable=wrong-import-position
from trainer.metrics import parse_epoch_line, parse_resume_line  # noqa: E402  pylint: disable=wrong-import-position
# _common put the collection on the path: the kubectl the cluster step built, by its one rule
from ansible_collections.trainfleet.training.plugins.module_utils.cache import built_kubectl  # noqa: E402  pylint: disable=wrong-import-position

NAMESPACE = "trainfleet"
FAULTS = ("pod", "kill", "stop", "net", "operator", "s3", "node")
# The faults that restart the ranks: a resume from a snapshot must follow each.
RESTARTING_FAULTS = ("pod", "kill", "stop")
LINE_RE = re.compile("(?:" + "|".join(map(re.escape, (EPOCH_PREFIX, RESUME_PREFIX, STALL_PREFIX, RESULT_PREFIX))) + ").*")
OUT = c.REPO / "out" / "bench"
# Run in a worker's container (python3 -c CODE SIGNAL RANK|any): signal one rank, the trainer process
# torchrun started (LOCAL_RANK in its environment; torchrun's agent, whose command line names the module
# too, has none), that rank if one is named (exit 3 when this container has not got it), then print
# "<pid> <RANK> <its state half a second later>": "T (stopped)" proves a freeze landed on a rank.
SIGNAL_RANK = """
import os, sys, time
found = []
for p in os.listdir('/proc'):
    if not p.isdigit():
        continue
    try:
        cmd = open('/proc/%s/cmdline' % p, 'rb').read()
        env = dict(kv.split(b'=', 1) for kv in open('/proc/%s/environ' % p, 'rb').read().split(b'\\0') if b'=' in kv)
    except OSError:
        continue
    if b'trainer.train' in cmd and b'LOCAL_RANK' in env and sys.argv[2] in ('any', env.get(b'RANK', b'?').decode()):
        found.append((int(p), env.get(b'RANK', b'?').decode()))
if not found:
    print('no rank process (trainer.train with LOCAL_RANK%s) in this container' % ('' if sys.argv[2] == 'any' else ', RANK ' + sys.argv[2]))
    sys.exit(3)
pid, rank = min(found)
os.kill(pid, int(sys.argv[1]))
time.sleep(0.5)
try:
    state = [l.split(None, 1)[1] for l in open('/proc/%d/status' % pid) if l.startswith('State:')][0]
except (OSError, IndexError):
    state = 'gone'
print(pid, rank, state)
"""


def iso(ts):
    return time.strftime("%H:%M:%S", time.gmtime(ts))


def parse_iso(text):
    """Seconds since the epoch of a UTC time such as 2026-11-29T10:00:00.123Z (the trainer's, the API's)."""
    base, _dot, frac = text.rstrip("Z").partition(".")
    return calendar.timegm(time.strptime(base, "%Y-%m-%dT%H:%M:%S")) + (float("0." + frac) if frac else 0.0)


def kubectl():
    return [built_kubectl(str(c.CACHE)), "--kubeconfig", c.KUBECONFIG, "-n", NAMESPACE]


def run(argv, timeout=60):
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)


class Collector(threading.Thread):
    """Every trainer line (epoch, resume, stall, result) any pod of the job printed, current and previous runs."""

    def __init__(self, core, job):
        super().__init__(daemon=True)
        self.core, self.job = core, job
        self.lines, self.seen_at, self.stop_event = [], {}, threading.Event()
        self._read_previous = set()

    def _read(self, pod, previous=False):
        try:
            text = self.core.read_namespaced_pod_log(pod, NAMESPACE, container="pytorch", previous=previous,
                                                     _request_timeout=(5, 30))
        except Exception:  # pylint: disable=broad-except  # no container yet, node gone: next round
            return
        for raw in text.splitlines():
            match = LINE_RE.search(raw)
            if match and match.group(0) not in self.seen_at:
                self.seen_at[match.group(0)] = time.time()
                self.lines.append(match.group(0))

    def run(self):
        while not self.stop_event.is_set():
            try:
                pods = self.core.list_namespaced_pod(NAMESPACE, label_selector=f"{c.JOB_LABEL}={self.job}").items
            except Exception:  # pylint: disable=broad-except
                pods = []
            for pod in pods:
                self._read(pod.metadata.name)
                for status in pod.status.container_statuses or []:
                    key = (pod.metadata.name, status.restart_count)
                    if status.restart_count and key not in self._read_previous:
                        self._read_previous.add(key)
                        self._read(pod.metadata.name, previous=True)
            self.stop_event.wait(3)

    def epochs(self):
        """[(epoch, end time)] in the order printed (an epoch done again appears again)."""
        return [(e["epoch"], parse_iso(e["time"])) for e in map(parse_epoch_line, self.lines) if e and "time" in e]

    def resumes(self):
        """[(epoch resumed from, when this script saw the line)]."""
        return [(r["epoch"], self.seen_at[line]) for line in self.lines for r in [parse_resume_line(line)] if r]

    def stalls(self):
        """[(line, when this script saw it)]: a watchdog's last words."""
        return [(line, self.seen_at[line]) for line in self.lines if line.startswith(STALL_PREFIX)]


def train(name, epochs, log, timeout, trainer_args, inventories=()):
    """The train step for one job (its own name), in the background: the Popen. The repository's
    ansible.cfg and inventory unless ANSIBLE_CONFIG and --inventory say otherwise (molecule's)."""
    env = dict(os.environ, AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing")
    env.setdefault("ANSIBLE_CONFIG", str(c.REPO / "ansible.cfg"))
    argv = [str(c.REPO / ".venv" / "bin" / "ansible-playbook"), str(c.REPO / "playbooks" / "train.yml"),
            *[f"--inventory={path}" for path in inventories], "-e", f"trainjob_name={name}", "-e", f"trainjob_trainer_epochs={epochs}",
            "-e", f"trainjob_wait_timeout={timeout}", "-e", "trainjob_prepull=false",
            "-e", json.dumps({"trainjob_trainer_extra_args": trainer_args})]
    return subprocess.Popen(argv, cwd=c.REPO, env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT)  # pylint: disable=consider-using-with


def trainer_args(args):
    """The inventory's collective timeout, and the watchdog's (a frozen rank ends the others' wait after it);
    --min-epoch-s paces a short run's epochs (fewer, longer, lighter on the CPUs)."""
    return [f"--timeout-s={args.collective_timeout:g}", f"--stall-timeout-s={args.stall_timeout:g}"] + (
        [f"--min-epoch-s={args.min_epoch_s:g}"] if args.min_epoch_s else [])


def metrics(s3, bucket, prefix, name):
    body = s3.get_object(Bucket=bucket, Key=f"{prefix}/{name}/metrics.jsonl")["Body"].read().decode()
    return [json.loads(line) for line in body.splitlines() if line.strip()]


def job_times(custom, name):
    job = custom.get_namespaced_custom_object(c.GROUP, c.VERSION, NAMESPACE, c.PLURAL, name)
    status = job.get("status") or {}
    ended = [cond for cond in status.get("conditions") or [] if cond["type"] in ("Succeeded", "Failed") and cond["status"] == "True"]
    return (parse_iso(job["metadata"]["creationTimestamp"]), parse_iso(status["completionTime"]) if status.get("completionTime")
            else parse_iso(ended[0]["lastTransitionTime"]) if ended else time.time(), ended[0]["type"] if ended else "Running")


class Injector(object):
    """The faults, each returning (victim, seconds the fault lasted)."""

    def __init__(self, core, job, args):
        self.core, self.job, self.args = core, job, args

    def _workers(self):
        pods = self.core.list_namespaced_pod(NAMESPACE, label_selector=f"{c.JOB_LABEL}={self.job}").items
        running = [p for p in pods if p.status.phase == "Running" and not p.metadata.deletion_timestamp]
        if not running:
            raise RuntimeError("no running worker pod")
        return running

    def _signal(self, rng, signal_number, expect=None):
        """Signal a random pod's rank, or --victim-rank wherever it runs."""
        pods = [p.metadata.name for p in self._workers()]
        wanted = "any" if self.args.victim_rank is None else str(self.args.victim_rank)
        pods = [rng.choice(pods)] if wanted == "any" else pods
        for pod in pods:
            done = run(kubectl() + ["exec", pod, "-c", "pytorch", "--", "python3", "-c", SIGNAL_RANK, str(signal_number), wanted],
                       timeout=30)
            if done.returncode != 3:
                break
        if done.returncode != 0 or len(done.stdout.split(None, 2)) < 3:
            raise RuntimeError(f"{pod}: {(done.stderr or done.stdout).strip()[-300:]}")
        pid, rank, state = done.stdout.strip().split(None, 2)
        if expect and not state.startswith(expect):
            raise RuntimeError(f"{pod} pid {pid} (rank {rank}) is {state!r} after the signal, not {expect!r}")
        return f"{pod} rank {rank} pid {pid} ({state})", 0.0

    def pod(self, rng):
        pod = rng.choice(self._workers()).metadata.name
        self.core.delete_namespaced_pod(pod, NAMESPACE)
        return pod, 0.0

    def kill(self, rng):
        return self._signal(rng, 9)

    def stop(self, rng):
        return self._signal(rng, 19, expect="T")

    def net(self, rng):
        pod = rng.choice(self._workers())
        node, ip = pod.spec.node_name, pod.status.pod_ip
        drop = ["-j", "DROP", "-m", "comment", "--comment", "trainfleet-chaos"]
        block_for([node], [["-s", ip] + drop, ["-d", ip] + drop], self.args.net_down)
        return f"{pod.metadata.name} ({ip} on {node})", float(self.args.net_down)

    def operator(self, _rng):
        pods = self.core.list_namespaced_pod("kubeflow").items
        names = [p.metadata.name for p in pods if p.metadata.name.startswith("training-operator")]
        for pod_name in names:
            self.core.delete_namespaced_pod(pod_name, "kubeflow")
        return ",".join(names) or "none found", 0.0

    def s3(self, _rng):
        endpoint = self.args.pod_s3_endpoint
        host, port = re.match(r"https?://([^:/]+):?(\d*)", endpoint).groups()
        rule = ["-p", "tcp", "-d", host, "--dport", port or "80", "-m", "comment", "--comment", "trainfleet-chaos-s3",
                "-j", "REJECT", "--reject-with", "tcp-reset"]
        nodes = nodes_of_cluster()
        block_for(nodes, [rule], self.args.s3_down)
        return f"{host}:{port} on {len(nodes)} nodes", float(self.args.s3_down)

    def node(self, rng):
        node = rng.choice(self._workers()).spec.node_name
        run(["docker", "stop", "-t", "0", node], timeout=120)
        time.sleep(self.args.node_down)
        run(["docker", "start", node], timeout=120)
        return node, float(self.args.node_down)


def block_for(nodes, rules, seconds):
    """Insert the iptables FORWARD rules on the nodes, wait, delete every copy of them again."""
    for node in nodes:
        for rule in rules:
            run(["docker", "exec", node, "iptables", "-w", "5", "-I", "FORWARD", "1"] + rule)
    time.sleep(seconds)
    for node in nodes:
        for rule in rules:
            run(["docker", "exec", node, "sh", "-c", 'while iptables -w 5 -D FORWARD "$@" 2>/dev/null; do :; done', "sh"] + rule)


def nodes_of_cluster():
    out = run(["docker", "ps", "--format", "{{.Names}}", "--filter", "label=io.x-k8s.kind.cluster=trainfleet"]).stdout
    return sorted(out.split())


def pod_s3_endpoint(core, job, timeout=600):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for pod in core.list_namespaced_pod(NAMESPACE, label_selector=f"{c.JOB_LABEL}={job}").items:
            for env in pod.spec.containers[0].env or []:
                if env.name == "AWS_ENDPOINT_URL":
                    return env.value
        time.sleep(2)
    raise TimeoutError(f"no pod of {job} within {timeout}s")


def lift_leftovers():
    """Rules of an interrupted earlier run, and stopped nodes."""
    for node in run(["docker", "ps", "-a", "--format", "{{.Names}}", "--filter", "label=io.x-k8s.kind.cluster=trainfleet"]).stdout.split():
        run(["docker", "start", node], timeout=120)
        rules = run(["docker", "exec", node, "iptables", "-S", "FORWARD"]).stdout.splitlines()
        for rule in rules:
            if "trainfleet-chaos" in rule:
                run(["docker", "exec", node, "sh", "-c", "iptables -w 5 " + rule.replace("-A ", "-D ", 1)])


def steady_epoch_s(epochs):
    """Wall seconds per epoch once training runs (first to last epoch end: training, evaluation, snapshot)."""
    ends = sorted(t for _e, t in epochs)
    return (ends[-1] - ends[0]) / (len(ends) - 1) if len(ends) > 1 else None


def baseline(core, custom, s3, args, stamp):
    name = f"chaos-base-{stamp}"
    proc = train(name, args.baseline_epochs, OUT / f"chaos-{name}.log", 1800, trainer_args(args), args.inventory)
    collector = Collector(core, name)
    collector.start()
    proc.wait(timeout=1900)
    time.sleep(4)  # the collector's last round
    collector.stop_event.set()
    collector.join(10)
    created, ended, phase = job_times(custom, name)
    records = metrics(s3, args.bucket, args.prefix, name)
    steady = steady_epoch_s(collector.epochs())
    return {"job": name, "phase": phase, "epochs": len(records), "wall_s": ended - created,
            "kept_train_s": sum(r["epoch_time_s"] for r in records), "steady_epoch_s": steady,
            "ettr": len(records) * steady / (ended - created), "median_epoch_s": statistics.median(r["epoch_time_s"] for r in records),
            "samples_per_s": statistics.median(r["samples_per_s"] for r in records)}


def analyse(faults, epochs, records, created, ended, pace, resumes, stalls):
    """Per fault: its recovery, the epochs it cost, the resumes and watchdog lines that followed it
    (before the next fault); overall: ETTR at ``pace`` (wall seconds per epoch without faults)."""
    epoch_time = {r["epoch"]: r["epoch_time_s"] for r in records}
    median_epoch = statistics.median(epoch_time.values()) if epoch_time else pace
    rows = []
    for index, fault in enumerate(faults):
        after = [(e, t) for e, t in epochs if t > fault["at"]]
        before = [e for e, t in epochs if t <= fault["at"]]
        nxt = faults[index + 1]["at"] if index + 1 < len(faults) else math.inf
        its_resumes = [r for r in resumes if fault["at"] < r[1] < nxt]
        if after:
            epoch, end = after[0]
            started = end - epoch_time.get(epoch, median_epoch)
            recovery = max(0.0, started - fault["at"])
        else:
            recovery = None
        lost = 0
        if its_resumes and before:
            lost = max(0, max(before) - its_resumes[0][0])
        # what the fault cost: every wait between two epoch ends, in its window, beyond the pace (an S3 outage
        # stalls rank 0's writes after an epoch, not the epoch under way, which recovery_s would miss)
        ends = sorted(t for _e, t in epochs)
        cost = sum(max(0.0, b - a - pace) for a, b in zip(ends, ends[1:]) if fault["at"] < b <= nxt)
        rows.append(dict(fault, recovery_s=recovery, cost_s=cost, epochs_lost=lost, resumed_from=[r[0] for r in its_resumes],
                         stall_lines=[line for line, t in stalls if fault["at"] < t < nxt]))
    ends = [created] + sorted(t for _e, t in epochs) + [ended]
    gaps = [b - a for a, b in zip(ends, ends[1:])]
    kept = sum(epoch_time.values())
    productive = len(records) * pace
    recoveries = sorted(r["recovery_s"] for r in rows if r["recovery_s"] is not None)

    def quantile(fraction):
        return recoveries[min(len(recoveries) - 1, int(fraction * len(recoveries)))] if recoveries else None
    return rows, {"wall_s": ended - created, "kept_train_s": kept, "pace_s": pace, "productive_s": productive,
                  "ettr": productive / (ended - created), "compute_share": kept / (ended - created), "epochs_kept": len(records),
                  "epochs_done_again": len(epochs) - len(set(e for e, _t in epochs)),
                  "recovery_p50_s": quantile(0.5), "recovery_p95_s": quantile(0.95), "longest_without_epoch_s": max(gaps),
                  "samples_per_s_median": statistics.median(r["samples_per_s"] for r in records) if records else None}


def own_pace(epochs):
    """Without a fault-free run: the median wall time between two epochs ending one after the other."""
    ends = [t for _e, t in epochs]
    gaps = sorted(b - a for (ea, a), (eb, b) in zip(epochs, epochs[1:]) if eb == ea + 1)
    return statistics.median(gaps) if gaps else (ends[-1] - ends[0] if len(ends) > 1 else 1.0)


def check(rows, total, phase, rc, kinds, args):
    """--check: what a short chaos run in make test must show; returns the failures (empty: it passed)."""
    bound = 2 * args.collective_timeout
    failures = []
    if phase != "Succeeded" or rc != 0:
        failures.append(f"the job ended {phase}, the train step with rc {rc}: it must succeed through every fault")
    if sorted(r["kind"] for r in rows) != sorted(kinds):
        failures.append(f"faults made {[r['kind'] for r in rows]}, expected each of {kinds} once (the job ended too early?)")
    for number, row in enumerate(rows, 1):
        name = f"fault {number} ({row['kind']}, {row['victim'] or row['error']})"
        if row["error"]:
            failures.append(f"{name} could not be made: {row['error']}")
        elif row["recovery_s"] is None:
            failures.append(f"{name}: no epoch ended after it")
        elif row["recovery_s"] > bound:
            failures.append(f"{name}: recovery {row['recovery_s']:.0f} s, over 2 x the collective timeout ({bound:g} s)")
        if row["kind"] in RESTARTING_FAULTS and not row["error"] and not row["resumed_from"]:
            failures.append(f"{name}: no rank resumed from a snapshot after it (the fault did not reach the job?)")
        if row["kind"] == "stop" and not row["error"] and not row["stall_lines"]:
            failures.append(f"{name}: no watchdog line ({STALL_PREFIX}) after the freeze: the hang ended some other way")
    if total["longest_without_epoch_s"] > bound:
        failures.append(f"the job went {total['longest_without_epoch_s']:.0f} s without an epoch, over {bound:g} s")
    return failures


def recovered(collector, fault, started):
    """Whether the job trains again after ``fault`` (None: before the first one, from ``started``): an epoch
    ended after it and, for a fault that restarts the ranks (pod, kill, stop), after a rank resumed from a
    snapshot. The epoch under way when a rank is killed can still end just after the kill: that epoch is
    not a recovery, and a next fault before the restart would take the restart's resume lines as its own."""
    since = fault["at"] if fault else started
    if fault and fault["kind"] in RESTARTING_FAULTS and not fault["error"]:
        resumed = [t for _e, t in collector.resumes() if t > since]
        if not resumed:
            return False
        since = min(resumed)
    return any(t > since for _e, t in collector.epochs())


def inject(proc, collector, injector, rng, kinds, args):
    """The faults, every --every s from the first epoch; with --check each kind once, and each only once the
    job recovered from the previous fault (recovered()): a fault lands on a training job, not on one still
    recovering, and each fault's resumes come before the next fault."""
    order, faults, started = [], [], time.time()
    while proc.poll() is None:
        if args.check:
            if len(faults) == len(kinds):
                break
            previous = faults[-1] if faults else None
            due = (previous["at"] if previous else started) + args.every
            while proc.poll() is None and (time.time() < due or not recovered(collector, previous, started)):
                time.sleep(1)
        else:
            if time.time() - started >= args.minutes * 60 - args.every / 2:
                break
            time.sleep(max(0.0, started + (len(faults) + 1) * args.every - time.time()))
        if proc.poll() is not None:
            break
        if not order:
            order = rng.sample(kinds, len(kinds))
        kind = order.pop(0)
        at = time.time()
        try:
            victim, lasted = getattr(injector, kind)(rng)
            error = None
        except Exception as exc:  # pylint: disable=broad-except  # a fault that could not be made is reported
            victim, lasted, error = None, 0.0, str(exc)
        faults.append({"kind": kind, "at": at, "victim": victim, "lasted_s": lasted, "error": error})
        print(f"  {iso(at)} fault {len(faults)}: {kind} {victim or error}", flush=True)
    return faults


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--minutes", type=float, default=20)
    p.add_argument("--every", type=float, default=180)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--faults", default=",".join(FAULTS))
    p.add_argument("--baseline-epochs", type=int, default=20, help="the fault-free run's epochs; 0: none (the chaos run's own pace)")
    p.add_argument("--epochs", type=int, default=0, help="the chaos job's epochs (default: as many as fill --minutes at the baseline's pace)")
    p.add_argument("--min-epoch-s", type=float, default=0, help="the trainer's --min-epoch-s (a short run: longer, lighter epochs)")
    p.add_argument("--victim-rank", type=int, default=None,
                   help="kill and stop signal this rank (default: the rank of a random worker pod); rank 0 also hosts the "
                        "ranks' shared store, the hardest freeze to notice")
    p.add_argument("--check", action="store_true",
                   help="make test's short run: each fault kind once, each after training went on again; exit 1 unless the job "
                        "succeeded, every fault was made, recovered within 2 x the collective timeout and was followed by a resume, "
                        "and a freeze by a watchdog line")
    p.add_argument("--figures", default=str(OUT / "chaos.json"), help="where the figures go (default: %(default)s)")
    p.add_argument("--inventory", action="append", default=[], help="an inventory source for the train step (repeatable; "
                   "default: ansible.cfg's)")
    p.add_argument("--net-down", type=float, default=60)
    p.add_argument("--s3-down", type=float, default=30)
    p.add_argument("--node-down", type=float, default=60)
    p.add_argument("--collective-timeout", type=float, default=300, help="the trainer's --timeout-s (the inventory's)")
    p.add_argument("--stall-timeout", type=float, default=30,
                   help="the trainer's --stall-timeout-s (its default is 120 s; a frozen rank costs at least this)")
    p.add_argument("--bucket", default="trainfleet-local")
    p.add_argument("--prefix", default="training")
    p.add_argument("--s3-endpoint", default="http://127.0.0.1:5050", help="as this machine reaches it")
    args = p.parse_args()
    kinds = [k for k in args.faults.split(",") if k]
    unknown = sorted(set(kinds) - set(FAULTS))
    if unknown or not kinds or (args.check and len(set(kinds)) != len(kinds)):
        p.error(f"--faults: unknown {unknown} or repeated; choose from {','.join(FAULTS)}")
    if not args.baseline_epochs and not args.epochs:
        p.error("--baseline-epochs 0 needs --epochs (no fault-free run to size the chaos run by)")
    OUT.mkdir(parents=True, exist_ok=True)
    core, custom = c.api()
    s3 = boto3.client("s3", endpoint_url=args.s3_endpoint, aws_access_key_id="testing", aws_secret_access_key="testing",
                      region_name="us-east-1")
    lift_leftovers()
    stamp = time.strftime("%m%d%H%M%S", time.gmtime())
    base = None
    if args.baseline_epochs:
        print(f"baseline: {args.baseline_epochs} epochs without faults ...", flush=True)
        base = baseline(core, custom, s3, args, stamp)
        print(f"baseline: {base['phase']}, {base['epochs']} epochs in {base['wall_s']:.0f} s (pods, rendezvous included), an epoch "
              f"every {base['steady_epoch_s']:.2f} s once training ({base['median_epoch_s']:.2f} s of it training), "
              f"{base['samples_per_s']:.0f} samples/s, ETTR {base['ettr']:.3f}", flush=True)
    epochs = args.epochs or max(5, int(args.minutes * 60 / base["steady_epoch_s"]))
    name = f"chaos-{stamp}"
    spacing = "each kind once, each after training went on again" if args.check else f"from {kinds}"
    print(f"chaos: {name}, {epochs} epochs, a fault every {args.every:g} s {spacing}", flush=True)
    # the train step's wait, bounded: 4x the run (2x for --check's short one) plus the start-up
    wait_s = int(args.minutes * 60 * 2 + 300) if args.check else int(args.minutes * 60 * 4 + 1800)
    proc = train(name, epochs, OUT / f"chaos-{name}.log", wait_s, trainer_args(args), args.inventory)
    collector = Collector(core, name)
    collector.start()
    args.pod_s3_endpoint = pod_s3_endpoint(core, name)
    while not collector.epochs() and proc.poll() is None:
        time.sleep(2)
    faults = inject(proc, collector, Injector(core, name, args), random.Random(args.seed), kinds, args)
    rc = proc.wait(timeout=wait_s + 100)
    time.sleep(4)  # the collector's last round
    collector.stop_event.set()
    collector.join(10)
    created, ended, phase = job_times(custom, name)
    try:
        records = metrics(s3, args.bucket, args.prefix, name)
    except Exception:  # pylint: disable=broad-except
        records = []
    epochs_seen = collector.epochs()
    pace = base["steady_epoch_s"] if base else own_pace(epochs_seen)
    rows, total = analyse(faults, epochs_seen, records, created, ended, pace, collector.resumes(), collector.stalls())
    print(f"\n{'#':>2} {'fault':8} {'at':8} {'lasted':>6} {'recovery':>8} {'cost':>6} {'lost':>4}  victim")
    for i, row in enumerate(rows, 1):
        rec = "-" if row["recovery_s"] is None else f"{row['recovery_s']:.0f} s"
        print(f"{i:>2} {row['kind']:8} {iso(row['at'])} {row['lasted_s']:>5.0f}s {rec:>8} {row['cost_s']:>4.0f} s {row['epochs_lost']:>4}  "
              f"{row['victim'] or 'not made: ' + str(row['error'])}")
        for line in row["stall_lines"]:
            print(f"{'':>12}{line}")
    print(f"\njob {name}: {phase} (train step rc {rc}), {total['epochs_kept']} epochs kept, {total['epochs_done_again']} done again, "
          f"wall {total['wall_s']:.0f} s")
    paced_by = "the fault-free pace" if base else "its own pace between faults"
    against = f"; fault-free {base['ettr']:.3f} (start-up only); ratio {total['ettr'] / base['ettr']:.3f}" if base else ""
    print(f"ETTR {total['ettr']:.3f} under chaos (the kept epochs at {paced_by}, {total['productive_s']:.0f} s, / wall "
          f"{total['wall_s']:.0f} s){against}; time in training steps {total['compute_share']:.3f} of the wall")
    p50, p95 = (("-" if v is None else f"{v:.0f}") for v in (total["recovery_p50_s"], total["recovery_p95_s"]))
    print(f"recovery p50 {p50} s, p95 {p95} s; longest without an epoch "
          f"{total['longest_without_epoch_s']:.0f} s (bound 2 x {args.collective_timeout:g} s = {2 * args.collective_timeout:g} s)")
    if total["samples_per_s_median"] and base:
        print(f"throughput of the kept epochs {total['samples_per_s_median']:.0f} samples/s, fault-free {base['samples_per_s']:.0f}")
    failures = check(rows, total, phase, rc, kinds, args) if args.check else []
    figures = pathlib.Path(args.figures)
    figures.parent.mkdir(parents=True, exist_ok=True)
    figures.write_text(json.dumps({"args": dict(vars(args)), "baseline": base, "job": name, "phase": phase, "faults": rows,
                                   "total": total, "check_failures": failures}, indent=2, default=str) + "\n")
    print(f"figures: {figures}")
    for failure in failures:
        print(f"CHECK FAILED: {failure}")
    if args.check and not failures:
        print(f"check passed: {len(rows)} faults ({', '.join(r['kind'] for r in rows)}), the job Succeeded, every recovery "
              f"within {2 * args.collective_timeout:g} s")
    return 0 if phase == "Succeeded" and not failures else 1


if __name__ == "__main__":
    sys.exit(main())
