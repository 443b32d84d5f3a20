"""The trainer against a bare training loop on the same work, in one run: samples/s, their ratio and
the model FLOPs utilisation (MFU) against this device's measured matrix-product peak.

Each row trains one model at one precision twice:

* **trainer**: the real CLI, ``python -m trainer.train`` in a child process (single process, synthetic
  data, --device as given), its samples/s read from its ``trainfleet-epoch:`` lines;
* **bare**: the loop a competent user writes by hand, in this process: the same model class (trainer.model),
  the data already on the device, a random permutation per epoch, ``torch.optim.Adam`` with its
  defaults, bf16 through ``torch.autocast``, the clock read after ``torch.cuda.synchronize()``.

Both report the median epoch after the first (warm-up; with --compile the first epoch compiles).
MFU = samples/s x training FLOPs per sample / the peak, where the peak is a large matrix product of
that precision measured here at the start (fp32 rows: TF32 off). No number is asserted anywhere.

    python benchmarks/trainer_gpu.py                 # on a GPU: every row, about 5 minutes on an H100
    python benchmarks/trainer_gpu.py --device cpu --quick   # a brief CPU run (make test runs it)
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import torch  # noqa: E402 pylint: disable=wrong-import-position

from trainer import text  # noqa: E402 pylint: disable=wrong-import-position
from trainer.metrics import parse_epoch_line  # noqa: E402 pylint: disable=wrong-import-position
from trainer.model import build_model, model_spec, transformer_flops_per_sample  # noqa: E402 pylint: disable=wrong-import-position

# name: model, its shape, batch per step, samples per epoch (train part), epochs (the first is warm-up).
WORK = {
    "cuda": {
        "mlp-small": {"model": "mlp", "features": 256, "hidden": [512, 256], "batch": 256, "samples": 131072, "epochs": 4},
        "mlp-big": {"model": "mlp", "features": 1024, "hidden": [4096, 4096], "batch": 8192, "samples": 524288, "epochs": 4},
        "transformer-base": {"model": "transformer", "size": "base", "seq": 128, "batch": 64, "samples": 4096, "epochs": 3},
    },
    "cpu": {
        "mlp-small": {"model": "mlp", "features": 64, "hidden": [128, 64], "batch": 64, "samples": 4096, "epochs": 3},
        "transformer-tiny": {"model": "transformer", "size": "tiny", "seq": 32, "batch": 16, "samples": 512, "epochs": 3},
    },
}
QUICK_ROWS = {"cpu": ["mlp-small:fp32", "transformer-tiny:bf16"], "cuda": ["mlp-small:fp32", "transformer-base:bf16"]}
CLASSES = 10
TEST_FRACTION = 0.02


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda" if torch.cuda.is_available() else "cpu",
                   help="default: cuda when torch sees a GPU, else cpu")
    p.add_argument("--rows", default="", help="comma-separated WORK:PRECISION[:compile] (default: every work at fp32 and bf16, "
                                              "plus the transformer at bf16 with --compile on CUDA)")
    p.add_argument("--quick", action="store_true", help="two small rows only")
    p.add_argument("--json", help="also write the rows here as JSON")
    p.add_argument("--timeout", type=float, default=600, help="seconds allowed per trainer run (default: %(default)s)")
    return p.parse_args(argv)


def default_rows(device):
    rows = [f"{work}:{precision}" for work in WORK[device] for precision in ("fp32", "bf16")]
    if device == "cuda":
        rows.append("transformer-base:bf16:compile")
    return rows


def spec_of(work):
    if work["model"] == "transformer":
        return model_spec("transformer", work["seq"], text.VOCAB, [1], size=work["size"])
    return model_spec("mlp", work["features"], CLASSES, work["hidden"])


def flops_per_sample(work):
    """Training FLOPs (forward + backward) of one sample: 6 per weight for an MLP."""
    spec = spec_of(work)
    if spec["name"] == "transformer":
        return transformer_flops_per_sample(spec)
    widths = [work["features"], *work["hidden"], CLASSES]
    return 6 * sum(a * b for a, b in zip(widths, widths[1:]))


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def matmul_peak(device, precision):
    """FLOP/s of a square matrix product of this precision (CUDA: 8192, the mean of 10 after 3 warm-ups)."""
    n = 8192 if device.type == "cuda" else 1024
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    for _warm in range(3):
        a @ b  # pylint: disable=pointless-statement
    sync(device)
    start = time.perf_counter()
    for _timed in range(10):
        a @ b  # pylint: disable=pointless-statement
    sync(device)
    return 10 * 2 * n ** 3 / (time.perf_counter() - start)


def bare_loop(work, precision, compiled, device):
    """The hand-written loop's median samples/s (see the module docstring)."""
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    model = build_model(spec_of(work)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    n = work["samples"]
    if work["model"] == "transformer":
        x = torch.randint(0, text.VOCAB, (n, work["seq"]), device=device)
        y = torch.randint(0, text.VOCAB, (n, work["seq"]), device=device)
    else:
        x = torch.randn(n, work["features"], device=device)
        y = torch.randint(0, CLASSES, (n,), device=device)
    loss_fn = torch.nn.CrossEntropyLoss()
    step_model = torch.compile(model) if compiled else model
    rates = []
    for _epoch in range(work["epochs"]):
        sync(device)
        start = time.perf_counter()
        perm = torch.randperm(n, device=device)
        for i in range(0, n, work["batch"]):
            idx = perm[i:i + work["batch"]]
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16"):
                logits = step_model(x[idx])
            loss = loss_fn(logits.reshape(-1, logits.shape[-1]).float(), y[idx].reshape(-1))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        sync(device)
        rates.append(n / (time.perf_counter() - start))
    del model, optimizer, x, y
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return statistics.median(rates[1:])


def trainer_run(work, precision, compiled, device, timeout, workdir):
    """The trainer CLI's median samples/s after the first epoch (synthetic data of the same size)."""
    total = int(round(work["samples"] / (1 - TEST_FRACTION))) + 1
    args = [sys.executable, "-m", "trainer.train", "--dataset", "synthetic", "--synthetic-samples", str(total),
            "--test-fraction", str(TEST_FRACTION), "--batch-size", str(work["batch"]), "--epochs", str(work["epochs"]),
            "--device", device.type, "--precision", precision, "--output-dir", os.path.join(workdir, "out"), "--lr", "0.001"]
    if work["model"] == "transformer":
        args += ["--model", "transformer", "--model-size", work["size"], "--seq-len", str(work["seq"])]
    else:
        args += ["--synthetic-features", str(work["features"]), "--synthetic-classes", str(CLASSES),
                 "--hidden", ",".join(str(h) for h in work["hidden"])]
    if compiled:
        args.append("--compile")
    env = dict(os.environ, PYTHONPATH=str(REPO), MPLBACKEND="Agg", PYTHONUNBUFFERED="1")
    proc = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-3000:])
        raise SystemExit(f"trainer_gpu: the trainer failed ({' '.join(args[3:])}) with exit code {proc.returncode}")
    epochs = [parse_epoch_line(line) for line in proc.stdout.splitlines() if line.startswith("trainfleet-epoch:")]
    return statistics.median(e["samples_per_s"] for e in epochs[1:])


