# -*- coding: utf-8 -*-
"""site.yml --check on inventories/aws (CPU example) against a local AWS endpoint (moto).

One playbook run for the whole module. It must end rc 0 with no failed task, create nothing
on the endpoint (no IAM role or policy, bucket, ECR repository, EKS cluster, nothing tagged
project=trainfleet) and nothing on disk, and every step must either say what it would do or,
for the steps that need the cluster check mode never creates, say why it was skipped.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import boto3
import pytest

from tests.support.docker import empty_image, has_image


ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
# The CPU example pins us-east-1; the inventory's default region is us-west-2. Both are checked.
REGIONS = ("us-east-1", "us-west-2")
MOTO_ACCOUNT = "123456789012"
PLAYBOOK_TIMEOUT = 600
# The trainer_image step builds FROM this image and never pulls it (it comes from the local stack).
BASE_IMAGE = "trainfleet/debian-base:trixie"
STAND_IN_BASE_IMAGE = "trainfleet-integration/empty-base:check-mode"

RECAP_RE = re.compile(
    r"^localhost\s+:\s+ok=(?P<ok>\d+)\s+changed=(?P<changed>\d+)\s+unreachable=(?P<unreachable>\d+)\s+"
    r"failed=(?P<failed>\d+)\s+skipped=(?P<skipped>\d+)\s+rescued=(?P<rescued>\d+)\s+ignored=(?P<ignored>\d+)",
    re.M,
)
PLAY_RE = re.compile(r"^PLAY \[(?P<name>.*)\] \*+$", re.M)

# Play name of each step (playbooks/<step>.yml) and what its output must say in check mode:
# the plan of a step that can run, or the reason for a step that needs a live cluster.
STEPS = {
    "iam": ("Step iam: least-privilege roles and policies", [
        "TASK [trainfleet.training.iam : Create the training role (trusted by pod_identity)]",
        "TASK [trainfleet.training.iam : Create the node role (EC2 trust, ECR pull, EKS worker policies)]",
    ]),
    "s3": ("Step s3: the data, checkpoint and model bucket", [
        "check mode: bucket trainfleet-123456789012-us-west-2 (us-east-1) does not exist and would be created",
    ]),
    "registry": ("Registry", [
        "check mode: ECR repository %s.dkr.ecr.us-east-1.amazonaws.com/trainfleet/trainer would be created"
        % MOTO_ACCOUNT,
    ]),
    "cluster": ("Cluster", [
        "check mode: eksctl 0.210.0 would be installed",
        "EKS trainfleet (us-east-1): does not exist yet; actions: create_cluster",
    ]),
    "nodegroups": ("Node groups", [
        "node groups of trainfleet: cpu; actions: create_nodegroups",
    ]),
    "device_plugins": ("Device plugins", [
        "(cluster not created yet: check mode, nothing to compare)",
    ]),
    "training_operator": ("Training operator", [
        "check mode: skipped applying the 13 rendered resources and waiting for the controller",
        "does not exist because the cluster step only planned the cluster",
    ]),
    "storage": ("Shared storage", [
        "check mode: skipped the fsx StorageClass, volume and claim trainfleet/trainfleet-data",
        "does not exist because the cluster step only planned the cluster",
    ]),
    "trainer_image": ("Trainer image", [
        "trainer image %s.dkr.ecr.us-east-1.amazonaws.com/trainfleet/trainer:" % MOTO_ACCOUNT,
        "would be pushed to ECR after the build",
    ]),
    "train": ("Train", [
        "does not exist yet, so the job was rendered and validated only (no cluster lookups)",
    ]),
}


@pytest.fixture(scope="module")
def base_image(tmp_path_factory):
    """The trainer's base image; an empty stand-in where the local stack has not built it yet."""
    if has_image(BASE_IMAGE):
        yield BASE_IMAGE
        return
    with empty_image(STAND_IN_BASE_IMAGE, tmp_path_factory.mktemp("base")) as image:
        yield image


