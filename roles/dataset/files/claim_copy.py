# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Copy a staged dataset from its S3 prefix onto the shared claim (role dataset, the copy Job).

Runs in the trainer image (python3 + boto3) as the claim copy Job's only container; the role
ships it in the Job's ConfigMap next to manifest.json, the list of files the dataset step staged
(relative path, size, SHA-256). Settings come from the environment:

  DATASET_NAME, DATASET_BUCKET, DATASET_PREFIX (ends with /), DATASET_TARGET (a directory on
  the claim), DATASET_MANIFEST (path of manifest.json), AWS_ENDPOINT_URL (optional), AWS_REGION.

For each file of the manifest: a file already on the claim with the same size and SHA-256 is kept;
any other is downloaded to a temporary name next to it, checked (size and SHA-256 against the
manifest) and renamed, so a reader never sees half a file. Files the previous copy wrote
(TARGET/.trainfleet-dataset.json) that are no longer in the manifest are removed, so the trainer's
dir: dataset (every *.csv and *.npz, or *.txt, under the directory) reads exactly the staged files; files it
did not write are never touched. A progress line at least every 10 s; any failure ends with exit
code 1 and one line saying why.
"""

from __future__ import absolute_import, division, print_function

import hashlib
import json
import os
import sys
import tempfile
import time

__metaclass__ = type

STATE_FILE = ".trainfleet-dataset.json"
PROGRESS_EVERY = 10.0


class CopyError(Exception):
    """The copy cannot go on; the message says why."""


def say(text):
    sys.stdout.write("%s dataset-copy: %s\n" % (time.strftime("%H:%M:%S"), text))
    sys.stdout.flush()


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1024 * 1024), b""):
            digest.update(block)
    return digest.hexdigest()


def safe_rel(rel):
    """A manifest path must stay inside the target."""
    parts = rel.split("/")
    if not rel or rel.startswith("/") or any(p in ("", ".", "..") for p in parts) or "\\" in rel or "\x00" in rel:
        raise CopyError("manifest path %s is not a relative path inside the target" % json.dumps(rel))
    return parts


def load_manifest(path):
    try:
        with open(path, encoding="utf-8") as handle:
            files = json.load(handle)
    except (OSError, ValueError) as exc:
        raise CopyError("cannot read the manifest %s: %s" % (path, exc)) from exc
    if not isinstance(files, list) or not files:
        raise CopyError("the manifest %s lists no file" % path)
    for item in files:
        safe_rel(item["path"])
    return files


def previous_paths(target):
    try:
        with open(os.path.join(target, STATE_FILE), encoding="utf-8") as handle:
            return set(item["path"] for item in json.load(handle).get("files", []))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return set()


def s3_client():
    import boto3  # pylint: disable=import-outside-toplevel
    from botocore.config import Config  # pylint: disable=import-outside-toplevel
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None
    config = Config(connect_timeout=10, read_timeout=120, retries={"max_attempts": 8, "mode": "standard"})
    return boto3.client("s3", endpoint_url=endpoint, config=config)


def make_target(target, uid):
    try:
        os.makedirs(target, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(prefix=".probe.", dir=target)  # pylint: disable=consider-using-with
        probe.close()
    except OSError as exc:
        raise CopyError("cannot write %s as uid %d: %s. The claim's directory must be writable by the Job's user "
                        "(an fsGroup the volume honours, or a directory owned by that uid)" % (target, uid, exc)) from exc


def fetch(client, bucket, key, dest, item):
    """Download key to a temp file next to dest, check it, rename it into place."""
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".copy.", dir=os.path.dirname(dest))
    os.close(fd)
    try:
        client.download_file(bucket, key, tmp)
        size = os.path.getsize(tmp)
        digest = sha256_of(tmp)
        if size != item["size"] or digest != item["sha256"]:
            raise CopyError("s3://%s/%s has %d bytes and SHA-256 %s, the manifest says %d bytes and %s: the prefix changed "
                            "since the dataset step ran (run it again)" % (bucket, key, size, digest, item["size"], item["sha256"]))
        os.chmod(tmp, 0o644)
        os.replace(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_state(target, name, files):
    fd, tmp = tempfile.mkstemp(prefix=".state.", dir=target)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump({"dataset": name, "files": files}, handle, sort_keys=True)
    os.chmod(tmp, 0o644)
    os.replace(tmp, os.path.join(target, STATE_FILE))


def copy(client, env, clock=time.monotonic):
    name, bucket, prefix, target = env["DATASET_NAME"], env["DATASET_BUCKET"], env["DATASET_PREFIX"], env["DATASET_TARGET"]
    files = load_manifest(env["DATASET_MANIFEST"])
    total_bytes = sum(int(item["size"]) for item in files)
    say("dataset %s: %d files (%d bytes) from s3://%s/%s to %s" % (name, len(files), total_bytes, bucket, prefix, target))
    make_target(target, os.getuid())
    old = previous_paths(target)
    started = last = clock()
    copied = kept = moved_bytes = 0
    for index, item in enumerate(files, 1):
        dest = os.path.join(target, *safe_rel(item["path"]))
        if os.path.isfile(dest) and os.path.getsize(dest) == item["size"] and sha256_of(dest) == item["sha256"]:
            kept += 1
        else:
            try:
                fetch(client, bucket, prefix + item["path"], dest, item)
            except CopyError:
                raise
            except Exception as exc:  # pylint: disable=broad-except
                raise CopyError("cannot copy s3://%s/%s%s to %s: %s" % (bucket, prefix, item["path"], dest, exc)) from exc
            copied += 1
            moved_bytes += item["size"]
        if clock() - last >= PROGRESS_EVERY:
            last = clock()
            say("%d/%d files checked, %d copied (%d bytes), %ds" % (index, len(files), copied, moved_bytes, last - started))
    removed = 0
    for rel in sorted(old - set(item["path"] for item in files)):
        try:
            path = os.path.join(target, *safe_rel(rel))
        except CopyError:
            continue
        if os.path.isfile(path):
            os.unlink(path)
            removed += 1
    write_state(target, name, files)
    say("done: dataset %s on %s: %d files, %d copied (%d bytes), %d unchanged, %d removed, %ds"
        % (name, target, len(files), copied, moved_bytes, kept, removed, clock() - started))
    return dict(copied=copied, kept=kept, removed=removed)


def main():
    try:
        copy(s3_client(), os.environ)
    except CopyError as exc:
        say("FAILED: %s" % exc)
        return 1
    except Exception as exc:  # pylint: disable=broad-except
        say("FAILED: %s: %s" % (type(exc).__name__, exc))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
