# -*- coding: utf-8 -*-
"""trainjob_logs (pytorchjob_logs redirects here): rank-0 detection, bounded streaming, files, check mode, errors."""

from __future__ import annotations

import os

import pytest

from ansible_collections.trainfleet.training.plugins.module_utils.jobkinds import PYTORCHJOB
from ansible_collections.trainfleet.training.plugins.modules import trainjob_logs as module


@pytest.fixture
def elastic(fake_service, load, load_log):
    """A job where torchrun made worker-1 rank 0 (master-0 got ranks 2-3)."""
    def make(**kwargs):
        return fake_service(
            jobs={"mnist": load("jobs", "succeeded")},
            pods=[load("pods", "running_worker1"), load("pods", "running_master"), load("pods", "running_worker0")],
            logs={("mnist-master-0", False): load_log("elastic_master0"),
                  ("mnist-worker-0", False): load_log("elastic_worker0"),
                  ("mnist-worker-1", False): load_log("elastic_worker1")},
            **kwargs)
    return make


def test_rank0_is_found_from_the_trainer_log(run_module, elastic):
    service = elastic()
    failed, result = run_module(module, {"name": "mnist", "namespace": "training"}, service)
    assert not failed
    assert result["changed"] is False
    assert result["pod"] == "mnist-worker-1"
    assert result["replica_type"] == "worker" and result["replica_index"] == 1
    assert result["method"] == "trainer-log"
    assert result["rank"] == 0 and result["ranks"] == [0, 1] and result["group_rank"] == 0
    assert result["container"] == "pytorch"
    assert result["log_lines"][-1].startswith("trainfleet-result:")
    assert result["trainer_result"]["final_accuracy"] == 0.95
    assert result["truncated"] is False
    assert result["bytes"] == len(result["log"].encode()) == result["returned_bytes"]
    assert result["path"] is None
    assert [s["pod"] for s in result["scanned"]] == ["mnist-master-0", "mnist-worker-0", "mnist-worker-1"]
    assert [s["ranks"] for s in result["scanned"]] == [[2, 3], [4, 5], [0, 1]]
    # the scan reads only the head of each log
    scans = [c for c in service.calls if c[0] == "iter_log" and c[6] == 1048576]
    assert len(scans) == 3


def test_rank0_by_torchrun_log(run_module, fake_service, load, load_log):
    service = fake_service(jobs={"mnist": load("jobs", "running")},
                           pods=[load("pods", "running_master"), load("pods", "running_worker0")],
                           logs={("mnist-master-0", False): load_log("torchrun_only_group1"),
                                 ("mnist-worker-0", False): load_log("torchrun_only_group0")})
    failed, result = run_module(module, {"name": "mnist"}, service)
    assert not failed
    assert (result["pod"], result["method"], result["ranks"]) == ("mnist-worker-0", "torchrun-log", [0])


def test_fallback_master0_when_logs_say_nothing(run_module, fake_service, load, load_log):
    service = fake_service(jobs={"mnist": load("jobs", "running")},
                           pods=[load("pods", "running_worker0"), load("pods", "running_master")],
                           logs={("mnist-master-0", False): load_log("plain"),
                                 ("mnist-worker-0", False): load_log("plain")})
    failed, result = run_module(module, {"name": "mnist"}, service)
    assert not failed
    assert (result["pod"], result["method"], result["ranks"]) == ("mnist-master-0", "fallback-master-0", [])


ROTATED_RANK0 = b"".join(b"step %06d loss=0.1\n" % i for i in range(50)) + (
    b"trainfleet-epoch: epoch=9 loss=0.1 test_acc=0.97 samples_per_s=100.0\n"
    b'trainfleet-result: {"final_accuracy": 0.97, "epochs": 9}\n')
ROTATED_OTHER = b"".join(b"[rank 1] step %06d loss=0.1\n" % i for i in range(60))


