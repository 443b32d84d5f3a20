# -*- coding: utf-8 -*-
"""aws_ownership_info tells ours (tagged) from not ours, per named resource.

Runs the module against moto's in-process mock of S3, ECR and IAM.
"""

from __future__ import annotations

import json

import boto3
import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.trainfleet.training.plugins.modules import aws_ownership_info as module

moto = pytest.importorskip("moto")
OURS = {"project": "trainfleet"}


@pytest.fixture
def aws(monkeypatch):
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(key, value)
    with moto.mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="ours-bucket")
        ours_tags = [{"Key": "project", "Value": "trainfleet"}, {"Key": "trainfleet-step", "Value": "s3"}]
        s3.put_bucket_tagging(Bucket="ours-bucket", Tagging={"TagSet": ours_tags})
        s3.create_bucket(Bucket="their-bucket")
        ecr = boto3.client("ecr", region_name="us-east-1")
        ecr.create_repository(repositoryName="their/repo", tags=[{"Key": "project", "Value": "other"}])
        iam = boto3.client("iam", region_name="us-east-1")
        iam.create_role(RoleName="ours-role", Path="/trainfleet/", AssumeRolePolicyDocument="{}",
                        Tags=[{"Key": "project", "Value": "trainfleet"}])
        iam.create_policy(PolicyName="their-policy", Path="/trainfleet/",
                          PolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [
                              {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"}]}))
        yield


def run(capsys, args):
    with patch_module_args(dict({"tags": OURS, "region": "us-east-1"}, **args)):
        with pytest.raises(SystemExit):
            module.main()
    return json.loads(capsys.readouterr().out)


def test_tells_ours_from_theirs_and_absent(aws, capsys):  # pylint: disable=unused-argument,redefined-outer-name
    result = run(capsys, {"s3_buckets": ["ours-bucket", "their-bucket", "no-such-bucket"],
                          "ecr_repositories": ["their/repo", "no/repo"],
                          "iam_roles": ["ours-role", "no-role"], "iam_policies": ["their-policy", "no-policy"],
                          "iam_path": "/trainfleet/"})
    by_name = {r["name"]: r for r in result["resources"]}
    assert by_name["ours-bucket"]["owned"] and by_name["ours-role"]["owned"]
    assert not by_name["their-bucket"]["owned"] and by_name["their-bucket"]["exists"]
    assert by_name["their/repo"]["tags"] == {"project": "other"}
    for absent in ("no-such-bucket", "no/repo", "no-role", "no-policy"):
        assert not by_name[absent]["exists"] and not by_name[absent]["owned"]
    assert sorted(r["name"] for r in result["unowned"]) == ["their-bucket", "their-policy", "their/repo"]
    assert result["changed"] is False


def test_empty_tags_are_refused(aws, capsys):  # pylint: disable=unused-argument,redefined-outer-name
    result = run(capsys, {"tags": {}, "s3_buckets": ["their-bucket"]})
    assert result["failed"] and "tags must name at least one tag" in result["msg"]
