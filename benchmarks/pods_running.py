"""Time from PyTorchJob apply to all of its pods Running.

1. The train step's job (trainfleet/trainfleet-digits), from its timestamps (1 s resolution):
   job creation -> the last pytorch container start. On a fresh cluster this includes pulling
   the trainer image from the local registry onto both nodes (cold).
2. --runs fresh 1 master + 1 worker jobs with the same image (now on the nodes: warm), timed
   with a watch from the create call until both pods are Running (the worker first runs the
   operator's init container, which waits for the master's DNS name).

Usage: .venv/bin/python benchmarks/pods_running.py [--runs 3] [--image IMAGE]
"""

import argparse
import datetime
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as c  # noqa: E402  pylint: disable=wrong-import-position

from kubernetes import watch  # noqa: E402  pylint: disable=wrong-import-position,wrong-import-order


def parse(ts):
    return datetime.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc) if isinstance(ts, str) else ts


def converged_job(core, custom):
    try:
        job = custom.get_namespaced_custom_object(c.GROUP, c.VERSION, "trainfleet", c.PLURAL, "trainfleet-digits")
    except c.client.ApiException:
        print("trainfleet-digits: not found (run the train step for the cold figure)")
        return
    created = parse(job["metadata"]["creationTimestamp"])
    pods = core.list_namespaced_pod("trainfleet", label_selector=f"{c.JOB_LABEL}=trainfleet-digits").items
    starts = []
    for pod in pods:
        for status in pod.status.container_statuses or []:
            if status.name != "pytorch":
                continue
            state = status.state
            started = (state.running.started_at if state.running else state.terminated.started_at if state.terminated else None)
            if started:
                starts.append((pod.metadata.name, started))
    if len(starts) == len(pods) and pods:
        last = max(started_at for _name, started_at in starts)
        detail = ", ".join(f"{n} +{(s - created).total_seconds():.0f}s" for n, s in sorted(starts))
        print(f"trainfleet-digits (first run, image pulled from the local registry): apply -> all pytorch containers "
              f"started {(last - created).total_seconds():.0f}s ({detail})")


def one_run(core, custom, image, name, timeout=300):
    c.delete_job(custom, name)
    manifest = c.job_manifest(name, image, ["python3", "-c", "import time; time.sleep(20)"], workers=1)
    start = time.monotonic()
    c.create_job(custom, manifest)
    running = {}
    stream = watch.Watch()
    for event in stream.stream(core.list_namespaced_pod, c.NAMESPACE, label_selector=f"{c.JOB_LABEL}={name}",
                               timeout_seconds=timeout):
        pod = event["object"]
        if pod.status.phase == "Running" and pod.metadata.name not in running:
            running[pod.metadata.name] = time.monotonic() - start
        if len(running) == 2:
            stream.stop()
            break
    return running


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--image")
    parser.add_argument("--keep", action="store_true")
    opts = parser.parse_args()
    core, custom = c.api()
    converged_job(core, custom)
    image = c.trainer_image(core, opts.image)
    c.ensure_namespace(core)
    totals = []
    try:
        for i in range(opts.runs):
            running = one_run(core, custom, image, f"bench-running-{i}")
            detail = ", ".join(f"{k.rsplit('-', 2)[-2]}-{k.rsplit('-', 1)[-1]} {v:.1f}s" for k, v in sorted(running.items()))
            if len(running) == 2:
                totals.append(max(running.values()))
                print(f"bench-running-{i} (image on the nodes): all pods Running {max(running.values()):.1f}s after apply ({detail})")
            else:
                print(f"bench-running-{i}: not all pods Running within the timeout ({detail})")
    finally:
        if not opts.keep:
            c.delete_namespace(core)
    if totals:
        print(f"warm apply -> all pods Running: median {statistics.median(totals):.1f}s, min {min(totals):.1f}s, max {max(totals):.1f}s")


if __name__ == "__main__":
    main()
