# -*- coding: utf-8 -*-

# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: dataset_s3_sync
short_description: Stage a local dataset under an S3 prefix, uploading only new or changed files
version_added: 0.1.0
description:
  - Uploads the files of a local directory (or a list of files) under an S3 prefix, so that the
    trainer's C(s3://) datasets (and the dataset role's claim copy Job) read them.
  - A file is uploaded only when it is new or its SHA-256 differs from the one recorded on the
    object (user metadata C(trainfleet-sha256), with C(trainfleet-dataset) naming the dataset).
    A second run with the same files changes nothing. Works for every encryption mode (the
    checksum is ours, not the ETag).
  - An object under the prefix that trainfleet did not upload (no C(trainfleet-dataset) metadata)
    is never overwritten unless O(overwrite_unowned); one with the same bytes is left as it is.
    Every decision is made before the first upload, so a refusal writes nothing.
  - With O(delete), objects under the prefix that carry this dataset's name and are no longer in
    the source are deleted; nothing else ever is.
  - Check mode plans everything (listing, HEAD requests) and uploads nothing.
  - O(mode=scan) only reads the local files (no AWS call) and fails when they cannot be staged, for
    a missing directory, a symbolic link, a name with a control character or too many files.
  - Why not C(community.aws.s3_sync)? It has no check mode, its ETag comparison never matches for
    SSE-KMS objects, and its delete removes objects it did not upload.
author:
  - trainfleet developers (!UNKNOWN)
options:
  mode:
    description: C(sync) uploads (or plans in check mode); C(scan) only checks the local files.
    type: str
    choices: [sync, scan]
    default: sync
  source:
    description:
      - A directory (every regular file under it, recursively, except hidden names) or a list of
        files (each staged under its base name).
    type: raw
    required: true
  name:
    description: The dataset's name, recorded on every object it uploads.
    type: str
    required: true
  bucket:
    description: The bucket. Required with O(mode=sync).
    type: str
  prefix:
    description: Key prefix the files go under (a trailing C(/) is added).
    type: str
    default: ""
  delete:
    description: Delete objects of this dataset under the prefix that are no longer in the source.
    type: bool
    default: false
  overwrite_unowned:
    description: Replace objects under the prefix that trainfleet did not upload when their content differs.
    type: bool
    default: false
  max_files:
    description: Refuse a source with more files than this.
    type: int
    default: 10000
extends_documentation_fragment:
  - amazon.aws.common.modules
  - amazon.aws.region.modules
  - amazon.aws.boto3
"""

EXAMPLES = r"""
- name: Stage the breast_cancer export under the run's prefix
  trainfleet.training.dataset_s3_sync:
    source: /tmp/breast_cancer
    name: breast-cancer
    bucket: trainfleet-local
    prefix: training/datasets/breast-cancer/
    region: us-east-1
    endpoint_url: http://127.0.0.1:5050
  register: staged
"""

RETURN = r"""
s3_uri:
  description: Where the dataset is, as the trainer's C(--dataset) takes it.
  returned: mode sync
  type: str
  sample: s3://trainfleet-local/training/datasets/breast-cancer/
files:
  description: Number of files in the source.
  returned: always
  type: int
data_files:
  description: Number of them the trainer reads (C(*.csv), C(*.npz), C(*.txt)).
  returned: always
  type: int
bytes:
  description: Total size of the source.
  returned: always
  type: int
manifest:
  description: Relative path, size and SHA-256 of every file, sorted by path.
  returned: mode sync
  type: list
  elements: dict
manifest_sha256:
  description: SHA-256 of the manifest (canonical JSON); names the claim copy Job.
  returned: mode sync
  type: str
uploaded:
  description: The files uploaded (or, in check mode, that would be), with the reason (new, changed...).
  returned: mode sync
  type: list
  elements: dict
unchanged:
  description: Number of files already there with the same content.
  returned: mode sync
  type: int
deleted:
  description: Keys deleted (or that would be) with O(delete).
  returned: mode sync
  type: list
  elements: str
extra:
  description: Objects under the prefix that are not in the source and were kept (the trainer reads their data files too).
  returned: mode sync
  type: list
  elements: dict
bucket_exists:
  description: Whether the bucket exists (false only in check mode; otherwise that is a failure).
  returned: mode sync
  type: bool
