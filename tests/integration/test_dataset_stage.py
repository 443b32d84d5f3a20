# -*- coding: utf-8 -*-
"""The dataset step (playbooks/dataset.yml, roles/dataset) against a real moto server.

Each run is `ansible-playbook -i inventories/aws playbooks/dataset.yml -e @vars.json` the way
users run it, on breast_cancer exported by `trainer.datasets` (scikit-learn's, offline):

- the first run uploads every file (changed), each object carrying the file's SHA-256;
- a second run changes nothing (recap changed=0, no PUT on the endpoint);
- a changed file is uploaded alone (the other objects keep their LastModified);
- check mode says what it would upload and uploads nothing;
- an object under the prefix that trainfleet did not upload and that differs is refused before any
  upload; delete (opt-in) removes only this dataset's own objects;
- the trainer trains on the staged s3:// prefix (accuracy read from its result line);
- the claim copy Job: rendered in check mode, its name a function of the content (same data, same
  name; a changed file, a new name); against an in-memory API holding that Job Succeeded, a run
  changes nothing, and holding it Failed, the run fails saying why.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import boto3
import pytest

from tests.integration.fake_kube_api import FakeKubeApi
from trainer.datasets import export

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
TIMEOUT = 300
# inventories/aws: the bucket of group_vars/all/s3.yml, the region of the contract (main.yml).
BUCKET = "trainfleet-123456789012-us-west-2"
PREFIX = "training/datasets/breast-cancer/"
RECAP_RE = re.compile(r"^localhost\s+:\s+ok=(?P<ok>\d+)\s+changed=(?P<changed>\d+)\s+unreachable=\d+\s+failed=(?P<failed>\d+)", re.M)
PUT_RE = re.compile(r'"PUT /%s/[^"]*" 200' % re.escape(BUCKET))
JOB_RE = re.compile(r"copy Job trainfleet/(dataset-breast-cancer-[0-9a-f]{10})")


class Stage(object):
    """One moto server, one bucket, one exported dataset; run() is one ansible-playbook."""

    def __init__(self, base, endpoint, log):
        self.base = base
        self.endpoint = endpoint
        self.log = log
        self.source = base / "breast_cancer"
        export("breast_cancer", str(self.source), "csv", 2)
        self.s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                               aws_access_key_id="testing", aws_secret_access_key="testing")
        self.s3.create_bucket(Bucket=BUCKET)
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("AWS_", "ANSIBLE_", "KUBECONFIG", "TRAINFLEET_"))}
        self.env.update(PATH=str(VENV_BIN) + os.pathsep + self.env.get("PATH", ""),
                        ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
                        AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
                        TRAINFLEET_CACHE=str(base / "cache"))
        self.count = 0

    def run(self, extra=None, check=False):
        self.count += 1
        merged = {"trainfleet_aws_endpoint_url": self.endpoint, "platform_aws_operator_manifests": "go_module",
                  "dataset_source": str(self.source), "dataset_name": "breast-cancer",
                  "trainfleet_kubeconfig": str(self.base / "no-kubeconfig")}
        merged.update(extra or {})
        vars_file = self.base / ("vars-%d.json" % self.count)
        vars_file.write_text(json.dumps(merged))
        puts_before = len(PUT_RE.findall(self.log.read_text(errors="replace")))
        argv = [str(VENV_BIN / "ansible-playbook"), "-i", "inventories/aws", "playbooks/dataset.yml",
                "-e", "@" + str(vars_file)] + (["--check"] if check else [])
        proc = subprocess.run(argv, cwd=str(ROOT), env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=TIMEOUT, check=False)
        time.sleep(0.2)
        puts = len(PUT_RE.findall(self.log.read_text(errors="replace"))) - puts_before
        recap = RECAP_RE.search(proc.stdout)
        return dict(rc=proc.returncode, out=proc.stdout, puts=puts,
                    changed=int(recap.group("changed")) if recap else None)

    def objects(self):
        found = {}
        for obj in self.s3.list_objects_v2(Bucket=BUCKET, Prefix=PREFIX).get("Contents", []):
            head = self.s3.head_object(Bucket=BUCKET, Key=obj["Key"])
            found[obj["Key"][len(PREFIX):]] = dict(modified=head["LastModified"], meta=head.get("Metadata", {}),
                                                   size=head["ContentLength"])
        return found


@pytest.fixture(scope="module")
def stage(tmp_path_factory):
    from tests.support.moto import MotoStartError, moto_server  # pylint: disable=import-outside-toplevel
    base = tmp_path_factory.mktemp("dataset")
    log = base / "moto-server.log"
    try:
        with moto_server(log) as url:
            yield Stage(base, url, log)
    except MotoStartError as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="module")
def first(stage):
    return stage.run()


def test_first_run_uploads_every_file_with_its_checksum(stage, first):
    assert first["rc"] == 0, first["out"][-4000:]
    assert first["changed"] >= 1
    assert "3 uploaded (new: dataset.json, part-000.csv, part-001.csv)" in first["out"], first["out"][-3000:]
    objects = stage.objects()
    assert sorted(objects) == ["dataset.json", "part-000.csv", "part-001.csv"]
    from hashlib import sha256  # pylint: disable=import-outside-toplevel
    for rel, obj in objects.items():
        assert obj["meta"]["trainfleet-sha256"] == sha256((stage.source / rel).read_bytes()).hexdigest()
        assert obj["meta"]["trainfleet-dataset"] == "breast-cancer"


def test_second_run_changes_nothing(stage, first):
    assert first["rc"] == 0
    before = stage.objects()
    again = stage.run()
    assert again["rc"] == 0, again["out"][-4000:]
    assert again["changed"] == 0, again["out"][-4000:]
    assert again["puts"] == 0
    assert "0 uploaded, 3 unchanged" in again["out"]
    assert stage.objects() == before


def test_check_mode_reports_and_uploads_nothing(stage, first):
    assert first["rc"] == 0
    part = stage.source / "part-000.csv"
    original = part.read_bytes()
    before = stage.objects()
    try:
        part.write_bytes(original + original.splitlines(True)[1])  # one more row
        check = stage.run(check=True)
        assert check["rc"] == 0, check["out"][-4000:]
        assert "check mode: s3://%s/%s" % (BUCKET, PREFIX) in check["out"]
        assert "1 would be uploaded (changed: part-000.csv), 2 unchanged" in check["out"], check["out"][-3000:]
        assert check["changed"] >= 1
        assert check["puts"] == 0
        assert stage.objects() == before
    finally:
        part.write_bytes(original)


def test_a_changed_file_is_uploaded_alone(stage, first):
    assert first["rc"] == 0
    part = stage.source / "part-001.csv"
    original = part.read_bytes()
    before = stage.objects()
    try:
        lines = part.read_text().splitlines()
        part.write_text("\n".join(lines + lines[1:3]) + "\n")
        time.sleep(1.1)  # LastModified has a resolution of a second
        run = stage.run()
        assert run["rc"] == 0, run["out"][-4000:]
        assert "1 uploaded (changed: part-001.csv), 2 unchanged" in run["out"], run["out"][-3000:]
        assert run["puts"] == 1
        after = stage.objects()
        assert after["part-001.csv"]["modified"] > before["part-001.csv"]["modified"]
        assert after["part-000.csv"] == before["part-000.csv"]
        assert after["dataset.json"] == before["dataset.json"]
    finally:
        part.write_bytes(original)
        restore = stage.run()
        assert restore["rc"] == 0 and "1 uploaded (changed: part-001.csv)" in restore["out"]


def test_someone_elses_object_is_never_overwritten(stage, first):
    assert first["rc"] == 0
    key = PREFIX + "part-000.csv"
    original = stage.s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
    stage.s3.put_object(Bucket=BUCKET, Key=key, Body=b"1,2,0\n")  # no trainfleet metadata
    stage.s3.put_object(Bucket=BUCKET, Key=PREFIX + "theirs/notes.csv", Body=b"9,9,1\n")
    try:
        refused = stage.run()
        assert refused["rc"] != 0
        assert "were not uploaded by trainfleet and differ from the source: %s" % key in refused["out"]
        assert "Nothing was uploaded" in refused["out"]
        assert refused["puts"] == 0
        assert stage.s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == b"1,2,0\n"
        # The same bytes without our metadata: left as they are, nothing to upload.
        stage.s3.put_object(Bucket=BUCKET, Key=key, Body=original)
        same = stage.run()
        assert same["rc"] == 0, same["out"][-3000:]
        assert same["puts"] == 0 and same["changed"] == 0
        assert "also holds 1 object(s) that are not in" in same["out"] and "theirs/notes.csv" in same["out"]
        # delete (opt-in) keeps what is not ours.
        kept = stage.run({"dataset_s3_delete": True})
        assert kept["rc"] == 0 and kept["changed"] == 0, kept["out"][-3000:]
        assert "theirs/notes.csv" in stage.objects()
    finally:
        stage.s3.delete_object(Bucket=BUCKET, Key=PREFIX + "theirs/notes.csv")
        stage.s3.delete_object(Bucket=BUCKET, Key=key)
        assert stage.run()["rc"] == 0


def test_delete_removes_only_this_datasets_objects(stage, first):
    assert first["rc"] == 0
    extra = stage.source / "part-002.csv"
    extra.write_text((stage.source / "part-001.csv").read_text())
    try:
        assert "1 uploaded (new: part-002.csv)" in stage.run()["out"]
    finally:
        extra.unlink()
    stage.s3.put_object(Bucket=BUCKET, Key=PREFIX + "foreign.csv", Body=b"1,0\n")
    try:
        kept = stage.run()
        assert kept["rc"] == 0 and kept["changed"] == 0
        assert "also holds 2 object(s)" in kept["out"]
        check = stage.run({"dataset_s3_delete": True}, check=True)
        assert "1 would be deleted" in check["out"], check["out"][-3000:]
        assert "part-002.csv" in stage.objects()
        gone = stage.run({"dataset_s3_delete": True})
        assert gone["rc"] == 0 and gone["changed"] >= 1, gone["out"][-3000:]
        assert sorted(stage.objects()) == ["dataset.json", "foreign.csv", "part-000.csv", "part-001.csv"]
    finally:
        stage.s3.delete_object(Bucket=BUCKET, Key=PREFIX + "foreign.csv")


def test_the_trainer_trains_on_the_staged_prefix(stage, first):
    assert first["rc"] == 0
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_REGION="us-east-1",
               PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", MPLBACKEND="Agg")
    out_dir = stage.base / "train-out"
    proc = subprocess.run([sys.executable, "-m", "trainer.train", "--dataset", "s3://%s/%s" % (BUCKET, PREFIX),
                           "--s3-endpoint-url", stage.endpoint, "--data-cache-dir", str(stage.base / "data-cache"),
                           "--epochs", "3", "--output-dir", str(out_dir)],
                          cwd=str(ROOT), env=env, capture_output=True, text=True, timeout=TIMEOUT, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "features=30 classes=2" in proc.stdout
    result = json.loads(proc.stdout.split("trainfleet-result: ", 1)[1].splitlines()[0])
    print("\nbreast_cancer from %s: accuracy %.3f after 3 epochs" % (result["dataset"], result["final_accuracy"]))
    assert result["final_accuracy"] >= 0.85


def _job_name(run):
    match = JOB_RE.search(run["out"])
    assert match, run["out"][-3000:]
    return match.group(1)


CLAIM = {"dataset_targets": ["s3", "claim"], "dataset_image": "localhost:5001/trainfleet/trainer:test"}


def test_claim_copy_job_is_named_after_the_content(stage, first):
    assert first["rc"] == 0
    one = stage.run(CLAIM, check=True)
    assert one["rc"] == 0, one["out"][-4000:]
    assert "was rendered and validated only" in one["out"]
    assert _job_name(stage.run(CLAIM, check=True)) == _job_name(one)
    part = stage.source / "part-000.csv"
    original = part.read_bytes()
    try:
        part.write_bytes(original + original.splitlines(True)[1])
        assert _job_name(stage.run(CLAIM, check=True)) != _job_name(one)
    finally:
        part.write_bytes(original)


def test_claim_copy_already_done_changes_nothing_and_a_failed_one_says_why(stage, first):
    assert first["rc"] == 0
    name = _job_name(stage.run(CLAIM, check=True))
    with FakeKubeApi() as api:
        kubeconfig = api.kubeconfig(stage.base / "kubeconfig-fake")
        labels = {"app.kubernetes.io/managed-by": "trainfleet"}
        api.store.add("Job", name, "trainfleet", labels=labels,
                      status={"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]})
        # The first real run writes the rendered manifest for review (the cache), the next one nothing.
        stage.run(dict(CLAIM, trainfleet_kubeconfig=str(kubeconfig)))
        done = stage.run(dict(CLAIM, trainfleet_kubeconfig=str(kubeconfig)))
        assert done["rc"] == 0, done["out"][-4000:]
        assert "this content was already copied (the Job Succeeded), nothing to do" in done["out"]
        assert done["changed"] == 0, done["out"][-4000:]
        assert (stage.base / "cache" / "manifests" / "dataset-breast-cancer.yaml").is_file()
        assert not [r for r in api.store.requests if r[0] in ("POST", "PUT", "PATCH", "DELETE")]
        api.store.add("Job", name, "trainfleet", labels=labels, status={"failed": 1, "conditions": [
            {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit"}]})
        failed = stage.run(dict(CLAIM, trainfleet_kubeconfig=str(kubeconfig)))
        assert failed["rc"] != 0
        assert "the copy of this content had Failed" in failed["out"]
        assert "did not succeed (Failed: BackoffLimitExceeded)" in failed["out"], failed["out"][-3000:]
        assert "dataset_claim_rerun=true runs the copy again" in failed["out"]
        assert not [r for r in api.store.requests if r[0] in ("POST", "PUT", "PATCH", "DELETE")]


def test_the_copy_script_pulls_the_prefix_and_the_trainer_reads_the_copy(stage, first):
    """files/claim_copy.py as the copy Job runs it (python3 -I, the manifest the role renders), with a
    local directory standing in for the claim: real downloads from the staged prefix, checked, then
    the trainer's dir: dataset on the copy; a second copy downloads nothing."""
    assert first["rc"] == 0
    from hashlib import sha256  # pylint: disable=import-outside-toplevel
    manifest = [{"path": p.name, "size": p.stat().st_size, "sha256": sha256(p.read_bytes()).hexdigest()}
                for p in sorted(stage.source.iterdir())]
    (stage.base / "manifest.json").write_text(json.dumps(manifest))
    claim = stage.base / "claim"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_REGION="us-east-1",
               AWS_ENDPOINT_URL=stage.endpoint, DATASET_NAME="breast-cancer", DATASET_BUCKET=BUCKET,
               DATASET_PREFIX=PREFIX, DATASET_TARGET=str(claim / "datasets" / "breast-cancer"),
               DATASET_MANIFEST=str(stage.base / "manifest.json"))
    script = [sys.executable, "-I", str(ROOT / "roles" / "dataset" / "files" / "claim_copy.py")]
    copy = subprocess.run(script, env=env, capture_output=True, text=True, timeout=TIMEOUT, check=False)
    assert copy.returncode == 0, copy.stdout + copy.stderr
    assert "3 files, 3 copied (326626 bytes), 0 unchanged, 0 removed" in copy.stdout, copy.stdout
    target = claim / "datasets" / "breast-cancer"
    for item in manifest:
        assert (target / item["path"]).read_bytes() == (stage.source / item["path"]).read_bytes()
    again = subprocess.run(script, env=env, capture_output=True, text=True, timeout=TIMEOUT, check=False)
    assert again.returncode == 0 and "0 copied (0 bytes), 3 unchanged" in again.stdout, again.stdout
    train_env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    train_env.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", MPLBACKEND="Agg")
    proc = subprocess.run([sys.executable, "-m", "trainer.train", "--dataset", "dir:%s" % target, "--epochs", "3",
                           "--output-dir", str(stage.base / "train-claim-out")],
                          cwd=str(ROOT), env=train_env, capture_output=True, text=True, timeout=TIMEOUT, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(proc.stdout.split("trainfleet-result: ", 1)[1].splitlines()[0])
    print("\nbreast_cancer from the copy (dir:%s): accuracy %.3f after 3 epochs" % (target, result["final_accuracy"]))
    assert result["final_accuracy"] >= 0.85
