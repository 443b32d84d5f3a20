# -*- coding: utf-8 -*-
"""The trainer's log-line contract, both ways: the lines trainer.metrics and trainer.dist's DistContext
really print are fed to the Ansible side's parsers (trainerlog, ranks). A change of format on either
side fails here, not on a cluster."""

from __future__ import annotations

import json

import pytest

from ansible_collections.trainfleet.training.plugins.module_utils import jobkinds as kinds
from ansible_collections.trainfleet.training.plugins.module_utils import jobstatus as status
from ansible_collections.trainfleet.training.plugins.module_utils import ranks as rk
from ansible_collections.trainfleet.training.plugins.module_utils import trainerlog as tlog

trainer = pytest.importorskip("trainer")
dist = pytest.importorskip("trainer.dist")  # imports torch
metrics = pytest.importorskip("trainer.metrics")

RESULT = {"final_accuracy": 0.9611, "final_loss": 0.1234, "final_test_loss": 0.2, "epochs": 3, "world_size": 4,
          "model_uri": "s3://b/p/model.pt", "metrics_uri": "s3://b/p/metrics.jsonl", "plot_uri": "s3://b/p/plot.png",
          "duration_s": 12.5, "resumed_from_epoch": 1, "restarts": 0, "dataset": "digits", "samples_per_s": 900.0}


def _records():
    return [{"epoch": e, "loss": 1.0 / e, "test_loss": 1.1 / e, "test_acc": 0.8 + e / 100.0, "samples_per_s": 800.0 + e}
            for e in (2, 3)]


