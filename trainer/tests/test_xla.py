"""--device xla for real: torch_xla's CPU runtime (PJRT), 2 processes under torchrun, in the virtual
environment scripts/xla-requirements.txt pins (torch_xla needs its own torch: scripts/test.sh makes it
and sets TRAINFLEET_XLA_PYTHON). The same trainer code path torch-neuronx runs on Trainium; the
NeuronCores themselves are not here.

- digits: the XLA run ends where the CPU run ends; a run stopped after its snapshot and resumed
  ends with the same weights, bit for bit, as the run that was not stopped; model.pt loads without torch_xla;
- the transformer: a precompile run fills a cache set, then the training job compiles nothing and
  trains to the CPU run's accuracy band; the figures go to out/test-reports/xla-compile-cache.json;
- a job is refused while another holds the cache set, naming both.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from trainer.metrics import parse_compile_line, parse_result_line
from trainer.snapshot import from_bytes
from trainer.tests.conftest import REPO_ROOT, base_env, run_cmd

XLA_PYTHON = os.environ.get("TRAINFLEET_XLA_PYTHON", "")
REQUIRED = os.environ.get("TRAINFLEET_REQUIRE_XLA", "") == "1"
REPORTS = Path(os.environ.get("TRAINFLEET_TEST_REPORTS", REPO_ROOT / "out" / "test-reports"))
TIMEOUT = 300


@pytest.fixture(scope="module")
def xla_python():
    if not XLA_PYTHON or not os.access(XLA_PYTHON, os.X_OK):
        message = (f"TRAINFLEET_XLA_PYTHON ({XLA_PYTHON!r}) names no python with torch_xla; make trainer-test "
                   f"installs scripts/xla-requirements.txt and sets it")
        if REQUIRED:
            pytest.fail(message)
        pytest.skip(message)
    return XLA_PYTHON


def xla_env():
    return base_env(PJRT_DEVICE="CPU")


def torchrun(python, args, nproc=2):
    """A real 2-process torchrun of the trainer in the XLA venv; (CompletedProcess, wall seconds)."""
    start = time.monotonic()
    proc = run_cmd([python, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc), "--max_restarts", "0",
                    "-m", "trainer.train", *args], env=xla_env(), timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc, time.monotonic() - start


def line(proc, parse):
    found = [parse(text) for text in proc.stdout.splitlines() if parse(text) is not None]
    assert len(found) == 1, proc.stdout[-3000:]
    return found[0]


def state_dict(path):
    with open(path, "rb") as handle:
        return from_bytes(handle.read())["state_dict"]


DIGITS = ["--epochs", "3", "--seed", "3"]


def test_digits_on_xla_ends_where_the_cpu_run_ends_and_resumes_bit_for_bit(xla_python, tmp_path):
    cpu = torchrun(xla_python, [*DIGITS, "--device", "cpu", "--output-dir", str(tmp_path / "cpu")])[0]
    xla = torchrun(xla_python, [*DIGITS, "--device", "xla", "--output-dir", str(tmp_path / "xla")])[0]
    cpu_result, xla_result = line(cpu, parse_result_line), line(xla, parse_result_line)
    assert "backend=gloo device=xla:0" in xla.stdout
    assert xla_result["world_size"] == 2 and xla_result["final_accuracy"] > 0.75
    assert abs(xla_result["final_accuracy"] - cpu_result["final_accuracy"]) <= 0.02
    compiled = line(xla, parse_compile_line)
    assert compiled["device"] == "xla:CPU" and compiled["graphs_compiled"] > 0 and compiled["cache_set"] is None

    snapshots = str(tmp_path / "snapshots")
    stopped = torchrun(xla_python, [*DIGITS, "--device", "xla", "--snapshot-dir", snapshots, "--stop-after-epoch", "2",
                                    "--output-dir", str(tmp_path / "stopped")])[0]
    assert "trainfleet-stopped: epoch=2" in stopped.stdout
    resumed = torchrun(xla_python, [*DIGITS, "--device", "xla", "--snapshot-dir", snapshots, "--output-dir", str(tmp_path / "resumed")])[0]
    assert "trainfleet-resume: epoch=2 next_epoch=3" in resumed.stdout
    whole, again = state_dict(tmp_path / "xla" / "model.pt"), state_dict(tmp_path / "resumed" / "model.pt")
    assert whole.keys() == again.keys()
    for name, tensor in whole.items():  # written through xm.save: CPU tensors, loadable here without torch_xla
        assert tensor.device.type == "cpu" and torch.equal(tensor, again[name]), name


TRANSFORMER = ["--model", "transformer", "--dataset", "corpus", "--corpus-bytes", "65536", "--seq-len", "64", "--epochs", "3"]


def test_precompile_then_train_from_the_cache_set(xla_python, tmp_path):
    cache = tmp_path / "compile-cache"
    cache_args = ["--device", "xla", "--compile-cache-dir", str(cache), "--cache-set", "transformer-tiny"]
    precompile, precompile_s = torchrun(xla_python, [*TRANSFORMER, *cache_args, "--precompile", "--output-dir", str(tmp_path / "pre")])
    first = line(precompile, parse_compile_line)
    # Both ranks compile into the one set; a graph the other rank stored first is a hit.
    assert first["precompile"] and first["graphs_compiled"] > 0 and first["cache_misses"] == first["graphs_compiled"]
    graphs = first["cache_misses"] + first["cache_hits"]
    assert "trainfleet-stopped: epoch=1 reason=--precompile" in precompile.stdout
    assert not (tmp_path / "pre" / "model.pt").exists()
    assert any((cache / "transformer-tiny").iterdir()) and not (cache / "transformer-tiny.lock").exists()

    train, train_s = torchrun(xla_python, [*TRANSFORMER, *cache_args, "--output-dir", str(tmp_path / "train")])
    second = line(train, parse_compile_line)
    assert second["graphs_compiled"] == 0 and second["cache_misses"] == 0 and second["cache_hits"] == graphs, (first, second)
    result = line(train, parse_result_line)
    cpu, cpu_s = torchrun(xla_python, [*TRANSFORMER, "--device", "cpu", "--output-dir", str(tmp_path / "cpu")])
    cpu_result = line(cpu, parse_result_line)
    # The same band: dropout draws from XLA's generator on the device, not the CPU's, so the two runs differ
    # in their last digits; after 3 epochs both are near 0.26-0.30 next-token accuracy (chance: 1/256).
    assert abs(result["final_accuracy"] - cpu_result["final_accuracy"]) <= 0.1, (result, cpu_result)
    assert result["final_perplexity"] < 60 and cpu_result["final_perplexity"] < 60
    figures = {"model": "transformer tiny, corpus 64 KiB, seq 64, 3 epochs, 2 processes (torchrun, XLA CPU runtime)",
               "precompile": {"wall_s": round(precompile_s, 1), **first},
               "train_from_cache": {"wall_s": round(train_s, 1), **second, "final_accuracy": result["final_accuracy"]},
               "cpu": {"wall_s": round(cpu_s, 1), "final_accuracy": cpu_result["final_accuracy"]}}
    REPORTS.mkdir(parents=True, exist_ok=True)
    (REPORTS / "xla-compile-cache.json").write_text(json.dumps(figures, indent=2) + "\n")


HOLD = """
import sys, time
from trainer.compilecache import CacheLock
CacheLock(sys.argv[1], "transformer-tiny", "precompile-job", wait_s=0).acquire()
print("held", flush=True)
time.sleep(120)
"""


def test_a_job_is_refused_while_another_holds_the_cache_set(xla_python, tmp_path):
    cache = tmp_path / "compile-cache"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(cache)], cwd=REPO_ROOT, env=base_env(),  # pylint: disable=consider-using-with
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        proc = run_cmd([xla_python, "-m", "trainer.train", *DIGITS, "--device", "xla", "--compile-cache-dir", str(cache),
                        "--cache-set", "transformer-tiny", "--cache-lock-wait-s", "0", "--output-dir", str(tmp_path / "out")],
                       env=xla_env(), timeout=TIMEOUT)
    finally:
        holder.kill()
        holder.wait(timeout=10)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert ("trainfleet-trainer: error: compile cache set 'transformer-tiny' is in use by job 'precompile-job'"
            in proc.stderr), proc.stderr
    assert not (cache / "transformer-tiny").exists() and not (tmp_path / "out" / "model.pt").exists()
