"""Where snapshots, metrics and models go: a local directory or an s3://bucket/prefix.

Both backends offer the same small interface (``uri``, ``write_bytes``, ``read_bytes``, ``size``,
``list``, ``delete``). Local writes are atomic (temp file in the same directory, then ``os.replace``);
an S3 PUT is atomic per object by design: a PUT cut off mid-body creates no object.

Every S3 call is retried with bounded exponential backoff (``RetryPolicy``) when the endpoint is
unavailable: connection refused/reset/closed, connect or read timeouts, HTTP 5xx and throttling
(429, SlowDown, Throttling...). Other errors (AccessDenied, NoSuchBucket, a bad request) fail at
once. botocore's own retries are switched off for these calls, so the policy here is the only one
and its bound holds: after ``attempts`` tries the call raises StorageError. A ``Breaker`` shared by
a run's stores makes the calls after such a failure give up after one try for a while.
"""

import base64
import hashlib
import os
import random
import re
import tempfile
import time
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


# Error codes and HTTP statuses S3 (or a compatible endpoint) answers when it is overloaded or
# briefly unavailable; the same request may succeed later.
TRANSIENT_ERROR_CODES = frozenset((
    "InternalError", "ServiceUnavailable", "SlowDown", "Throttling", "ThrottlingException",
    "ThrottledException", "RequestThrottled", "RequestThrottledException", "TooManyRequestsException",
    "RequestTimeout", "RequestTimeoutException", "BandwidthLimitExceeded", "ProvisionedThroughputExceededException",
    "EC2ThrottledException", "PriorRequestNotComplete", "IDPCommunicationError",
))
BACKOFF_CAP_S = 8.0


