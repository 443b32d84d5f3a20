"""Throughput benchmark: samples/s of the trainer on the synthetic dataset with 1 and 2 processes.

``make bench-trainer`` runs ``python trainer/bench.py`` from the repo root. Each configuration is a
real torchrun (standalone) of ``trainer.train`` on --device (default cpu, gloo: on a machine with one GPU
two processes would need two GPUs; benchmarks/trainer_gpu.py measures a GPU); samples/s is the median over the
epochs after the first (warm-up). Scaling efficiency = samples/s(N) / (N * samples/s(1)).
No numbers are asserted anywhere: throughput depends on the machine and its load.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from trainer.metrics import parse_epoch_line  # noqa: E402 pylint: disable=wrong-import-position


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nprocs", default="1,2", help="process counts to compare (default: %(default)s)")
    p.add_argument("--samples", type=int, default=60000, help="synthetic samples (default: %(default)s)")
    p.add_argument("--features", type=int, default=256, help="synthetic features (default: %(default)s)")
    p.add_argument("--hidden", default="512,256", help="MLP hidden sizes (default: %(default)s)")
    p.add_argument("--batch-size", type=int, default=256, help="per-process batch size (default: %(default)s)")
    p.add_argument("--epochs", type=int, default=4, help="epochs per run; the first is warm-up (default: %(default)s)")
    p.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS per process (default: %(default)s)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="cpu (gloo) or cuda (nccl; one GPU per process) (default: %(default)s)")
    p.add_argument("--timeout", type=float, default=900, help="seconds allowed per run (default: %(default)s)")
    return p.parse_args(argv)


def run_once(nproc, args, workdir):
    """One torchrun; returns (median samples/s after warm-up, wall seconds)."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc), "--max_restarts", "0",
           "-m", "trainer.train", "--dataset", "synthetic", "--synthetic-samples", str(args.samples),
           "--synthetic-features", str(args.features), "--hidden", args.hidden, "--batch-size", str(args.batch_size),
           "--epochs", str(args.epochs), "--output-dir", os.path.join(workdir, f"out-{nproc}"), "--timeout-s", "300",
           "--device", args.device]
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), OMP_NUM_THREADS=str(args.threads), MPLBACKEND="Agg")
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=args.timeout, check=False)
    wall = time.monotonic() - start
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-3000:])
        raise SystemExit(f"bench: torchrun with {nproc} process(es) failed with exit code {proc.returncode}")
    rates = [parse_epoch_line(line)["samples_per_s"] for line in proc.stdout.splitlines() if line.startswith("trainfleet-epoch:")]
    measured = rates[1:] or rates
    return statistics.median(measured), wall


def main(argv=None):
    args = parse_args(argv)
    nprocs = [int(n) for n in args.nprocs.split(",") if n.strip()]
    print(f"trainer bench: synthetic {args.samples}x{args.features}, mlp {args.hidden}, batch {args.batch_size}/process, "
          f"{args.epochs} epochs (first is warm-up), device {args.device}, OMP_NUM_THREADS={args.threads}, {os.cpu_count()} CPUs", flush=True)
    results = {}
    with tempfile.TemporaryDirectory(prefix="trainfleet-bench-") as workdir:
        for nproc in nprocs:
            rate, wall = run_once(nproc, args, workdir)
            results[nproc] = rate
            print(f"  nproc={nproc}: {rate:10.1f} samples/s  (run {wall:.1f} s)", flush=True)
    if 1 in results:
        for nproc, rate in results.items():
            if nproc != 1:
                speedup = rate / results[1]
                print(f"  speedup {nproc} vs 1: {speedup:.2f}x, scaling efficiency {speedup / nproc:.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