def test_rank0_by_its_output_when_rotation_cut_the_heads(run_module, fake_service, load):
    """Long logs on a node with the default 10Mi rotation: no rank line left, only rank 0's epoch lines."""
    service = fake_service(jobs={"mnist": load("jobs", "succeeded")},
                           pods=[load("pods", "running_master"), load("pods", "running_worker0")],
                           logs={("mnist-master-0", False): ROTATED_OTHER,
                                 ("mnist-worker-0", False): ROTATED_RANK0})
    # rank-0 lines far beyond the 256-byte head scan; the 20-line tail (504 bytes) is longer than that
    service.logs[("mnist-worker-0", False)] = b"x" * 5000 + b"\n" + ROTATED_RANK0
    failed, result = run_module(module, {"name": "mnist", "rank_scan_bytes": 256, "rank_scan_tail_lines": 20}, service)
    assert not failed
    assert (result["pod"], result["method"], result["ranks"]) == ("mnist-worker-0", "trainer-rank0-output", [0])
    assert [(s["pod"], s["part"], s["source"]) for s in result["scanned"]] == [
        ("mnist-master-0", "tail", None), ("mnist-worker-0", "tail", "trainer-rank0-output")]
    tails = [c for c in service.calls if c[0] == "iter_log" and c[3] == 20]
    assert [(c[1], c[6]) for c in tails] == [("mnist-master-0", None), ("mnist-worker-0", None)]  # tails not cut
    assert result["trainer_result"]["final_accuracy"] == 0.97


def test_no_tail_read_when_the_head_tells_or_tail_lines_is_zero(run_module, elastic, fake_service, load, load_log):
    service = elastic()
    failed, result = run_module(module, {"name": "mnist"}, service)
    assert not failed and {s["part"] for s in result["scanned"]} == {"head"}
    assert len([c for c in service.calls if c[0] == "iter_log"]) == 4  # 3 head scans + the rank-0 log
    service = fake_service(jobs={"mnist": load("jobs", "running")}, pods=[load("pods", "running_master")],
                           logs={("mnist-master-0", False): load_log("plain")})
    failed, result = run_module(module, {"name": "mnist", "rank_scan_tail_lines": 0, "rank_scan_bytes": 16}, service)
    assert not failed and result["method"] == "fallback-master-0" and result["scanned"][0]["part"] == "head"
    assert len([c for c in service.calls if c[0] == "iter_log"]) == 2


def test_no_tail_read_when_the_head_was_the_whole_log(run_module, fake_service, load, load_log):
    """A log shorter than rank_scan_bytes that says nothing: its tail is the same text, not read again."""
    service = fake_service(jobs={"mnist": load("jobs", "running")}, pods=[load("pods", "running_master")],
                           logs={("mnist-master-0", False): load_log("plain")})
    assert len(load_log("plain")) < 1048576
    failed, result = run_module(module, {"name": "mnist"}, service)
    assert not failed and result["method"] == "fallback-master-0" and result["scanned"][0]["part"] == "head"
    assert len([c for c in service.calls if c[0] == "iter_log"]) == 2  # the head scan + the rank-0 log


def test_unreadable_pod_does_not_stop_the_scan(run_module, fake_service, load, load_log):
    service = fake_service(jobs={"mnist": load("jobs", "created")},
                           pods=[load("pods", "running_master"), load("pods", "imagepullbackoff")],
                           logs={("mnist-master-0", False): load_log("torchrun_only_group0")})
    failed, result = run_module(module, {"name": "mnist"}, service)
    assert not failed
    assert result["pod"] == "mnist-master-0"
    assert "waiting to start" in result["scanned"][1]["error"]


def test_max_bytes_keeps_the_end(run_module, elastic):
    failed, result = run_module(module, {"name": "mnist", "max_bytes": 300}, elastic())
    assert not failed
    assert result["truncated"] is True
    assert result["returned_bytes"] <= 300
    assert result["bytes"] > 300
    assert result["log_lines"][-1].startswith("trainfleet-result:")
    assert result["trainer_result"]["epochs"] == 2


