"""Process-group setup from torchrun's or mpirun's environment, and collectives that also work without one.

torchrun sets RANK/LOCAL_RANK/WORLD_SIZE/GROUP_RANK. OpenMPI's mpirun (an MPIJob's launcher) sets
OMPI_COMM_WORLD_RANK/_SIZE/_LOCAL_RANK/_LOCAL_SIZE instead; the process group is still gloo (or
nccl) over env://, so the launcher passes MASTER_ADDR and MASTER_PORT with ``mpirun -x``.
"""

import os
import socket
import threading
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

from trainer.config import ConfigError
from trainer.metrics import rank_line


@dataclass
class DistContext:
    """Where this process sits in the job. ``distributed`` is False for a plain single process."""

    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    group_rank: int = 0
    distributed: bool = False
    backend: str = "none"
    device: torch.device = torch.device("cpu")
    restart_count: int = 0
    launcher: str = "none"
    xla: object = None  # trainer.xla.XlaRuntime with --device xla

    @property
    def comm_device(self):
        """Where the trainer's own collectives' tensors live: the device, except on an XLA device whose
        process group is gloo (the CPU runtime), where they stay on the host."""
        if self.device.type == "xla" and self.backend != "xla":
            return torch.device("cpu")
        return self.device

    @property
    def is_rank0(self):
        return self.rank == 0

    def rank_line(self):
        return rank_line(self.rank, self.local_rank, self.world_size, self.group_rank, socket.gethostname(),
                         launcher=self.launcher)


def _env_int(env, name, default):
    value = env.get(name)
    try:
        return int(value) if value not in (None, "") else default
    except ValueError as exc:
        raise RuntimeError(f"environment variable {name} must be an integer, got {value!r}") from exc


LAUNCHER_TORCHRUN = "torchrun"
LAUNCHER_MPIRUN = "mpirun"
LAUNCHER_NONE = "none"


def launched_by(environ=None):
    """Who started this process: torchrun (RANK and WORLD_SIZE set; they win over anything else),
    mpirun (OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE set), or none (a plain single process)."""
    env = os.environ if environ is None else environ
    if "WORLD_SIZE" in env and "RANK" in env:
        return LAUNCHER_TORCHRUN
    if "OMPI_COMM_WORLD_SIZE" in env and "OMPI_COMM_WORLD_RANK" in env:
        return LAUNCHER_MPIRUN
    return LAUNCHER_NONE