"""

import time

try:
    import botocore
except ImportError:
    pass  # handled by AnsibleAWSModule

from ansible_collections.amazon.aws.plugins.module_utils.botocore import is_boto3_error_code
from ansible_collections.amazon.aws.plugins.module_utils.modules import AnsibleAWSModule
from ansible_collections.amazon.aws.plugins.module_utils.retries import AWSRetry
from ansible_collections.trainfleet.training.plugins.module_utils import dataset_sync as ds
from ansible_collections.trainfleet.training.plugins.module_utils.progress import ProgressReporter


def argspec():
    return dict(
        mode=dict(type="str", choices=["sync", "scan"], default="sync"),
        source=dict(type="raw", required=True),
        name=dict(type="str", required=True),
        bucket=dict(type="str"),
        prefix=dict(type="str", default=""),
        delete=dict(type="bool", default=False),
        overwrite_unowned=dict(type="bool", default=False),
        max_files=dict(type="int", default=10000),
    )


def summary(entries):
    return dict(files=len(entries), data_files=ds.data_file_count(entries), bytes=sum(e["size"] for e in entries))


def bucket_exists(client, bucket):
    try:
        client.head_bucket(aws_retry=True, Bucket=bucket)
    except is_boto3_error_code(["404", "NoSuchBucket", "NotFound"]):
        return False
    return True


def head_reader(client, bucket):
    def head(key):
        return client.head_object(aws_retry=True, Bucket=bucket, Key=key).get("Metadata", {}) or {}
    return head


def sync(module, client, entries):
    params = module.params
    bucket, name = params["bucket"], params["name"]
    prefix = ds.normalize_prefix(params["prefix"])
    entries = ds.with_digests(entries)
    files, manifest_sha256 = ds.manifest(entries)
    result = dict(summary(entries), s3_uri="s3://%s/%s" % (bucket, prefix), manifest=files,
                  manifest_sha256=manifest_sha256, uploaded=[], unchanged=0, deleted=[], extra=[], bucket_exists=True)
    if not bucket_exists(client, bucket):
        if not module.check_mode:
            module.fail_json(msg="bucket %s does not exist: run the s3 step first (nothing was uploaded)" % bucket, **result)
        result.update(bucket_exists=False, uploaded=[dict(key=prefix + e["rel"], size=e["size"], reason="new") for e in entries])
        module.exit_json(changed=True, **result)
    remote = ds.list_objects(client, bucket, prefix)
    todo = ds.plan(entries, remote, head_reader(client, bucket), prefix, name,
                   overwrite_unowned=params["overwrite_unowned"], delete=params["delete"])
    if todo["conflicts"]:
        keys = [c["key"] for c in todo["conflicts"]]
        module.fail_json(
            msg="%d object(s) under s3://%s/%s were not uploaded by trainfleet and differ from the source: %s. "
                "Nothing was uploaded. Stage under another prefix, or allow replacing them (overwrite_unowned)."
                % (len(keys), bucket, prefix, ", ".join(keys[:10]) + (" ..." if len(keys) > 10 else "")),
            conflicts=keys, **result)
    result["uploaded"] = [dict(key=u["key"], size=u["size"], reason=u["reason"]) for u in todo["upload"]]
    result["unchanged"] = len(todo["unchanged"])
    result["deleted"] = [d["key"] for d in todo["delete"]]
    result["extra"] = todo["extra"]
    changed = bool(todo["upload"] or todo["delete"])
    if module.check_mode or not changed:
        module.exit_json(changed=changed, **result)
    reporter = ProgressReporter(min_interval=5.0)
    started = time.monotonic()
    total = sum(u["size"] for u in todo["upload"])
    done = 0
    for index, item in enumerate(todo["upload"], 1):
        ds.upload(client, bucket, item, name)
        done += item["size"]
        reporter.report("uploaded %d/%d files (%d/%d bytes) to s3://%s/%s in %ds"
                        % (index, len(todo["upload"]), done, total, bucket, prefix, time.monotonic() - started))
    if todo["delete"]:
        ds.delete_keys(client, bucket, result["deleted"])
    module.exit_json(changed=True, **result)


def execute_module(module):
    params = module.params
    try:
        entries = ds.scan_source(params["source"], max_files=params["max_files"])
    except (ds.SyncError, OSError) as e:
        module.fail_json(msg=str(e))
    if params["mode"] == "scan":
        module.exit_json(changed=False, **summary(entries))
    if not params["bucket"]:
        module.fail_json(msg="bucket is required with mode=sync")
    client = module.client("s3", retry_decorator=AWSRetry.jittered_backoff())
    try:
        sync(module, client, entries)
    except ds.SyncError as e:
        module.fail_json(msg=str(e))
    except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as e:
        module.fail_json_aws(e, msg="could not sync %s to s3://%s/%s" % (params["name"], params["bucket"], params["prefix"]))


def main():
    module = AnsibleAWSModule(argument_spec=argspec(), supports_check_mode=True)
    execute_module(module)


if __name__ == "__main__":
    main()