def test_max_bytes_zero_returns_no_text(run_module, elastic, tmp_path):
    dest = tmp_path / "rank0.log"
    failed, result = run_module(module, {"name": "mnist", "max_bytes": 0, "dest": str(dest)}, elastic())
    assert not failed
    assert result["log"] == "" and result["log_lines"] == []
    assert dest.read_bytes().endswith(b'"duration_s": 280.1}\n')
    assert result["bytes"] == dest.stat().st_size


def test_tail_lines_since_previous_are_passed(run_module, elastic, load_log):
    service = elastic()
    service.logs[("mnist-worker-1", True)] = load_log("elastic_worker1")
    service.logs[("mnist-master-0", True)] = load_log("elastic_master0")
    service.logs[("mnist-worker-0", True)] = load_log("elastic_worker0")
    failed, result = run_module(module, {"name": "mnist", "tail_lines": 2, "since_seconds": 600,
                                         "previous": True, "container": "pytorch"}, service)
    assert not failed
    assert len(result["log_lines"]) == 2
    final = [c for c in service.calls if c[0] == "iter_log"][-1]
    assert final == ("iter_log", "mnist-worker-1", "pytorch", 2, 600, True, None)


def test_dest_written_then_unchanged(run_module, elastic, tmp_path):
    dest = tmp_path / "rank0.log"
    failed, result = run_module(module, {"name": "mnist", "dest": str(dest)}, elastic())
    assert not failed and result["changed"] is True and result["path"] == str(dest)
    assert dest.read_text() == result["log"]
    failed, again = run_module(module, {"name": "mnist", "dest": str(dest)}, elastic())
    assert not failed and again["changed"] is False
    assert [p for p in os.listdir(str(tmp_path)) if p.startswith(".trainjob_logs.")] == []


def test_dest_check_mode_writes_nothing_but_says_it_would(run_module, elastic, tmp_path):
    dest = tmp_path / "rank0.log"
    failed, result = run_module(module, {"name": "mnist", "dest": str(dest)}, elastic(), check_mode=True)
    assert not failed
    assert result["changed"] is True
    assert not dest.exists()
    assert os.listdir(str(tmp_path)) == []
    assert result["log_lines"][-1].startswith("trainfleet-result:")


def test_all_ranks_writes_one_file_per_pod(run_module, elastic, tmp_path):
    out = tmp_path / "logs"
    failed, result = run_module(module, {"name": "mnist", "all_ranks": True, "dest_dir": str(out)}, elastic())
    assert not failed
    assert result["changed"] is True
    expected = ["master-0-ranks2-3.log", "worker-0-ranks4-5.log", "worker-1-ranks0-1.log"]
    assert sorted(os.listdir(str(out))) == expected
    assert "log" not in result
    assert result["pod"] == "mnist-worker-1"
    files = dict((f["pod"], f) for f in result["files"])
    assert files["mnist-worker-1"]["bytes"] == (out / "worker-1-ranks0-1.log").stat().st_size
    failed, again = run_module(module, {"name": "mnist", "all_ranks": True, "dest_dir": str(out)}, elastic())
    assert again["changed"] is False


def test_all_ranks_check_mode(run_module, elastic, tmp_path):
    out = tmp_path / "logs"
    failed, result = run_module(module, {"name": "mnist", "all_ranks": True, "dest_dir": str(out)}, elastic(),
                                check_mode=True)
    assert not failed and result["changed"] is True
    assert not out.exists()


