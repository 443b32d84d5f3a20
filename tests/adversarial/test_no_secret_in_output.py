# -*- coding: utf-8 -*-
"""No credential or token in any output, even at -vvv.

Fake AWS credentials (access key, secret key, session token) are in the environment, the
kubeconfig carries a fake bearer token, the train step gets AWS keys for its credentials Secret
and a secret-looking variable through secretKeyRef, and the ECR token the endpoint hands out is
known. Every AWS step and the train step run at -vvv against the private endpoint: iam, s3 and
registry for real (they create on the endpoint), then registry again (its facts), cluster, nodegroups, device_plugins,
training_operator, storage, trainer_image, dataset, train and tensorboard in check mode (no cluster exists), then
teardown in check mode (it needs eksctl, which is not installed here). None of the secret values
may appear in any output.

The access key ID is not among them: amazon.aws declares its access_key option no_log=False on
purpose (an identifier, not a secret), so -vvv prints it in every AWS module's invocation; the
test records that it is the only credential part printed.
"""

from __future__ import annotations

import base64

import boto3
import pytest

from tests.adversarial.conftest import FAKE_KUBE_TOKEN, FAKE_SECRETS, ROOT
from tests.support.docker import empty_image

POD_SECRET_KEY = "adversarialPodSecretKey0123456789abcdefFAKE"
POD_ACCESS_KEY = "AKIAADVERSARIALPODKEY"
STAND_IN_BASE_IMAGE = "trainfleet-adversarial/empty-base:check-mode"
TRAIN_VARS = {
    "trainjob_image": "registry.example/trainfleet/trainer:adversarial",
    "eks_cluster_endpoint_public_access_cidrs": ["198.51.100.0/24"],
    "trainjob_aws_credentials_create": True,
    "trainjob_aws_credentials_secret": "trainfleet-aws",
    "trainjob_aws_access_key_id": POD_ACCESS_KEY,
    "trainjob_aws_secret_access_key": POD_SECRET_KEY,
    "trainjob_env": [{"name": "WANDB_API_KEY",
                      "valueFrom": {"secretKeyRef": {"name": "wandb", "key": "api-key"}}}],
    # The dataset step stages tests/adversarial/dataset and renders its claim copy (whose credentials
    # Secret gets the same keys as the train step's).
    "dataset_source": str(ROOT / "tests" / "adversarial" / "dataset"),
    "dataset_targets": ["s3", "claim"],
    "tensorboard_enabled": True,
    "tensorboard_image": "registry.example/trainfleet/trainer:tensorboard-adversarial",
}


@pytest.fixture(scope="module")
def base_image(tmp_path_factory):
    """An empty local image for the trainer_image step's check mode (it never pulls)."""
    with empty_image(STAND_IN_BASE_IMAGE, tmp_path_factory.mktemp("base")) as image:
        yield image


@pytest.fixture(scope="module")
def verbose_runs(world, base_image):
    world.reset()
    kw = dict(endpoint_url=world.endpoint, aws_access_key_id="testing", aws_secret_access_key="testing")
    token = boto3.client("ecr", region_name="us-west-2", **kw).get_authorization_token()["authorizationData"][0]
    ecr_password = base64.b64decode(token["authorizationToken"]).decode().split(":", 1)[1]
    runs = {}
    runs["create"] = world.run("site.yml", "aws", {}, args=["-vvv", "--tags", "iam,s3,registry"], timeout=600,
                               name="vvv-create")
    # No kubeconfig: check mode then plans the cluster steps instead of reaching for a cluster.
    no_cluster = {"trainfleet_kubeconfig": str(world.base / "no-such-kubeconfig")}
    runs["check"] = world.run("site.yml", "aws", dict(TRAIN_VARS, trainer_image_base_image=base_image, **no_cluster),
                              args=["-vvv", "--check", "--tags",
                                    "registry,cluster,nodegroups,device_plugins,training_operator,storage,trainer_image,dataset,"
                                    "train,tensorboard"],
                              timeout=600, name="vvv-check")
    runs["teardown"] = world.run("playbooks/teardown.yml", "aws", no_cluster, args=["-vvv", "--check"], timeout=600,
                                 name="vvv-teardown")
    secrets = dict(FAKE_SECRETS, KUBE_TOKEN=FAKE_KUBE_TOKEN, POD_SECRET_KEY=POD_SECRET_KEY,
                   POD_ACCESS_KEY=POD_ACCESS_KEY, ECR_PASSWORD=ecr_password)
    secrets.pop("AWS_ACCESS_KEY_ID")
    return runs, secrets


@pytest.mark.parametrize("name", ["create", "check", "teardown"])
def test_verbose_run_succeeds(verbose_runs, name):
    runs, _secrets = verbose_runs
    assert runs[name]["rc"] == 0, runs[name]["out"][-5000:]
    assert "<localhost> ESTABLISH LOCAL CONNECTION" in runs[name]["out"]


@pytest.mark.parametrize("name", ["create", "check", "teardown"])
def test_no_secret_in_verbose_output(verbose_runs, name):
    runs, secrets = verbose_runs
    leaked = sorted(key for key, value in secrets.items() if value and value in runs[name]["out"])
    assert leaked == [], "%s printed %s" % (name, leaked)
