"""Start-up timeline of a training job: the median of each interval, cold and warm.

Each run submits the local inventory's default job (the train step's role, elastic, 2 Workers,
digits, pre-pull included unless --no-prepull) under a scratch name through
benchmarks/startup.yml, waits for it, reads the timeline trainjob_info returns (submitted, pods
scheduled, images pulled, containers started, rendezvous, first epoch, finished) and the
pre-pull's time, and deletes the job. Modes:

  warm   the image is already on the nodes (--runs runs; the default)
  cold   the image is on no node: the first job on a fresh cluster (one run; refused when a
         node has the image, because containerd keeps the layers of any container that used
         it, so removing the image's name does not make a node cold again)

It prints the median seconds of each step since the step before, apply -> Succeeded, the
pre-pull and the whole (pre-pull + job). Local stack only. Prints figures, asserts nothing.

Usage: .venv/bin/python benchmarks/startup.py [--runs 3] [--mode warm|cold] [--no-prepull]
"""

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as c  # noqa: E402  pylint: disable=wrong-import-position

STEPS = ("scheduled", "image_pulled", "containers_started", "rendezvous", "first_epoch", "finished")


def kind_nodes(cluster):
    out = subprocess.run(["docker", "ps", "--filter", f"label=io.x-k8s.kind.cluster={cluster}", "--format", "{{.Names}}"],
                         check=True, capture_output=True, text=True).stdout
    return sorted(name for name in out.split() if name)


def nodes_with_image(nodes, image):
    """The kind nodes whose containerd has the image under its name."""
    found = []
    for node in nodes:
        listed = subprocess.run(["docker", "exec", node, "ctr", "-n", "k8s.io", "images", "ls", "-q"],
                                check=False, capture_output=True, text=True).stdout.split()
        if image in listed:
            found.append(node)
    return found


def run_once(name, image, prepull, workdir):
    out = pathlib.Path(workdir) / f"{name}.json"
    env = dict(os.environ, ANSIBLE_CONFIG=str(c.REPO / "ansible.cfg"))
    env.setdefault("AWS_ACCESS_KEY_ID", "testing")
    env.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    argv = ["ansible-playbook", "-i", str(c.REPO / "inventories" / "local"), str(c.REPO / "benchmarks" / "startup.yml"),
            "-e", f"_bench_job={name}", "-e", f"_bench_out={out}", "-e", f"_bench_image={image}",
            "-e", f"trainjob_prepull={'true' if prepull else 'false'}"]
    started = time.monotonic()
    proc = subprocess.run(argv, check=False, capture_output=True, text=True, env=env, cwd=str(c.REPO), timeout=1800)
    wall = time.monotonic() - started
    if proc.returncode != 0 or not out.exists():
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-30:])
        raise SystemExit(f"{name}: ansible-playbook exited {proc.returncode}\n{tail}")
    result = json.loads(out.read_text())
    result["wall_seconds"] = round(wall, 1)
    return result


def figures(result):
    steps = {step["step"]: step for step in (result.get("timeline") or {}).get("steps", [])}
    row = {key: steps.get(key, {}).get("seconds") for key in STEPS}
    row["apply_to_succeeded"] = steps.get("finished", {}).get("since_submitted")
    row["prepull"] = (result.get("prepull") or {}).get("seconds", 0.0)
    row["prepull_plus_job"] = (row["prepull"] or 0.0) + (row["apply_to_succeeded"] or 0.0)
    row["image_pull_max"] = (result.get("timeline") or {}).get("image_pull_seconds_max")
    return row


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--mode", choices=["warm", "cold"], default="warm")
    parser.add_argument("--no-prepull", action="store_true", help="trainjob_prepull=false: the job's pods pull")
    parser.add_argument("--cluster", default="trainfleet")
    parser.add_argument("--image", default=None, help="trainer image (default: the one the train step ran)")
    args = parser.parse_args(argv)
    core, _custom = c.api()
    image = c.trainer_image(core, args.image)
    nodes = kind_nodes(args.cluster)
    having = nodes_with_image(nodes, image)
    if args.mode == "cold" and having:
        sys.exit(f"cold: {', '.join(having)} already have {image}; run on a fresh cluster (its first job), "
                 "or pass -e trainjob_image to the train step of a never-pulled image")
    runs = 1 if args.mode == "cold" else args.runs
    prepull = not args.no_prepull
    print(f"image {image}; kind nodes {', '.join(nodes)}; mode {args.mode}, pre-pull {'on' if prepull else 'off'}, {runs} run(s)")
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        for index in range(runs):
            result = run_once(f"bench-startup-{args.mode}-{index}", image, prepull, workdir)
            row = figures(result)
            rows.append(row)
            print(f"  run {index + 1}: {result['phase']}, apply -> Succeeded {row['apply_to_succeeded']} s, "
                  f"pre-pull {row['prepull']} s, pull in the job {row['image_pull_max']} s, playbook {result['wall_seconds']} s")
    keys = list(STEPS) + ["apply_to_succeeded", "image_pull_max", "prepull", "prepull_plus_job"]
    print(f"\nmedian seconds of {len(rows)} run(s) (each step: since the step before)")
    for key in keys:
        value = median([row[key] for row in rows])
        print(key.ljust(22) + ("-" if value is None else f"{value:.1f}").rjust(10))
    return 0


if __name__ == "__main__":
    sys.exit(main())
