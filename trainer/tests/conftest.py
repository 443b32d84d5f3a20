"""Shared fixtures: a clean environment for trainer subprocesses and a real moto server (tests/support/moto.py)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.moto import MotoStartError
from tests.support.moto import moto_server as running_moto

REPO_ROOT = Path(__file__).resolve().parents[2]
SUBPROCESS_TIMEOUT = 240
DIST_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "GROUP_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
             "TORCHELASTIC_RUN_ID", "TORCHELASTIC_ERROR_FILE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
             "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_NODE_RANK")


def base_env(**extra):
    """Environment for a trainer subprocess: repo on PYTHONPATH, one thread per process, no AWS surprises."""
    env = {k: v for k, v in os.environ.items() if k not in DIST_VARS and not k.startswith("AWS_")}
    env.update({"PYTHONPATH": str(REPO_ROOT), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1",
                "MPLBACKEND": "Agg"})
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run_cmd(args, env=None, timeout=SUBPROCESS_TIMEOUT):
    """Run a command with a hard timeout; returns CompletedProcess (text)."""
    return subprocess.run(args, cwd=REPO_ROOT, env=env or base_env(), capture_output=True, text=True, timeout=timeout, check=False)


def torchrun(trainer_args, nproc=2, env=None, timeout=SUBPROCESS_TIMEOUT):
    """A real torchrun (standalone, c10d on localhost) of ``-m trainer.train``."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc), "--max_restarts", "0",
           "-m", "trainer.train", *trainer_args]
    return run_cmd(cmd, env=env, timeout=timeout)


def single(trainer_args, env=None, timeout=SUBPROCESS_TIMEOUT):
    """A plain single process (no torchrun): world size 1."""
    return run_cmd([sys.executable, "-m", "trainer.train", *trainer_args], env=env, timeout=timeout)


@pytest.fixture(autouse=True)
def _quiet_env(monkeypatch):
    """In-process calls must not see a launcher's variables or real AWS settings."""
    for name in DIST_VARS:
        monkeypatch.delenv(name, raising=False)
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")


@pytest.fixture(scope="session")
def moto_server(tmp_path_factory):
    """A REAL moto server on a free localhost port for the session; stopped (bounded) afterwards."""
    try:
        with running_moto(tmp_path_factory.mktemp("moto") / "moto.log") as url:
            yield url
    except MotoStartError as exc:
        pytest.fail(str(exc))


@pytest.fixture
def aws_env(moto_server, monkeypatch):
    """Dummy credentials and the moto endpoint, for this process and as a dict for subprocesses."""
    values = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
              "AWS_ENDPOINT_URL": moto_server}
    for key, value in values.items():
        monkeypatch.setenv(key, value)
    return values


def pytest_configure(config):
    config.addinivalue_line("markers", "integration: real torchrun / moto server runs (slow, no mocks)")
