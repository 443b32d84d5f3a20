"""Start-up timeline of a training job: the median of each interval, cold and warm.

Each run submits the local inventory's default job (the train step's role, elastic, 2 Workers,
digits) under a scratch name through benchmarks/startup.yml, waits for it, reads the timeline
trainjob_info returns (submitted, pods scheduled, images pulled, containers started, rendezvous,
first epoch, finished) and deletes the job. Modes:

  cold          the trainer image removed from every kind node first; the role pre-pulls it
                (pytorchjob_prepull, the default) before submitting
  cold-no-prepull  the same without the pre-pull: the job's own pods pull (the old behaviour)
  warm          the image already on the nodes

It prints, per mode, the median seconds of each step since the step before, apply -> Succeeded,
the pre-pull and the whole (pre-pull + job). Local stack only (it removes images from the kind
nodes with crictl). Prints figures, asserts nothing.

Usage: .venv/bin/python benchmarks/startup.py [--runs 3] [--modes cold,cold-no-prepull,warm]
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
MODES = {"cold": (True, True), "cold-no-prepull": (True, False), "warm": (False, True)}


def kind_nodes(cluster):
    out = subprocess.run(["docker", "ps", "--filter", f"label=io.x-k8s.kind.cluster={cluster}", "--format", "{{.Names}}"],
                         check=True, capture_output=True, text=True).stdout
    return sorted(name for name in out.split() if name)


def remove_image(nodes, image):
    for node in nodes:
        subprocess.run(["docker", "exec", node, "crictl", "rmi", image], check=False, capture_output=True, text=True)


def run_once(name, image, prepull, workdir):
    out = pathlib.Path(workdir) / f"{name}.json"
    env = dict(os.environ, ANSIBLE_CONFIG=str(c.REPO / "ansible.cfg"))
    env.setdefault("AWS_ACCESS_KEY_ID", "testing")
    env.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    argv = ["ansible-playbook", "-i", str(c.REPO / "inventories" / "local"), str(c.REPO / "benchmarks" / "startup.yml"),
            "-e", f"_bench_job={name}", "-e", f"_bench_out={out}", "-e", f"_bench_image={image}",
            "-e", f"pytorchjob_prepull={'true' if prepull else 'false'}"]
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
    parser.add_argument("--modes", default="cold,cold-no-prepull,warm")
    parser.add_argument("--cluster", default="trainfleet")
    parser.add_argument("--image", default=None, help="trainer image (default: the one the train step ran)")
    args = parser.parse_args(argv)
    core, _custom = c.api()
    image = c.trainer_image(core, args.image)
    nodes = kind_nodes(args.cluster)
    print(f"image {image}; kind nodes {', '.join(nodes)}; {args.runs} run(s) per mode")
    table = {}
    with tempfile.TemporaryDirectory() as workdir:
        for mode in args.modes.split(","):
            cold, prepull = MODES[mode]
            rows = []
            for index in range(args.runs):
                if cold:
                    remove_image(nodes, image)
                name = f"bench-startup-{mode.replace('-no-prepull', '-np')}-{index}"
                result = run_once(name, image, prepull, workdir)
                row = figures(result)
                rows.append(row)
                print(f"  {mode} run {index + 1}: {result['phase']}, apply -> Succeeded {row['apply_to_succeeded']} s, "
                      f"pre-pull {row['prepull']} s, pull in the job {row['image_pull_max']} s, playbook {result['wall_seconds']} s")
            table[mode] = {key: median([r[key] for r in rows]) for key in rows[0]}
    keys = list(STEPS) + ["apply_to_succeeded", "image_pull_max", "prepull", "prepull_plus_job"]
    print("\nmedian seconds (each step: since the step before)")
    print("step".ljust(22) + "".join(mode.rjust(18) for mode in table))
    for key in keys:
        cells = "".join(("-" if table[m][key] is None else f"{table[m][key]:.1f}").rjust(18) for m in table)
        print(key.ljust(22) + cells)
    return 0


if __name__ == "__main__":
    sys.exit(main())
