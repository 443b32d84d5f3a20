"""Where a process sits in the job, from its launcher's environment (pure env dicts, no process group)."""

import pytest

from trainer import dist

OMPI = {"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
        "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "MASTER_ADDR": "job-worker-0.job.ns.svc", "MASTER_PORT": "29500"}


def test_plain_process_is_world_size_one():
    assert dist.launched_by({}) == "none"
    assert dist.env_ranks({}) == (0, 0, 1, 0, False)


def test_torchrun_variables():
    env = {"RANK": "5", "LOCAL_RANK": "1", "WORLD_SIZE": "8", "GROUP_RANK": "2"}
    assert dist.launched_by(env) == "torchrun"
    assert dist.env_ranks(env) == (5, 1, 8, 2, True)


def test_torchrun_wins_over_mpirun_variables():
    """torchrun started under mpirun (or RANK set by hand): RANK/WORLD_SIZE decide, as before."""
    env = dict(OMPI, RANK="0", WORLD_SIZE="2", LOCAL_RANK="0", GROUP_RANK="0")
    assert dist.launched_by(env) == "torchrun"
    assert dist.env_ranks(env) == (0, 0, 2, 0, True)


def test_mpirun_variables():
    assert dist.launched_by(OMPI) == "mpirun"
    assert dist.env_ranks(OMPI) == (3, 1, 4, 1, True)


@pytest.mark.parametrize("rank,local_rank,local_size,group_rank", [
    (0, 0, 1, 0), (1, 0, 1, 1), (5, 0, 1, 5),  # an MPIJob with slotsPerWorker 1: one rank per worker pod
    (0, 0, 2, 0), (1, 1, 2, 0), (2, 0, 2, 1), (3, 1, 2, 1),  # 2 slots per worker, by-slot mapping
])
def test_mpirun_group_rank_is_the_node_index(rank, local_rank, local_size, group_rank):
    env = dict(OMPI, OMPI_COMM_WORLD_RANK=str(rank), OMPI_COMM_WORLD_LOCAL_RANK=str(local_rank),
               OMPI_COMM_WORLD_LOCAL_SIZE=str(local_size), OMPI_COMM_WORLD_SIZE="6")
    assert dist.env_ranks(env)[3] == group_rank


def test_mpirun_node_rank_is_not_the_node_index():
    """OMPI_COMM_WORLD_NODE_RANK numbers the processes on one node (mpirun -np 2 on one host sets 0 and 1): ignored."""
    env = dict(OMPI, OMPI_COMM_WORLD_RANK="1", OMPI_COMM_WORLD_LOCAL_RANK="1", OMPI_COMM_WORLD_NODE_RANK="1",
               OMPI_COMM_WORLD_SIZE="2", OMPI_COMM_WORLD_LOCAL_SIZE="2")
    assert dist.env_ranks(env) == (1, 1, 2, 0, True)


def test_mpirun_defaults_without_local_variables():
    env = {"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "3", "MASTER_ADDR": "h"}
    assert dist.env_ranks(env) == (2, 0, 3, 2, True)
    assert dist.env_ranks(dict(env, OMPI_COMM_WORLD_LOCAL_SIZE="0")) == (2, 0, 3, 2, True)  # max(1, ...)


def test_mpirun_needs_both_rank_and_size():
    assert dist.launched_by({"OMPI_COMM_WORLD_RANK": "0"}) == "none"
    assert dist.launched_by({"OMPI_COMM_WORLD_SIZE": "2"}) == "none"


@pytest.mark.parametrize("addr", [None, ""])
def test_mpirun_without_master_addr_says_so(addr):
    env = {k: v for k, v in OMPI.items() if k != "MASTER_ADDR"}
    if addr is not None:
        env["MASTER_ADDR"] = addr
    with pytest.raises(RuntimeError, match=r"launched by mpirun.*MASTER_ADDR is not set.*mpirun -x MASTER_ADDR="):
        dist.env_ranks(env)


def test_bad_integer_names_the_variable():
    with pytest.raises(RuntimeError, match="OMPI_COMM_WORLD_RANK must be an integer, got 'x'"):
        dist.env_ranks(dict(OMPI, OMPI_COMM_WORLD_RANK="x"))


def test_rank_line_names_the_launcher():
    line = dist.DistContext(rank=1, world_size=2, launcher="mpirun").rank_line()
    assert line.startswith("trainfleet-rank: rank=1 local_rank=0 world_size=2 group_rank=0 host=")
    assert line.endswith(" launcher=mpirun")
    assert dist.DistContext().rank_line().endswith(" launcher=none")