def _pod(name, rtype, index):
    return {"metadata": {"name": name, "namespace": "t", "labels": {
        kinds.KUBEFLOW_JOB_NAME: "j", kinds.KUBEFLOW_REPLICA_TYPE: rtype, kinds.KUBEFLOW_REPLICA_INDEX: str(index)}},
        "spec": {"nodeName": "n"}, "status": {"phase": "Succeeded", "containerStatuses": [
            {"name": "pytorch", "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}}


def _logs(tee=""):
    """What the two pods of an elastic job print: 2 processes each, and the c10d rendezvous put
    global rank 0 on worker-1 (join order, not pod names)."""
    worker0 = [dist.DistContext(rank=r, local_rank=r - 2, world_size=4, group_rank=1).rank_line() for r in (2, 3)]
    worker1 = [dist.DistContext(rank=r, local_rank=r, world_size=4, group_rank=0).rank_line() for r in (0, 1)]
    worker1 += [metrics.resume_line(1, "s3://b/p/snapshots/snapshot-epoch-00001.pt", 0)]
    for record in _records():
        worker1 += [metrics.epoch_line(record), metrics.snapshot_line(record["epoch"], "s3://b/p/s.pt")]
    worker1 += [metrics.result_line(RESULT)]
    return {"j-worker-0": [tee + line for line in worker0], "j-worker-1": [tee + line for line in worker1]}


@pytest.mark.parametrize("tee", ["", "[default0]:"])
def test_rank0_result_and_every_line_kind_parse_from_the_trainers_own_output(tee):
    logs = _logs(tee)
    summaries = [status.pod_summary(_pod("j-worker-0", "worker", 0)), status.pod_summary(_pod("j-worker-1", "worker", 1))]
    infos = dict((name, rk.parse_rank_lines(lines)) for name, lines in logs.items())

    decision = rk.find_rank0(summaries, infos)
    assert decision["pod"]["name"] == "j-worker-1" and decision["method"] == rk.METHOD_TRAINER
    assert infos["j-worker-1"]["trainer"]["ranks"] == [0, 1] and infos["j-worker-0"]["trainer"]["ranks"] == [2, 3]
    assert infos["j-worker-1"]["trainer"]["world_size"] == 4 and infos["j-worker-1"]["trainer"]["group_rank"] == 0

    result = tlog.parse_trainer_result(logs["j-worker-1"])
    assert result == RESULT

    kinds_seen = [tlog.parse_trainer_line(line)["kind"] for line in logs["j-worker-1"]]
    assert kinds_seen == ["rank", "rank", "resume", "epoch", "snapshot", "epoch", "snapshot", "result"]
    epochs = [tlog.parse_trainer_line(line) for line in logs["j-worker-1"] if "trainfleet-epoch:" in line]
    for parsed, record in zip(epochs, _records()):
        assert parsed["epoch"] == record["epoch"]
        assert parsed["loss"] == pytest.approx(record["loss"], abs=1e-6)
        assert parsed["test_acc"] == pytest.approx(record["test_acc"], abs=1e-6)
        assert parsed["samples_per_s"] == pytest.approx(record["samples_per_s"], abs=0.05)


def test_mpirun_rank_lines_parse_old_and_new():
    """Under mpirun (an MPIJob) the rank line ends with launcher=mpirun; the MPIJob's launcher pod shows every
    rank's output, so its log holds all ranks. Lines of trainers from before launcher= still parse."""
    env = {"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "0",
           "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "MASTER_ADDR": "j-worker-0.j.t.svc"}
    assert dist.launched_by(env) == "mpirun"
    lines = []
    for r in range(4):
        rank, local_rank, world, group, launched = dist.env_ranks(
            dict(env, OMPI_COMM_WORLD_RANK=str(r), OMPI_COMM_WORLD_LOCAL_RANK=str(r % 2)))
        assert launched
        lines.append(dist.DistContext(rank=rank, local_rank=local_rank, world_size=world, group_rank=group,
                                      launcher="mpirun").rank_line())
    parsed = [tlog.parse_trainer_line(line) for line in lines]
    assert [(p["rank"], p["group_rank"], p["world_size"], p["launcher"]) for p in parsed] == [
        (0, 0, 4, "mpirun"), (1, 0, 4, "mpirun"), (2, 1, 4, "mpirun"), (3, 1, 4, "mpirun")]
    info = rk.parse_rank_lines(lines[2:])
    assert info["trainer"]["ranks"] == [2, 3] and info["trainer"]["group_rank"] == 1 and info["trainer"]["world_size"] == 4
    # the launcher's log: every rank, in whatever order mpirun forwarded them
    launcher_log = [lines[3], lines[0], lines[2], lines[1]]
    info = rk.parse_rank_lines(launcher_log)
    assert info["trainer"]["ranks"] == [0, 1, 2, 3] and info["trainer"]["group_rank"] == 0
    launcher = dict(status.pod_summary(_pod("j-launcher", "launcher", 0)))
    decision = rk.find_rank0([launcher], {"j-launcher": info})
    assert decision["pod"]["name"] == "j-launcher" and decision["method"] == rk.METHOD_TRAINER
    old = metrics.rank_line(1, 0, 2, 1, "j-worker-1")
    assert "launcher=" not in old and tlog.parse_trainer_line(old)["launcher"] is None
    assert rk.parse_rank_lines([old])["trainer"]["ranks"] == [1]
    # the host= field keeps its value when launcher= follows
    assert [m.group("host") for m in tlog.TRAINER_RANK_RE.finditer(lines[0])] == [lines[0].split("host=")[1].split()[0]]


def test_rank0_only_lines_tell_rank0_when_the_head_of_the_log_is_gone():
    """A rotated log keeps only its end: the epoch/result/resume/stopped lines only rank 0 prints decide."""
    tail = [metrics.epoch_line(_records()[-1]), metrics.stopped_line(3, "--stop-after-epoch"), metrics.result_line(RESULT)]
    for line in tail:
        assert tlog.RANK0_OUTPUT_RE.match(line), line
    info = rk.parse_rank_lines(tail)
    assert info["rank0_output"] and not info["trainer"]
    assert rk.pod_ranks(info) == ([0], None, rk.METHOD_OUTPUT)


COMPILE = {"device": "xla:CPU", "precompile": True, "cache_set": "bert-large", "graphs_compiled": 13, "compile_s": 9.47,
           "cache_hits": 1, "cache_misses": 13}


def test_every_prefix_the_trainer_prints_is_read():
    """Each prefix of trainer/__init__.py that carries data has a parser on this side."""
    samples = {
        trainer.RANK_PREFIX: dist.DistContext(rank=0, world_size=1).rank_line(),
        trainer.EPOCH_PREFIX: metrics.epoch_line(_records()[0]),
        trainer.RESULT_PREFIX: metrics.result_line(RESULT),
        trainer.RESUME_PREFIX: metrics.resume_line(4, "s3://b/s.pt", 1),
        trainer.INFO_PREFIX: metrics.snapshot_line(4, "s3://b/s.pt"),
        trainer.WARNING_PREFIX: metrics.snapshot_failed_line(4, OSError("refused")),
        trainer.STALL_PREFIX: metrics.stall_line(0, 12.34, {"epoch": 2, "step": 35}, "not responding: rank 1\n(x)"),
        trainer.COMPILE_PREFIX: metrics.compile_line(COMPILE),
    }
    for prefix, line in samples.items():
        assert line.startswith(prefix)
        assert tlog.parse_trainer_line(line)["kind"] is not None, line
    retry = metrics.storage_retry_line("read", "s3://b/x", 2, 4, 0.5, ConnectionResetError("reset"))
    assert tlog.parse_trainer_line(retry) == {"kind": "storage_retry", "op": "read", "uri": "s3://b/x", "attempt": 2, "attempts": 4}
    assert json.loads(samples[trainer.RESULT_PREFIX].split(" ", 1)[1]) == RESULT
    assert tlog.parse_trainer_line(samples[trainer.COMPILE_PREFIX]) == dict(COMPILE, kind="compile")
    assert metrics.parse_compile_line(samples[trainer.COMPILE_PREFIX]) == COMPILE
    assert tlog.RANK0_OUTPUT_RE.match(samples[trainer.COMPILE_PREFIX])
    assert tlog.parse_trainer_line(trainer.COMPILE_PREFIX + " {broken") == {"kind": None}
    assert tlog.parse_trainer_line(samples[trainer.STALL_PREFIX]) == {
        "kind": "stall", "rank": 0, "idle_s": 12.3, "epoch": 2, "step": 35, "why": "not responding: rank 1 (x)"}


def test_the_evaluate_line_parses_from_the_trainers_own_output():
    """python -m trainer.evaluate's line, read back by the evaluate step (module_utils/evaluation.py)."""
    report = {"accuracy": 0.9611111, "reported_accuracy": 0.9611111, "difference": 0.0, "agrees": True, "loss": 0.12,
              "model": "s3://b/p/run/model.pt", "world_size": 2}
    line = metrics.evaluate_line(report)
    assert line.startswith(trainer.EVALUATE_PREFIX)
    assert tlog.parse_evaluate_line(line) == report == metrics.parse_evaluate_line(line)
    assert tlog.parse_evaluate_line(metrics.result_line(RESULT)) is None
    assert tlog.parse_evaluate_line(trainer.EVALUATE_PREFIX + " [1, 2]") is None
    assert tlog.parse_evaluate_line(trainer.EVALUATE_PREFIX + " {broken") is None


def test_the_error_line_parses_from_the_trainers_own_output():
    """What the trainer (and trainer.evaluate) print before exiting 1 or 2, read back by the evaluate step."""
    line = metrics.error_line("--model: no model.pt at s3://b/p/run\n(a user's own script writes none)")
    assert line.startswith(trainer.ERROR_PREFIX)
    assert tlog.parse_error_line(line) == "--model: no model.pt at s3://b/p/run (a user's own script writes none)"
    assert tlog.parse_error_line("  " + line + "  ") == tlog.parse_error_line(line)
    assert tlog.parse_error_line(metrics.result_line(RESULT)) is None and tlog.parse_error_line(None) is None
