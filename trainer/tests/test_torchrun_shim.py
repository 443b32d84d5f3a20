"""trainer/bin/torchrun, the image's /usr/local/bin/torchrun: plain `torchrun` for any script.

A DDP script that never imports our trainer, launched the way the PyTorch tutorials do it (two
processes, c10d, gloo), through the shim with a real torch; with LOGLEVEL=INFO (the train step's
default, pytorchjob_torchrun_log_level) torchrun logs the rendezvous rank 0 is decided from."""

import os
import sys

from trainer.tests.conftest import REPO_ROOT, base_env, run_cmd

SCRIPT = """\
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
total = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(total)
print(f"rank {dist.get_rank()} of {dist.get_world_size()}: sum {total.item()}", flush=True)
dist.destroy_process_group()
"""


def test_plain_torchrun_runs_a_script_that_never_heard_of_us(tmp_path):
    script = tmp_path / "ddp_tutorial.py"
    script.write_text(SCRIPT)
    # the shim runs `python3`: this interpreter's, first on PATH
    env = base_env(PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""), LOGLEVEL="INFO")
    shim = os.path.join(REPO_ROOT, "trainer", "bin", "torchrun")
    proc = run_cmd(["sh", shim, "--standalone", "--nproc_per_node", "2", "--max_restarts", "0", str(script)], env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "rank 0 of 2: sum 3.0" in proc.stdout and "rank 1 of 2: sum 3.0" in proc.stdout, proc.stdout
    log = proc.stdout + proc.stderr
    assert "Rendezvous complete for workers" in log and "group_rank=0" in log and "global_ranks=[0, 1]" in log, log
    # it is torchrun: its own usage names it
    usage = run_cmd(["sh", shim, "--help"], env=env)
    assert usage.returncode == 0 and usage.stdout.startswith("usage: torchrun"), usage.stdout[:200]