def test_all_ranks_records_unreadable_pods(run_module, fake_service, load, load_log, tmp_path):
    service = fake_service(jobs={"mnist": load("jobs", "created")},
                           pods=[load("pods", "running_master"), load("pods", "imagepullbackoff")],
                           logs={("mnist-master-0", False): load_log("plain")})
    failed, result = run_module(module, {"name": "mnist", "all_ranks": True, "dest_dir": str(tmp_path)}, service)
    assert not failed
    assert result["files"][1]["error"].startswith("Cannot read the log")
    assert sorted(os.listdir(str(tmp_path))) == ["master-0-rank-unknown.log"]


def test_streams_large_log_with_bounded_memory(run_module, fake_service, load, load_log):
    big = load_log("elastic_worker1") + b"".join(b"step %08d loss=0.1\n" % i for i in range(200000))
    service = fake_service(jobs={"mnist": load("jobs", "running")}, pods=[load("pods", "running_worker1")],
                           logs={("mnist-worker-1", False): big})
    service.chunk_size = 65536
    failed, result = run_module(module, {"name": "mnist", "max_bytes": 4096}, service)
    assert not failed
    assert result["bytes"] == len(big)
    assert result["returned_bytes"] <= 4096
    assert result["log_lines"][-1] == "step 00199999 loss=0.1"


def test_no_pods(run_module, fake_service, load):
    failed, result = run_module(module, {"name": "mnist"}, fake_service(jobs={"mnist": load("jobs", "succeeded")}))
    assert failed
    assert "has no pods" in result["msg"]


def test_missing_job_and_crd(run_module, fake_service):
    failed, result = run_module(module, {"name": "mnist", "namespace": "training"}, fake_service())
    assert failed and result["msg"] == "PyTorchJob training/mnist not found."
    failed, result = run_module(module, {"name": "mnist"}, fake_service(crd=False))
    assert failed and "CRD" in result["msg"]


def test_rank0_log_unreadable_fails(run_module, fake_service, load):
    service = fake_service(jobs={"mnist": load("jobs", "created")}, pods=[load("pods", "imagepullbackoff")])
    failed, result = run_module(module, {"name": "mnist"}, service)
    assert failed
    assert "waiting to start" in result["msg"]


@pytest.mark.parametrize("args,message", [
    ({}, "missing required arguments: name"),
    ({"name": "a", "all_ranks": True}, "all_ranks is True but all of the following are missing: dest_dir"),
    ({"name": "a", "all_ranks": True, "dest_dir": "/tmp", "dest": "/tmp/x"}, "mutually exclusive"),
    ({"name": "a", "max_bytes": -1}, "max_bytes must be 0 or more"),
    ({"name": "a", "rank_scan_tail_lines": -1}, "rank_scan_tail_lines must be 0 or more"),
    ({"name": "a", "tail_lines": -5}, "tail_lines must be 0 or more"),
    ({"name": "a", "rank_scan_bytes": 0}, "rank_scan_bytes must be more than 0"),
    ({"name": "a", "dest": "/tmp/logs/../../etc/x.log"}, "dest must be a path without '..' components"),
    ({"name": "a", "all_ranks": True, "dest_dir": "/tmp/../x"}, "dest_dir must be a path without '..' components"),
    ({"name": "a", "dest": "/tmp/x.log\n"}, 'got "/tmp/x.log\\n"'),
    ({"name": "a", "match": "^x", "all_ranks": True, "dest_dir": "/tmp"}, "mutually exclusive"),
    ({"name": "a", "match": "^x", "dest": "/tmp/x.log"}, "mutually exclusive"),
    ({"name": "a", "match": "(unclosed"}, "match is not a valid regular expression"),
    ({"name": "a", "match": "x", "match_limit": -1}, "match_limit must be 0 or more"),
])
def test_argument_errors(run_module, fake_service, args, message):
    failed, result = run_module(module, args, fake_service())
    assert failed
    assert message in result["msg"]


def test_dest_is_a_directory(run_module, fake_service, tmp_path):
    failed, result = run_module(module, {"name": "a", "dest": str(tmp_path)}, fake_service())
    assert failed and "is a directory" in result["msg"]