def is_transient(exc):
    """True when ``exc`` says the endpoint is unavailable, not that the request is wrong.

    Network failures (connection refused/reset/closed, timeouts: botocore's HTTPClientError family
    and plain OSError), HTTP 5xx and 429, and the throttling/unavailable error codes.
    """
    try:
        from botocore import exceptions as bce  # pylint: disable=import-outside-toplevel
    except ImportError:  # pragma: no cover - depends on the image
        bce = None
    if bce is not None and isinstance(exc, bce.ClientError):
        error = exc.response.get("Error") or {}
        status = (exc.response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
        return error.get("Code") in TRANSIENT_ERROR_CODES or (isinstance(status, int) and (status >= 500 or status == 429))
    if bce is not None and isinstance(exc, (bce.HTTPClientError, bce.ConnectionError)):
        return True
    if exc.__class__.__name__ in ("ResponseStreamingError", "ProtocolError", "IncompleteReadError", "IncompleteRead"):
        return True  # a body cut off while reading (urllib3/botocore, depending on the version)
    return isinstance(exc, (ConnectionError, TimeoutError, OSError))


@dataclass(frozen=True)
class RetryPolicy:
    """At most ``attempts`` tries; before try n+1 wait ``base_s * 2**(n-1)`` (capped at BACKOFF_CAP_S,
    or at base_s when that is larger), scaled by a jitter in [0.5, 1]. The worst total wait is bounded:
    see ``max_total_s``."""

    attempts: int = 8
    base_s: float = 0.5

    def delay(self, failed_attempts, rng=None):
        cap = max(BACKOFF_CAP_S, self.base_s)
        raw = min(cap, self.base_s * (2 ** (failed_attempts - 1)))
        return raw * (0.5 + 0.5 * (rng or _JITTER).random())

    def max_total_s(self):
        cap = max(BACKOFF_CAP_S, self.base_s)
        return sum(min(cap, self.base_s * (2 ** i)) for i in range(self.attempts - 1))


# Jitter from a private generator: the global ``random`` stream belongs to training (seeded).
_JITTER = random.Random()


class Breaker:
    """Shared by the stores of one run (the trainer's snapshots and outputs). Once a call has failed
    every try of its policy, the endpoint counts as down for ``window_s`` (the policy's worst total
    back-off): a call in that window makes a single try, so an S3 outage costs training one back-off,
    not one per write of every epoch (metrics, events, snapshot, latest, prune). A call that succeeds
    closes it; after the window the next call is patient again; ``close()`` before writes that must not
    give up early (the run's final outputs)."""

    def __init__(self, window_s, clock=time.monotonic):
        self.window_s, self.clock = float(window_s), clock
        self.open_until = None

    def attempts(self, policy):
        """How many tries the next call gets under ``policy``."""
        return 1 if self.open_until is not None and self.clock() < self.open_until else policy.attempts

    def failed(self):
        self.open_until = self.clock() + self.window_s

    def close(self):
        self.open_until = None


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


def s3_client(endpoint_url=None, own_retries=False):
    """A boto3 S3 client honouring the custom endpoint; credentials come from the standard AWS chain.

    own_retries: the caller retries (S3Storage): botocore makes one attempt per call and gives up on
    a connection after 10 s, so a dead endpoint costs a bounded time per attempt.
    """
    try:
        import boto3  # pylint: disable=import-outside-toplevel
        from botocore.config import Config  # pylint: disable=import-outside-toplevel
    except ImportError as exc:  # pragma: no cover - depends on the image
        raise StorageError("s3:// URIs need boto3, which is not installed") from exc
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or None
    config = None
    if own_retries:
        config = Config(connect_timeout=10, read_timeout=120, retries={"total_max_attempts": 1, "mode": "standard"})
    return boto3.client("s3", endpoint_url=s3_endpoint_url(endpoint_url), region_name=region, config=config)


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

    def size(self, name):
        """Size in bytes of ``name``, or None when it does not exist."""
        try:
            return os.path.getsize(self.join(name))
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
    """An S3 prefix. Objects are written whole with PutObject (with Content-MD5, so a body damaged on
    the way is refused), so readers never see half an object. Every call goes through ``_call``:
    retried per ``retry`` (a single try while ``breaker``, if any, is open); ``on_retry(op, name,
    attempt, delay_s, exc)`` hears of each retry."""

    def __init__(self, uri, endpoint_url=None, client=None, retry=None, on_retry=None, sleep=time.sleep, breaker=None):
        self.location = parse_s3_uri(uri) if isinstance(uri, str) else uri
        self.client = client or s3_client(endpoint_url, own_retries=True)
        self.retry = retry or RetryPolicy()
        self.on_retry = on_retry
        self.sleep = sleep
        self.breaker = breaker

    @property
    def uri(self):
        return str(self.location)

    def join(self, name):
        return f"s3://{self.location.bucket}/{self.location.key(name)}"

    def _call(self, op, name, func):
        attempts = self.breaker.attempts(self.retry) if self.breaker else self.retry.attempts
        attempt = 1
        while True:
            try:
                result = func()
            except Exception as exc:  # pylint: disable=broad-except
                if not is_transient(exc):
                    raise
                if attempt >= attempts:
                    short = ""
                    if attempts < self.retry.attempts:
                        short = f" (one try: a call failed all {self.retry.attempts} less than {self.breaker.window_s:g}s ago)"
                    elif self.breaker:
                        self.breaker.failed()
                    raise StorageError(f"S3 {op} of {self.join(name)} failed after {attempt} attempt(s){short}: {exc}") from exc
                delay = self.retry.delay(attempt)
                if self.on_retry:
                    self.on_retry(op, self.join(name), attempt, delay, exc)
                self.sleep(delay)
                attempt += 1
            else:
                if self.breaker:
                    self.breaker.close()
                return result

    def write_bytes(self, name, data):
        md5 = base64.b64encode(hashlib.md5(data, usedforsecurity=False).digest()).decode("ascii")
        self._call("put", name, lambda: self.client.put_object(
            Bucket=self.location.bucket, Key=self.location.key(name), Body=data, ContentMD5=md5))
        return self.join(name)

    def read_bytes(self, name):
        def get():
            try:
                response = self.client.get_object(Bucket=self.location.bucket, Key=self.location.key(name))
            except self.client.exceptions.NoSuchKey:
                return None
            return response["Body"].read()
        return self._call("get", name, get)

    def size(self, name):
        """ContentLength of ``name``, or None when it does not exist."""
        def head():
            try:
                return int(self.client.head_object(Bucket=self.location.bucket, Key=self.location.key(name))["ContentLength"])
            except Exception as exc:  # pylint: disable=broad-except
                status = (getattr(exc, "response", None) or {}).get("ResponseMetadata", {}).get("HTTPStatusCode")
                if status == 404:
                    return None
                raise
        return self._call("head", name, head)

    def list(self, prefix=""):
        """Names (relative to the prefix, one level) starting with ``prefix``."""
        base = self.location.key("")

        def listing():
            names = []
            paginator = self.client.get_paginator("list_objects_v2")
            for page in paginator.paginate(Bucket=self.location.bucket, Prefix=base + prefix):
                for obj in page.get("Contents", []):
                    rel = obj["Key"][len(base):]
                    if rel and "/" not in rel:
                        names.append(rel)
            return sorted(names)
        return self._call("list", prefix + "*", listing)

    def delete(self, name):
        self._call("delete", name, lambda: self.client.delete_object(Bucket=self.location.bucket, Key=self.location.key(name)))


def open_storage(uri, endpoint_url=None, retry=None, on_retry=None, breaker=None):
    """LocalStorage for a path, S3Storage (retrying per ``retry``, with ``breaker``) for an s3:// URI."""
    if is_s3_uri(uri):
        return S3Storage(uri, endpoint_url=endpoint_url, retry=retry, on_retry=on_retry, breaker=breaker)
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
