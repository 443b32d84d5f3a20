"""Delay between a PyTorchJob turning terminal and pytorchjob_info's wait returning.

For each run a one-master PyTorchJob sleeps --sleep seconds and exits 0 (or 1 for the failing
runs). Three observers start before the job ends:
  - this script's own watch on the job (the reference: the moment the API server sends the
    event with the Succeeded/Failed condition),
  - trainfleet.training.pytorchjob_info wait=true, run as a script (what Ansible runs),
  - `kubectl wait --for=condition=<Succeeded|Failed>` (for comparison; it cannot wait for
    "either", so it is told the expected one).
Prints, per run, each observer's return time after the condition's lastTransitionTime (1 s
resolution, so these are +0..1 s) and after the reference watch event (sub-second).

Usage: .venv/bin/python benchmarks/wait_delay.py [--runs 3] [--failing 1] [--sleep 15] [--image IMAGE]
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as c  # noqa: E402  pylint: disable=wrong-import-position


def observe(argv, env, results, key):
    with tempfile.TemporaryFile() as out:
        proc = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, env=env, timeout=600, check=False)
        results[key] = (time.monotonic(), time.time(), proc.returncode)
        out.seek(0)
        results[key + "_out"] = out.read().decode(errors="replace")


def one_run(core, custom, image, name, sleep_s, fail):
    c.delete_job(custom, name)
    code = 1 if fail else 0
    c.create_job(custom, c.job_manifest(name, image, ["python3", "-c", f"import time, sys; time.sleep({sleep_s}); sys.exit({code})"]))
    env = c.module_env()
    results = {}
    info = threading.Thread(target=observe, args=(c.module_command("trainjob_info", {
        "name": name, "namespace": c.NAMESPACE, "kubeconfig": c.KUBECONFIG, "wait": True, "wait_timeout": 600,
        "log_lines": 5}), env, results, "pytorchjob_info"))
    expected = "Failed" if fail else "Succeeded"
    kubectl = threading.Thread(target=observe, args=([
        "kubectl", "--kubeconfig", c.KUBECONFIG, "-n", c.NAMESPACE, "wait", f"--for=condition={expected}",
        "--timeout=600s", f"pytorchjob/{name}"], None, results, "kubectl wait"))
    info.start()
    kubectl.start()
    ref_mono, ref_wall, cond = c.watch_until_terminal(custom, name, 600)
    info.join(620)
    kubectl.join(620)
    ltt = datetime.datetime.strptime(cond["lastTransitionTime"], "%Y-%m-%dT%H:%M:%SZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()
    row = {"job": name, "terminal": cond["type"], "reference_after_ltt": ref_wall - ltt}
    for key in ("pytorchjob_info", "kubectl wait"):
        mono, wall, rc = results.get(key, (None, None, None))
        row[key] = {"after_ltt": (wall - ltt) if wall else None, "after_event": (mono - ref_mono) if mono else None, "rc": rc}
    if "pytorchjob_info_out" in results:
        try:
            out = json.loads(results["pytorchjob_info_out"])
            row["pytorchjob_info"]["phase"] = (out.get("job") or {}).get("phase")
        except ValueError:
            row["pytorchjob_info"]["phase"] = "unparsed"
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="succeeding runs")
    parser.add_argument("--failing", type=int, default=1, help="failing runs")
    parser.add_argument("--sleep", type=int, default=15)
    parser.add_argument("--image")
    parser.add_argument("--keep", action="store_true")
    opts = parser.parse_args()
    core, custom = c.api()
    image = c.trainer_image(core, opts.image)
    c.ensure_namespace(core)
    rows = []
    try:
        plan = [(f"bench-wait-ok-{i}", False) for i in range(opts.runs)] + [(f"bench-wait-fail-{i}", True) for i in range(opts.failing)]
        for name, fail in plan:
            rows.append(one_run(core, custom, image, name, opts.sleep, fail))
    finally:
        if not opts.keep:
            c.delete_namespace(core)
    print(f"\n{'job':20} {'terminal':9} {'ref watch':>10} | {'pytorchjob_info':>26} | {'kubectl wait':>26}")
    print(f"{'':20} {'':9} {'-ltt s':>10} | {'-ltt s':>12} {'-event s':>12}  | {'-ltt s':>12} {'-event s':>12}")

    def fmt(value):
        return f"{value:12.2f}" if value is not None else f"{'-':>12}"
    for row in rows:
        info, kubectl = row["pytorchjob_info"], row["kubectl wait"]
        print(f"{row['job']:20} {row['terminal']:9} {row['reference_after_ltt']:10.2f} | {fmt(info['after_ltt'])} "
              f"{fmt(info['after_event'])}  | {fmt(kubectl['after_ltt'])} {fmt(kubectl['after_event'])}"
              f"   (info rc={info['rc']} phase={info.get('phase')}, kubectl rc={kubectl['rc']})")
    delays = [r["pytorchjob_info"]["after_event"] for r in rows if r["pytorchjob_info"]["after_event"] is not None]
    if delays:
        print(f"pytorchjob_info returned {min(delays):.2f}..{max(delays):.2f}s after the terminal watch event "
              f"(includes the module's process exit and JSON output)")


if __name__ == "__main__":
    main()