def test_container_defaults(load):
    pod = load("pods", "running_master")
    assert PYTORCHJOB.container_for(pod, None) == "pytorch"
    assert PYTORCHJOB.container_for(pod, "sidecar") == "sidecar"
    pod["spec"]["containers"] = [{"name": "trainer"}, {"name": "sidecar"}]
    assert PYTORCHJOB.container_for(pod, None) == "trainer"


# --------------------------------------------------------------------------- match mode


def test_match_returns_every_pods_lines_with_their_times(run_module, elastic):
    """No rank-0 search: the lines the regex finds in each pod's log, timed by the kubelet."""
    service = elastic()
    failed, result = run_module(module, {"name": "mnist", "match": "trainfleet-(epoch|result):"}, service)
    assert not failed and result["changed"] is False
    assert "pod" not in result and "log" not in result and "scanned" not in result
    lines = [(m["pod"], m["line"].split(" ")[0]) for m in result["matches"]]
    # the fake kubelet stamps line i (0-based) of a log at second i: worker-1's lines 14-16 come
    # before master-0's line 17 although the pods are read master first
    assert lines == [
        ("mnist-worker-1", "trainfleet-epoch:"), ("mnist-worker-1", "trainfleet-epoch:"),
        ("mnist-worker-1", "trainfleet-result:"), ("mnist-master-0", "[default0]:[rank")]
    first = result["matches"][0]
    assert first["time"] == "2025-01-01T10:00:14.000000Z" and first["epoch_s"] == 1735725614.0
    assert (first["replica_type"], first["replica_index"]) == ("worker", 1)
    assert [m["epoch_s"] for m in result["matches"]] == sorted(m["epoch_s"] for m in result["matches"])
    assert [p["name"] for p in result["pods"]] == ["mnist-master-0", "mnist-worker-0", "mnist-worker-1"]
    assert all(p["error"] is None for p in result["pods"])
    reads = [c for c in service.calls if c[0] == "iter_log"]
    assert len(reads) == 3 and all(c[-1] is True for c in reads)  # one read per pod, with timestamps


def test_match_limit_keeps_the_last_lines_of_each_pod(run_module, elastic):
    failed, result = run_module(module, {"name": "mnist", "match": "^trainfleet-epoch:", "match_limit": 1}, elastic())
    assert not failed
    assert [(m["pod"], m["line"]) for m in result["matches"]] == [
        ("mnist-worker-1", "trainfleet-epoch: epoch=2 loss=0.21 test_acc=0.95 samples_per_s=121.0")]


def test_match_without_pods_or_with_an_unreadable_pod_is_no_error(run_module, fake_service, load, load_log):
    """While the operator replaces a pod a poll must go on: no pods, or a pod not started, is no failure."""
    failed, result = run_module(module, {"name": "mnist", "match": "x"},
                                fake_service(jobs={"mnist": load("jobs", "running")}))
    assert not failed and result["matches"] == [] and result["pods"] == []
    service = fake_service(jobs={"mnist": load("jobs", "created")},
                           pods=[load("pods", "running_master"), load("pods", "imagepullbackoff")],
                           logs={("mnist-master-0", False): load_log("elastic_worker1")})
    failed, result = run_module(module, {"name": "mnist", "match": "^trainfleet-result:", "tail_lines": 3}, service)
    assert not failed
    assert [m["pod"] for m in result["matches"]] == ["mnist-master-0"]
    assert result["pods"][0]["error"] is None and "waiting to start" in result["pods"][1]["error"]
    assert [c[3] for c in service.calls if c[0] == "iter_log"] == [3, 3]  # tail_lines applies to each pod


def test_match_still_needs_the_job(run_module, fake_service):
    failed, result = run_module(module, {"name": "mnist", "namespace": "training", "match": "x"}, fake_service())
    assert failed and result["msg"] == "PyTorchJob training/mnist not found."
