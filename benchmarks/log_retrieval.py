"""Rank-0 log retrieval of a ~200 MB pod log: pytorchjob_logs vs `kubectl logs` (and k8s_log).

Runs a PyTorchJob whose master prints the trainer's rank line and then --mib MiB of log lines,
waits for it, then fetches the whole log several ways and prints wall time and peak memory:

  pytorchjob_logs (module)   the module run as a script, dest=<file> (streams to disk; returns
                             at most max_bytes=1 MiB of text)
  pytorchjob_logs (ansible)  the same through `ansible localhost -m` (controller + module)
  kubectl logs > file        the CLI
  k8s_log (ansible)          kubernetes.core.k8s_log through `ansible localhost -m` (returns the
                             whole log in the result) - only with --with-k8s-log

Peak memory is the maximum resident set size of the process tree (os.wait4). Prints figures only.

Usage: .venv/bin/python benchmarks/log_retrieval.py [--mib 200] [--repeat 2] [--image IMAGE]
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as c  # noqa: E402  pylint: disable=wrong-import-position

JOB = "bench-biglog"

# Prints the trainer's rank line (so rank 0 is found from the log, as for a real job), then
# `mib` MiB of 128-byte lines in 4 MiB writes, as fast as the container runtime takes them.
WRITER = r"""
import sys
mib = int(sys.argv[1])
sys.stdout.write("trainfleet-rank: rank=0 local_rank=0 world_size=1 group_rank=0 host=bench\n")
line = "trainfleet-bench: %010d " + "x" * 98 + "\n"
per_chunk = (4 << 20) // 128
n = 0
for _ in range(mib // 4):
    sys.stdout.write("".join(line % (n + i) for i in range(per_chunk)))
    n += per_chunk
sys.stdout.write('trainfleet-result: {"final_accuracy": 1.0, "lines": %d}\n' % n)
sys.stdout.flush()
"""


def run_writer_job(core, custom, image, mib, timeout):
    c.delete_job(custom, JOB)
    time.sleep(2)
    manifest = c.job_manifest(JOB, image, ["python3", "-c", WRITER, str(mib)])
    start = time.monotonic()
    c.create_job(custom, manifest)
    _job, _events, cond = c.watch_until_terminal(custom, JOB, timeout)
    print(f"writer job {cond['type']} after {time.monotonic() - start:.1f}s")
    return f"{JOB}-master-0"


def measure(label, argv, env=None, out_path=None):
    stdout = open(out_path, "wb") if out_path else open(os.devnull, "wb")  # pylint: disable=consider-using-with
    with stdout:
        wall, rss, rc, err = c.timed(argv, stdout=stdout, env=env)
    size = os.path.getsize(out_path) if out_path and os.path.exists(out_path) else None
    if rc != 0:
        print(f"  {label}: rc={rc} {err[-500:]}", file=sys.stderr)
    return wall, rss, size


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mib", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--image")
    parser.add_argument("--timeout", type=int, default=600)
    parser.add_argument("--with-k8s-log", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the scratch namespace")
    opts = parser.parse_args()

    core, custom = c.api()
    image = c.trainer_image(core, opts.image)
    c.ensure_namespace(core)
    workdir = tempfile.mkdtemp(prefix="trainfleet-bench-")
    try:
        pod = run_writer_job(core, custom, image, opts.mib, opts.timeout)
        ansible = os.path.join(os.path.dirname(sys.executable), "ansible")
        env = c.module_env()
        env.setdefault("ANSIBLE_CONFIG", str(c.REPO / "ansible.cfg"))
        methods = {
            "pytorchjob_logs (module)": lambda dest: (c.module_command("trainjob_logs", {
                "name": JOB, "namespace": c.NAMESPACE, "kubeconfig": c.KUBECONFIG, "dest": dest}), env, None),
            "pytorchjob_logs (ansible)": lambda dest: ([
                ansible, "localhost", "-m", "trainfleet.training.trainjob_logs", "-a",
                json.dumps({"name": JOB, "namespace": c.NAMESPACE, "kubeconfig": c.KUBECONFIG, "dest": dest})], env, None),
            "kubectl logs > file": lambda dest: ([
                "kubectl", "--kubeconfig", c.KUBECONFIG, "-n", c.NAMESPACE, "logs", pod, "-c", "pytorch"], None, dest),
        }
        if opts.with_k8s_log:
            methods["k8s_log (ansible)"] = lambda dest: ([
                ansible, "localhost", "-m", "kubernetes.core.k8s_log", "-a",
                json.dumps({"name": pod, "namespace": c.NAMESPACE, "kubeconfig": c.KUBECONFIG, "container": "pytorch"})],
                env, None)
        results = {}
        for _round in range(opts.repeat):
            for label, make in methods.items():
                dest = os.path.join(workdir, label.split()[0] + ".log")
                if os.path.exists(dest):
                    os.unlink(dest)
                argv, run_env, out_path = make(dest)
                wall, rss, _output = measure(label, argv, env=run_env, out_path=out_path)
                size = os.path.getsize(dest) if os.path.exists(dest) else None
                results.setdefault(label, []).append((wall, rss, size))

        kubectl_size = results["kubectl logs > file"][-1][2] or 0
        print(f"\nlog of {pod}: {kubectl_size / 2**20:.1f} MiB as served by the API "
              f"(asked for {opts.mib} MiB; kubelet keeps only the current file of a rotated log)")
        print(f"{'method':28} {'wall s (median)':>16} {'wall s (min)':>13} {'peak RSS MiB':>13} {'written MiB':>12}")
        for label, runs in results.items():
            walls = [r[0] for r in runs]
            rss = max(r[1] for r in runs)
            size = runs[-1][2]
            size_txt = f"{size / 2**20:.1f}" if size is not None else "-"
            print(f"{label:28} {statistics.median(walls):16.2f} {min(walls):13.2f} {rss:13.1f} {size_txt:>12}")
    finally:
        if not opts.keep:
            c.delete_namespace(core)


if __name__ == "__main__":
    main()