def mpirun_ranks(env):
    """(rank, local_rank, world_size, group_rank) from OpenMPI's variables.

    group_rank (the node's index) is rank // OMPI_COMM_WORLD_LOCAL_SIZE: right for mpirun's default
    by-slot mapping with the same slot count on every host, which an MPIJob's hostfile gives
    (slotsPerWorker on every worker). OMPI_COMM_WORLD_NODE_RANK is not the node's index: OpenMPI
    documents it as the process's rank among all processes on its node (2 processes on one host get
    0 and 1), so it is not read.
    """
    rank = _env_int(env, "OMPI_COMM_WORLD_RANK", 0)
    return (rank, _env_int(env, "OMPI_COMM_WORLD_LOCAL_RANK", 0), _env_int(env, "OMPI_COMM_WORLD_SIZE", 1),
            rank // _mpirun_local_size(env))


def _mpirun_local_size(env):
    return max(1, _env_int(env, "OMPI_COMM_WORLD_LOCAL_SIZE", 1))


def env_ranks(environ=None):
    """(rank, local_rank, world_size, group_rank, launched) of this process; launched = started by torchrun
    or mpirun (launched_by). Under mpirun, MASTER_ADDR must be set (``mpirun -x MASTER_ADDR=...``): the
    process group's env:// rendezvous reads it, and without it the error would not say why."""
    env = os.environ if environ is None else environ
    launcher = launched_by(env)
    if launcher == LAUNCHER_MPIRUN:
        if not env.get("MASTER_ADDR"):
            raise RuntimeError("launched by mpirun (OMPI_COMM_WORLD_RANK is set) but MASTER_ADDR is not set: pass the "
                               "rendezvous address to every rank, e.g. mpirun -x MASTER_ADDR=<rank 0's host> "
                               "-x MASTER_PORT=29500 ...")
        return (*mpirun_ranks(env), True)
    return (_env_int(env, "RANK", 0), _env_int(env, "LOCAL_RANK", 0), _env_int(env, "WORLD_SIZE", 1),
            _env_int(env, "GROUP_RANK", 0), launcher == LAUNCHER_TORCHRUN)


def restart_count(environ=None):
    """How often torchrun restarted this node's worker group (TORCHELASTIC_RESTART_COUNT; 0 without torchrun).

    A restart of the pod or its container starts a new torchrun at 0: the process cannot see it
    (the downward API has no restart count). pytorchjob_info reports those per replica.
    """
    env = os.environ if environ is None else environ
    return max(0, _env_int(env, "TORCHELASTIC_RESTART_COUNT", 0))


def choose_backend(requested, device_choice, cuda_available):
    """(backend, use_cuda): auto = nccl with CUDA, gloo without; an explicit --backend wins."""
    use_cuda = device_choice == "cuda" or (device_choice == "auto" and cuda_available)
    if device_choice == "cuda" and not cuda_available:
        raise RuntimeError("--device cuda was given but torch sees no CUDA device")
    if requested == "auto":
        return ("nccl" if use_cuda else "gloo"), use_cuda
    if requested == "nccl" and not cuda_available:
        raise RuntimeError("--backend nccl needs CUDA, but torch sees no CUDA device")
    return requested, use_cuda


def local_size(environ=None):
    """Processes on this node: LOCAL_WORLD_SIZE (torchrun's --nproc-per-node), OMPI_COMM_WORLD_LOCAL_SIZE
    (mpirun), else 1."""
    env = os.environ if environ is None else environ
    if launched_by(env) == LAUNCHER_MPIRUN:
        return _mpirun_local_size(env)
    return max(1, _env_int(env, "LOCAL_WORLD_SIZE", 1))


def check_local_gpus(local_rank, processes, gpus):
    """One GPU per process: more processes on a node than GPUs torch sees there is a ConfigError naming
    --nproc-per-node (instead of cuda.set_device failing on the rank past the last GPU)."""
    if processes > gpus or local_rank >= gpus:
        raise ConfigError("--nproc-per-node", f"{max(processes, local_rank + 1)} processes on this node, but torch sees "
                                              f"{gpus} GPU(s) here: expected at most {gpus} (one process per GPU), "
                                              f"or --device cpu")


def init(cfg):
    """Start the process group when launched by torchrun or mpirun (env://), with an explicit timeout."""
    rank, local_rank, world_size, group_rank, launched = env_ranks()
    launcher = launched_by()
    runtime = None
    if cfg.device == "xla":
        from trainer.xla import XlaRuntime  # pylint: disable=import-outside-toplevel

        runtime = XlaRuntime(cfg.compile_cache_path)
        backend, device = runtime.backend(cfg.backend), runtime.device
        if backend == "xla":
            runtime.register_backend()
    else:
        backend, use_cuda = choose_backend(cfg.backend, cfg.device, torch.cuda.is_available())
        device = torch.device("cpu")
        if use_cuda:
            check_local_gpus(local_rank, local_size(), torch.cuda.device_count())
            torch.cuda.set_device(local_rank)
            device = torch.device("cuda", local_rank)
    ctx = DistContext(rank=rank, local_rank=local_rank, world_size=world_size, group_rank=group_rank,
                      distributed=launched, backend=backend if launched else "none", device=device,
                      restart_count=restart_count(), launcher=launcher, xla=runtime)
    if launched:
        # The xla backend takes its ranks from the runtime (xla://); the others from the launcher's env://.
        dist.init_process_group(backend=backend, init_method="xla://" if backend == "xla" else "env://",
                                **({} if backend == "xla" else {"rank": rank, "world_size": world_size}),
                                timeout=timedelta(seconds=cfg.timeout_s))
    return ctx


# destroy_process_group's bound: the process ends right after it (trainer.train.exit_now), so a
# teardown that blocks must not keep it alive.
SHUTDOWN_WAIT_S = 15.0


def shutdown(wait_s=SHUTDOWN_WAIT_S):
    """destroy_process_group when one exists (safe to call on every exit path), waiting at most ``wait_s``.

    With torch 2.6 (the XLA venv's) a gloo group's teardown sometimes blocks for good after the peer
    has already exited (seen in about one 2-process run in ten); the process then never ended and its
    torchrun waited with it. The teardown now runs in a daemon thread, and a run whose teardown
    does not finish within the bound goes on to exit anyway; the returned flag says which happened.
    """
    if not (dist.is_available() and dist.is_initialized()):
        return True
    worker = threading.Thread(target=dist.destroy_process_group, name="destroy-process-group", daemon=True)
    worker.start()
    worker.join(wait_s)
    return not worker.is_alive()


def all_reduce_sum(ctx, values):
    """Sum a list of floats over all ranks (float64 on the collective's device)."""
    tensor = torch.tensor(values, dtype=torch.float64, device=ctx.comm_device)
    if ctx.distributed:
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor.tolist()


def all_ok(ctx, ok):
    """True on every rank only if ``ok`` is True on every rank (a barrier that also carries failure)."""
    failed = all_reduce_sum(ctx, [0.0 if ok else 1.0])[0]
    return failed == 0.0


def broadcast_object(ctx, obj):
    """Rank 0's ``obj`` on every rank."""
    if not ctx.distributed:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0, device=ctx.device if ctx.device.type == "cuda" else None)
    return box[0]
