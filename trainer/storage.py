"""Where snapshots, metrics and models go: a local directory or an s3://bucket/prefix.

Both backends offer the same small interface (``uri``, ``write_bytes``, ``read_bytes``, ``list``,
``delete``). Local writes are atomic (temp file in the same directory, then ``os.replace``); an S3
PUT is atomic per object by design.
"""

import os
import re
import tempfile
from dataclasses import dataclass

# S3 bucket naming rules (general purpose buckets): 3-63 characters, lowercase letters, digits,
# dots and hyphens, starting and ending with a letter or digit, no "..", not an IP address.
_BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_IP_RE = re.compile(r"^\d+\.\d+\.\d+\.\d+$")


def _umask():
    current = os.umask(0o022)
    os.umask(current)
    return current


class StorageError(Exception):
    """A storage URI is malformed or a storage operation failed."""


@dataclass(frozen=True)
class S3Uri:
    """A parsed ``s3://bucket/prefix`` URI; ``prefix`` has no leading or trailing slash."""

    bucket: str
    prefix: str

    def key(self, name):
        """Object key of ``name`` under the prefix."""
        return f"{self.prefix}/{name}" if self.prefix else name

    def __str__(self):
        return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"


def is_s3_uri(value):
    """True when ``value`` is meant as an S3 URI (it may still be malformed)."""
    return isinstance(value, str) and value.lower().startswith("s3:")


def parse_s3_uri(uri):
    """Parse ``s3://bucket[/prefix]``; raise StorageError naming what is wrong."""
    if not isinstance(uri, str) or not uri.startswith("s3://"):
        raise StorageError(f"expected a URI of the form s3://bucket/prefix, got {uri!r}")
    rest = uri[len("s3://"):]
    bucket, _sep, prefix = rest.partition("/")
    if not bucket:
        raise StorageError(f"expected a bucket name after s3:// in {uri!r}")
    if not _BUCKET_RE.match(bucket) or ".." in bucket or _IP_RE.match(bucket):
        raise StorageError(
            f"invalid S3 bucket name {bucket!r} in {uri!r}: expected 3-63 lowercase letters, digits, dots or hyphens, "
            "starting and ending with a letter or digit")
    prefix = prefix.strip("/")
    if "//" in prefix:
        raise StorageError(f"empty path segment in S3 prefix of {uri!r}")
    return S3Uri(bucket=bucket, prefix=prefix)


def s3_endpoint_url(explicit=None):
    """The S3 endpoint: --s3-endpoint-url, else AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL, else None (AWS).

    Read explicitly because older boto3 releases (Debian bookworm ships 1.26) ignore AWS_ENDPOINT_URL.
    """
    return explicit or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None


def s3_client(endpoint_url=None):
    """A boto3 S3 client honouring the custom endpoint; credentials come from the standard AWS chain."""
    try:
        import boto3  # pylint: disable=import-outside-toplevel
    except ImportError as exc:  # pragma: no cover - depends on the image
        raise StorageError("s3:// URIs need boto3, which is not installed") from exc
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or None
    return boto3.client("s3", endpoint_url=s3_endpoint_url(endpoint_url), region_name=region)


class LocalStorage:
    """A local (or shared-volume) directory."""

    def __init__(self, path):
        self.path = os.path.abspath(path)

    @property
    def uri(self):
        return self.path

    def join(self, name):
        """Location of ``name`` (a path) for reporting."""
        return os.path.join(self.path, name)

    def write_bytes(self, name, data):
        """Write atomically: a temp file in the same directory, fsync, then rename over ``name``."""
        target = self.join(name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(name)}.", suffix=".tmp", dir=os.path.dirname(target))
        try:
            os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; give the file ordinary permissions
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, target)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        return target

    def read_bytes(self, name):
        """Content of ``name``, or None when it does not exist."""
        try:
            with open(self.join(name), "rb") as handle:
                return handle.read()
        except FileNotFoundError:
            return None

    def list(self, prefix=""):
        """Names (relative) of files directly in the directory starting with ``prefix``; temp files excluded."""
        try:
            names = os.listdir(self.path)
        except FileNotFoundError:
            return []
        return sorted(n for n in names if n.startswith(prefix) and not n.startswith(".") and os.path.isfile(self.join(n)))

    def delete(self, name):
        try:
            os.unlink(self.join(name))
        except FileNotFoundError:
            pass


class S3Storage:
    """An S3 prefix. Objects are written whole with PutObject, so readers never see half an object."""

    def __init__(self, uri, endpoint_url=None, client=None):
        self.location = parse_s3_uri(uri) if isinstance(uri, str) else uri
        self.client = client or s3_client(endpoint_url)

    @property
    def uri(self):
        return str(self.location)

    def join(self, name):
        return f"s3://{self.location.bucket}/{self.location.key(name)}"

    def write_bytes(self, name, data):
        self.client.put_object(Bucket=self.location.bucket, Key=self.location.key(name), Body=data)
        return self.join(name)

    def read_bytes(self, name):
        try:
            response = self.client.get_object(Bucket=self.location.bucket, Key=self.location.key(name))
        except self.client.exceptions.NoSuchKey:
            return None
        return response["Body"].read()

    def list(self, prefix=""):
        """Names (relative to the prefix, one level) starting with ``prefix``."""
        base = self.location.key("")
        names = []
        paginator = self.client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.location.bucket, Prefix=base + prefix):
            for obj in page.get("Contents", []):
                rel = obj["Key"][len(base):]
                if rel and "/" not in rel:
                    names.append(rel)
        return sorted(names)

    def delete(self, name):
        self.client.delete_object(Bucket=self.location.bucket, Key=self.location.key(name))


def open_storage(uri, endpoint_url=None):
    """LocalStorage for a path, S3Storage for an s3:// URI."""
    if is_s3_uri(uri):
        return S3Storage(uri, endpoint_url=endpoint_url)
    return LocalStorage(uri)


def check_local_dir_writable(path):
    """Return None when ``path`` is (or can be created as) a writable directory, else a reason."""
    path = os.path.abspath(path)
    if os.path.exists(path):
        if not os.path.isdir(path):
            return "exists and is not a directory"
        if not os.access(path, os.W_OK | os.X_OK):
            return "is not writable"
        return None
    parent = os.path.dirname(path)
    while parent and not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent) or not os.access(parent, os.W_OK | os.X_OK):
        return f"cannot be created (nearest existing parent {parent!r} is not a writable directory)"
    return None
