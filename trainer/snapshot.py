"""Snapshots: model, optimizer, finished epoch and the metrics so far, written atomically.

Layout in --snapshot-dir (a directory or an s3:// prefix)::

    snapshot-epoch-00003.pt   torch.save of a dict (see make_snapshot)
    latest                    text: the name of the newest complete snapshot

A snapshot is written first (local: temp file + rename; S3: one PutObject with Content-MD5, retried
with backoff while the endpoint is unavailable), its stored size is checked, and only then is
``latest`` switched to it the same way: a crash or an outage at any point leaves the previous
complete snapshot in charge, and ``latest`` never names a snapshot that is not whole.

A run resumes from the newest snapshot that loads (``load_latest``), not from whatever ``latest``
says: every ``snapshot-epoch-*.pt`` present is complete (both writes are atomic), and the pointer
lags by one when a process died between the two writes; taking the newest means an epoch a
snapshot covers is never trained again. A snapshot that does not load (damaged by hand, another
format) is reported and the next older one is tried. Only global rank 0 writes; every rank reads
the same snapshot, named by rank 0.
"""

import inspect
import io
import pickle  # nosec B403 - only for the exception type of a damaged snapshot
import re
import time

import torch

from trainer.storage import StorageError

LATEST = "latest"
FORMAT = 1
_NAME_RE = re.compile(r"^snapshot-epoch-(\d+)\.pt$")


def snapshot_name(epoch):
    return f"snapshot-epoch-{epoch:05d}.pt"


def _epoch_of(name):
    match = _NAME_RE.match(name)
    return int(match.group(1)) if match else None


def torch_load_kwargs():
    """Explicit weights_only for torch.load.

    torch >= 2.0: weights_only=True, so loading never runs pickled code (2.6+ defaults to it anyway).
    torch 1.13 has the flag, but its restricted unpickler rejects plain floats (pickle opcode
    BINFLOAT), which every optimizer state holds (lr), so there weights_only=False, said explicitly.
    Older torch has no such flag.
    """
    try:
        params = inspect.signature(torch.load).parameters
    except (TypeError, ValueError):  # pragma: no cover
        return {}
    if "weights_only" not in params:
        return {}
    major = int(re.match(r"\d+", torch.__version__).group(0))
    return {"weights_only": major >= 2}


def to_bytes(obj):
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def from_bytes(data):
    return torch.load(io.BytesIO(data), map_location="cpu", **torch_load_kwargs())


def make_snapshot(epoch, model, optimizer, metrics, model_spec, world_size):
    """The snapshot dict; ``model`` is the bare module (not the DDP wrapper)."""
    return {
        "format": FORMAT,
        "epoch": int(epoch),
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "metrics": [dict(m) for m in metrics],
        "model_spec": dict(model_spec),
        "world_size": int(world_size),
        "created": time.time(),
    }


def save_snapshot(storage, snapshot, keep=2, warn=None, serialize=None):
    """Write the snapshot, check it is whole, point ``latest`` at it, prune to the newest ``keep``.

    Returns its URI. Raises (StorageError, OSError) when the snapshot or the pointer could not be
    written; ``latest`` then still names the previous complete snapshot. A failed prune only
    reaches ``warn`` (a message): the snapshot itself is in place. ``serialize``: the snapshot's bytes
    (to_bytes; on an XLA device trainer.xla's, which moves the tensors to the CPU first).
    """
    name = snapshot_name(snapshot["epoch"])
    data = (serialize or to_bytes)(snapshot)
    uri = storage.write_bytes(name, data)
    stored = storage.size(name)
    if stored != len(data):
        raise StorageError(f"{uri} holds {stored} bytes after the write, expected {len(data)}; {LATEST} not moved")
    storage.write_bytes(LATEST, name.encode("utf-8"))
    try:
        names = sorted((n for n in storage.list("snapshot-epoch-") if _epoch_of(n) is not None), key=_epoch_of)
        for old in names[:-keep] if keep > 0 else []:
            if old != name:
                storage.delete(old)
    except (StorageError, OSError) as exc:
        if warn:
            warn(f"pruning old snapshots in {storage.uri} failed (kept them): {exc}")
    return uri


def snapshot_names(storage):
    """Names of the snapshots present, newest (highest epoch) first."""
    present = [n for n in storage.list("snapshot-epoch-") if _epoch_of(n) is not None]
    return sorted(present, key=_epoch_of, reverse=True)


def find_latest(storage):
    """Name of the newest snapshot present (every one present is complete), else None.

    ``latest`` is not consulted: it lags by one when a process died between writing a snapshot
    and moving the pointer, and resuming from it would train the newer snapshot's epoch again.
    """
    names = snapshot_names(storage)
    return names[0] if names else None


# What a snapshot that is present but cannot be used raises while loading: unpickling errors, a
# truncated file (EOFError, RuntimeError from torch), another format (ValueError), gone (FileNotFoundError).
_DAMAGED = (pickle.UnpicklingError, EOFError, RuntimeError, ValueError, KeyError, TypeError, AttributeError,
            FileNotFoundError)


def load_latest(storage, warn=None):
    """(name, snapshot dict) of the newest snapshot that loads, else (None, None).

    A damaged snapshot is reported to ``warn`` and the next older one is tried. Storage errors
    (the endpoint stays unavailable after the retries, access denied) are raised: resuming from an
    older snapshot only because the newest could not be read would repeat epochs.
    """
    for name in snapshot_names(storage):
        try:
            return name, load_snapshot(storage, name)
        except StorageError:
            raise
        except _DAMAGED as exc:
            if warn:
                warn(f"snapshot {storage.join(name)} cannot be loaded, trying an older one: {exc.__class__.__name__}: {exc}")
    return None, None


def load_snapshot(storage, name):
    """The snapshot dict ``name`` (tensors on CPU)."""
    data = storage.read_bytes(name)
    if data is None:
        raise FileNotFoundError(f"snapshot {storage.join(name)} disappeared")
    snapshot = from_bytes(data)
    if not isinstance(snapshot, dict) or snapshot.get("format") != FORMAT:
        raise ValueError(f"{storage.join(name)} is not a trainfleet snapshot (format {FORMAT})")
    return snapshot
