"""Snapshots: model, optimizer, finished epoch and the metrics so far, written atomically.

Layout in --snapshot-dir (a directory or an s3:// prefix)::

    snapshot-epoch-00003.pt   torch.save of a dict (see make_snapshot)
    latest                    text: the name of the newest complete snapshot

A snapshot is written first (local: temp file + rename; S3: one PutObject), then ``latest`` is
switched to it the same way, so a crash at any point leaves the previous complete snapshot in
charge. Only global rank 0 writes; every rank reads the same snapshot, named by rank 0.
"""

import inspect
import io
import re
import time

import torch

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


def save_snapshot(storage, snapshot, keep=2):
    """Write the snapshot, then point ``latest`` at it, then prune to the newest ``keep``. Returns its URI."""
    name = snapshot_name(snapshot["epoch"])
    uri = storage.write_bytes(name, to_bytes(snapshot))
    storage.write_bytes(LATEST, name.encode("utf-8"))
    names = sorted((n for n in storage.list("snapshot-epoch-") if _epoch_of(n) is not None), key=_epoch_of)
    for old in names[:-keep] if keep > 0 else []:
        if old != name:
            storage.delete(old)
    return uri


def find_latest(storage):
    """Name of the newest complete snapshot: the ``latest`` pointer, else the highest epoch present, else None."""
    pointer = storage.read_bytes(LATEST)
    present = [n for n in storage.list("snapshot-epoch-") if _epoch_of(n) is not None]
    if pointer is not None:
        name = pointer.decode("utf-8").strip()
        if name in present:
            return name
    return max(present, key=_epoch_of) if present else None


def load_snapshot(storage, name):
    """The snapshot dict ``name`` (tensors on CPU)."""
    data = storage.read_bytes(name)
    if data is None:
        raise FileNotFoundError(f"snapshot {storage.join(name)} disappeared")
    snapshot = from_bytes(data)
    if not isinstance(snapshot, dict) or snapshot.get("format") != FORMAT:
        raise ValueError(f"{storage.join(name)} is not a trainfleet snapshot (format {FORMAT})")
    return snapshot