def main(argv=None):
    args = parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("trainer_gpu: --device cuda, but torch sees no CUDA device")
    rows = args.rows.split(",") if args.rows else QUICK_ROWS[device.type] if args.quick else default_rows(device.type)
    if device.type == "cpu":
        torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU ({torch.get_num_threads()} threads)"
    print(f"trainer_gpu: {name}, torch {torch.__version__}", flush=True)
    peaks = {p: matmul_peak(device, p) for p in sorted({r.split(":")[1] for r in rows})}
    print("  measured matrix-product peak: " + ", ".join(f"{p} {v / 1e12:.1f} TFLOP/s" for p, v in peaks.items()), flush=True)
    print(f"  {'work':<18} {'precision':<14} {'trainer/s':>11} {'bare/s':>11} {'ratio':>6} {'trainer MFU':>11} {'bare MFU':>9}", flush=True)
    results = []
    with tempfile.TemporaryDirectory(prefix="trainfleet-gpu-bench-") as workdir:
        for row in rows:
            work_name, precision, *flags = row.split(":")
            work, compiled = WORK[device.type][work_name], "compile" in flags
            trainer = trainer_run(work, precision, compiled, device, args.timeout, workdir)
            bare = bare_loop(work, precision, compiled, device)
            flops = flops_per_sample(work)
            result = {"work": work_name, "precision": precision, "compile": compiled, "trainer_samples_per_s": trainer,
                      "bare_samples_per_s": bare, "ratio": trainer / bare, "flops_per_sample": flops,
                      "trainer_mfu": trainer * flops / peaks[precision], "bare_mfu": bare * flops / peaks[precision]}
            results.append(result)
            label = precision + (" +compile" if compiled else "")
            print(f"  {work_name:<18} {label:<14} {trainer:11.1f} {bare:11.1f} {result['ratio']:6.2f} "
                  f"{result['trainer_mfu']:11.1%} {result['bare_mfu']:9.1%}", flush=True)
    by = {(r["work"], r["precision"], r["compile"]): r for r in results}
    for work_name in WORK[device.type]:
        fp32, bf16 = by.get((work_name, "fp32", False)), by.get((work_name, "bf16", False))
        if fp32 and bf16:
            print(f"  {work_name}: trainer bf16 / fp32 = {bf16['trainer_samples_per_s'] / fp32['trainer_samples_per_s']:.2f}x", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"device": name, "torch": torch.__version__, "peaks": peaks, "rows": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