@pytest.fixture(scope="module")
def check_run(moto_endpoint, base_image, tmp_path_factory):
    """ansible-playbook -i inventories/aws site.yml --check -e @examples/aws/cpu.yml, once."""
    cache = tmp_path_factory.mktemp("cache") / "trainfleet"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AWS_", "ANSIBLE_", "KUBECONFIG", "TRAINFLEET_"))}
    env.update(
        PATH=str(VENV_BIN) + os.pathsep + env.get("PATH", ""),
        ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_CALLBACK_RESULT_FORMAT="json",
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        # A cache of our own: no eksctl, kubeconfig or build output of this machine is reused.
        TRAINFLEET_CACHE=str(cache),
    )
    argv = [str(VENV_BIN / "ansible-playbook"), "-i", "inventories/aws", "site.yml", "--check",
            "-e", "trainfleet_aws_endpoint_url=" + moto_endpoint,
            "-e", "@examples/aws/cpu.yml",
            # Required with a public API endpoint (a documentation range: nothing is created).
            "-e", '{"eks_cluster_endpoint_public_access_cidrs": ["198.51.100.0/24"]}',
            "-e", "trainer_image_base_image=" + base_image,
            # Only the Go module proxy is reachable here, not the release's git repository: the
            # operator's manifests come from the same pinned version's Go module.
            "-e", "platform_aws_operator_manifests=go_module"]
    started = time.monotonic()
    try:
        proc = subprocess.run(argv, cwd=str(ROOT), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=PLAYBOOK_TIMEOUT, check=False)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        pytest.fail("site.yml --check did not finish within %ds:\n%s" % (PLAYBOOK_TIMEOUT, out[-6000:]))
    (tmp_path_factory.getbasetemp() / "site-check.log").write_text(proc.stdout)
    return dict(rc=proc.returncode, out=proc.stdout, cache=cache, seconds=time.monotonic() - started,
                endpoint=moto_endpoint)


def _plays(out):
    """Output of each play, by play name (a name seen twice keeps both parts)."""
    plays = {}
    marks = list(PLAY_RE.finditer(out))
    for mark, nxt in zip(marks, marks[1:] + [None]):
        plays.setdefault(mark.group("name"), []).append(out[mark.end():nxt.start() if nxt else len(out)])
    return dict((name, "\n".join(parts)) for name, parts in plays.items())


def test_check_run_succeeds(check_run):
    assert check_run["rc"] == 0, check_run["out"][-6000:]


def test_recap_has_no_failure(check_run):
    recaps = RECAP_RE.findall(check_run["out"])
    assert len(recaps) == 1, check_run["out"][-3000:]
    stats = RECAP_RE.search(check_run["out"]).groupdict()
    assert int(stats["ok"]) > 0
    # Nothing failed, and nothing was hidden by a rescue or ignore_errors.
    for key in ("failed", "unreachable", "rescued", "ignored"):
        assert stats[key] == "0", "%s=%s in the recap" % (key, stats[key])
    assert "fatal:" not in check_run["out"]


def test_endpoint_holds_none_of_our_resources(check_run):
    kw = dict(endpoint_url=check_run["endpoint"], aws_access_key_id="testing", aws_secret_access_key="testing")
    iam = boto3.client("iam", region_name="us-east-1", **kw)
    assert [r["RoleName"] for r in iam.list_roles()["Roles"]] == []
    assert [p["PolicyName"] for p in iam.list_policies(Scope="Local")["Policies"]] == []
    assert [b["Name"] for b in boto3.client("s3", region_name="us-east-1", **kw).list_buckets()["Buckets"]] == []
    for region in REGIONS:
        ecr = boto3.client("ecr", region_name=region, **kw)
        assert [r["repositoryName"] for r in ecr.describe_repositories()["repositories"]] == [], region
        assert boto3.client("eks", region_name=region, **kw).list_clusters()["clusters"] == [], region
        tagged = boto3.client("resourcegroupstaggingapi", region_name=region, **kw).get_resources(
            TagFilters=[{"Key": "project", "Values": ["trainfleet"]}])["ResourceTagMappingList"]
        assert tagged == [], region
    # The AWS managed policies moto was started with are still there: the endpoint was reachable.
    assert iam.get_policy(PolicyArn="arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy")["Policy"]


def test_nothing_written_to_disk(check_run):
    assert not check_run["cache"].exists(), sorted(str(p) for p in check_run["cache"].rglob("*"))


@pytest.mark.parametrize("step", sorted(STEPS))
def test_step_reports_plan_or_reason(check_run, step):
    play, expected = STEPS[step]
    plays = _plays(check_run["out"])
    assert play in plays, "no play %r for step %s; plays: %s" % (play, step, sorted(plays))
    missing = [text for text in expected if text not in plays[play]]
    assert not missing, "step %s did not say %s:\n%s" % (step, missing, plays[play][-4000:])


def test_iam_reports_changes_it_would_make(check_run):
    iam = _plays(check_run["out"])[STEPS["iam"][0]]
    assert iam.count("changed: [localhost]") >= 4, iam[-4000:]
