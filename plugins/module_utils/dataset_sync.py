# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Sync a local dataset (a directory or a list of files) to an S3 prefix, comparing checksums.

Why not community.aws.s3_sync (10.0.0, the installed release): it has no check mode (Ansible skips
it under --check, so nothing says what would be uploaded); its checksum strategy compares the
object's ETag with a local MD5, which is not an MD5 for SSE-KMS objects (the s3 role's aws:kms
option), so every file would be uploaded again on every run; it marks nothing it uploads, so its
delete option removes every object under the prefix that is not in the source, including objects
trainfleet never wrote.

Here each uploaded object carries user metadata: ``trainfleet-sha256`` (the file's SHA-256) and
``trainfleet-dataset`` (the dataset's name). A file is unchanged when the object's SHA-256 is the
file's; an object without our metadata is someone else's: it is never overwritten or deleted
unless asked (overwrite_unowned), except that an identical one (single-part ETag equal to the
file's MD5) is left in place as unchanged. Deleting (optional) removes only objects under the
prefix that carry this dataset's name and are no longer in the source.

Everything is planned (the listing and the HEAD requests) before the first upload, so a conflict
fails the run with nothing written.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import mimetypes
import os

from ansible_collections.trainfleet.training.plugins.module_utils.errors import TrainfleetError

META_SHA256 = "trainfleet-sha256"
META_DATASET = "trainfleet-dataset"
CHUNK = 1024 * 1024
# The trainer's dir: and s3:// datasets read these (trainer/config.py DATA_SUFFIXES; *.txt are the
# transformer's text shards, TEXT_SUFFIXES).
DATA_SUFFIXES = (".npz", ".csv", ".txt")


class SyncError(TrainfleetError):
    """The source or the destination cannot be synced; the message says why."""


def _bad_name(rel):
    """Why a relative path cannot be an S3 key part (None when it can)."""
    if any(ord(c) < 32 or ord(c) == 127 for c in rel):
        return "contains a control character (newline, tab...)"
    if "{{" in rel or "{%" in rel or "}}" in rel:
        return "contains a template marker ({{, {%, }})"
    if "\\" in rel:
        return "contains a backslash"
    return None


def _entry(path, rel):
    st = os.stat(path)
    return {"path": path, "rel": rel, "size": int(st.st_size)}


def scan_source(source, max_files=10000):
    """The files to sync, sorted by relative path: [{path, rel, size}].

    source: a directory (every regular file under it, recursively, except hidden names, those
    starting with '.') or a list of files (each by its base name). Symbolic links are refused (a
    link could publish a file from anywhere on this machine), as are names S3 keys should not carry.
    """
    entries = []
    if isinstance(source, str):
        source = os.path.expanduser(source)
    if isinstance(source, (list, tuple)):
        source = [os.path.expanduser(item) if isinstance(item, str) else item for item in source]
        if not source:
            raise SyncError("the list of files is empty")
        seen = {}
        for item in source:
            if not isinstance(item, str) or not item:
                raise SyncError("every list entry must be a file path, got %s" % json.dumps(item, default=str))
            if os.path.islink(item):
                raise SyncError("%s is a symbolic link (not followed)" % json.dumps(item))
            if not os.path.isfile(item):
                raise SyncError("%s is not a regular file" % json.dumps(item))
            rel = os.path.basename(item)
            if rel.startswith("."):
                raise SyncError("%s is a hidden file (its name starts with '.')" % json.dumps(item))
            if rel in seen:
                raise SyncError("%s and %s have the same name %s" % (json.dumps(seen[rel]), json.dumps(item), json.dumps(rel)))
            seen[rel] = item
            entries.append(_entry(item, rel))
    else:
        if not isinstance(source, str) or not source:
            raise SyncError("expected a directory or a list of files, got %s" % json.dumps(source, default=str))
        if os.path.islink(source.rstrip("/")):
            raise SyncError("%s is a symbolic link (not followed)" % json.dumps(source))
        if not os.path.isdir(source):
            raise SyncError("%s is not a directory" % json.dumps(source))
        for root, dirs, files in os.walk(source, followlinks=False):
            for name in list(dirs):
                full = os.path.join(root, name)
                if name.startswith("."):
                    dirs.remove(name)
                elif os.path.islink(full):
                    raise SyncError("%s is a symbolic link (not followed)" % json.dumps(full))
            for name in files:
                if name.startswith("."):
                    continue
                full = os.path.join(root, name)
                if os.path.islink(full):
                    raise SyncError("%s is a symbolic link (not followed)" % json.dumps(full))
                if not os.path.isfile(full):
                    raise SyncError("%s is not a regular file" % json.dumps(full))
                rel = os.path.relpath(full, source).replace(os.sep, "/")
                entries.append(_entry(full, rel))
                if len(entries) > max_files:
                    raise SyncError("%s holds more than %d files" % (json.dumps(source), max_files))
    if not entries:
        raise SyncError("%s holds no file to stage (hidden files are skipped)" % json.dumps(source, default=str))
    if len(entries) > max_files:
        raise SyncError("%d files, more than the limit of %d" % (len(entries), max_files))
    for entry in entries:
        why = _bad_name(entry["rel"])
        if why:
            raise SyncError("file name %s %s" % (json.dumps(entry["rel"]), why))
        if not os.access(entry["path"], os.R_OK):
            raise SyncError("%s is not readable" % json.dumps(entry["path"]))
    entries.sort(key=lambda e: e["rel"])
    return entries


def digests(path):
    """(sha256 hex, md5 hex) of a file, read once."""
    sha = hashlib.sha256()
    md5 = hashlib.md5()  # nosec - compared with S3's single-part ETag only, never for security
    with open(path, "rb") as handle:
        while True:
            block = handle.read(CHUNK)
            if not block:
                break
            sha.update(block)
            md5.update(block)
    return sha.hexdigest(), md5.hexdigest()


def with_digests(entries):
    out = []
    for entry in entries:
        sha, md5 = digests(entry["path"])
        out.append(dict(entry, sha256=sha, md5=md5))
    return out


def manifest(entries):
    """The dataset's manifest (relative path, size, SHA-256 of each file, sorted) and its own SHA-256."""
    files = [{"path": e["rel"], "size": e["size"], "sha256": e["sha256"]} for e in sorted(entries, key=lambda e: e["rel"])]
    text = json.dumps(files, sort_keys=True, separators=(",", ":"))
    return files, hashlib.sha256(text.encode("utf-8")).hexdigest()


def normalize_prefix(prefix):
    """'a/b' or 'a/b/' -> 'a/b/'; '' stays ''."""
    prefix = (prefix or "").strip("/")
    return prefix + "/" if prefix else ""


def list_objects(client, bucket, prefix):
    """{key: {etag, size}} of every object under the prefix."""
    found = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            found[obj["Key"]] = {"etag": obj.get("ETag", "").strip('"'), "size": int(obj.get("Size", 0))}
    return found


def plan(entries, remote, head, prefix, name, overwrite_unowned=False, delete=False):
    """What to do: {upload: [...], unchanged: [...], conflicts: [...], delete: [...], extra: [...]}.

    entries: local files with digests; remote: list_objects() of the prefix; head(key) returns the
    object's user metadata (lowercase keys). Pure apart from head, so it is tested without S3.
    """
    result = {"upload": [], "unchanged": [], "conflicts": [], "delete": [], "extra": []}
    local_keys = set()
    for entry in entries:
        key = prefix + entry["rel"]
        local_keys.add(key)
        item = {"key": key, "path": entry["path"], "rel": entry["rel"], "size": entry["size"], "sha256": entry["sha256"]}
        if key not in remote:
            result["upload"].append(dict(item, reason="new"))
            continue
        meta = head(key)
        if meta.get(META_DATASET):
            if meta.get(META_SHA256) == entry["sha256"]:
                result["unchanged"].append(item)
            else:
                result["upload"].append(dict(item, reason="changed"))
        elif remote[key]["etag"] == entry["md5"] and remote[key]["size"] == entry["size"]:
            # Someone else's object with the same bytes: left as it is.
            result["unchanged"].append(dict(item, unowned=True))
        elif overwrite_unowned:
            result["upload"].append(dict(item, reason="replaces an object trainfleet did not upload"))
        else:
            result["conflicts"].append(item)
    for key in sorted(set(remote) - local_keys):
        if delete:
            meta = head(key)
            if meta.get(META_DATASET) == name:
                result["delete"].append({"key": key, "size": remote[key]["size"]})
                continue
            result["extra"].append({"key": key, "size": remote[key]["size"], "owned": bool(meta.get(META_DATASET))})
        else:
            result["extra"].append({"key": key, "size": remote[key]["size"]})
    return result


def content_type(path):
    kind, _encoding = mimetypes.guess_type(path)
    return kind or "application/octet-stream"


def upload(client, bucket, item, name):
    """Upload one file with our metadata (multipart for large files: the SHA-256 is ours, not the ETag)."""
    client.upload_file(item["path"], bucket, item["key"], ExtraArgs={
        "Metadata": {META_SHA256: item["sha256"], META_DATASET: name},
        "ContentType": content_type(item["path"]),
    })


def delete_keys(client, bucket, keys):
    for start in range(0, len(keys), 1000):
        batch = keys[start:start + 1000]
        resp = client.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True})
        errors = resp.get("Errors") or []
        if errors:
            raise SyncError("could not delete %s: %s" % (errors[0].get("Key"), errors[0].get("Message") or errors[0].get("Code")))


def data_file_count(entries):
    return sum(1 for e in entries if e["rel"].endswith(DATA_SUFFIXES))
