"""TensorBoard event files, written by rank 0 next to metrics.jsonl, with no dependency.

Why no library: the trainer image installs everything from Debian packages inside an offline build
(trainer/Dockerfile), and bookworm packages neither tensorboard nor tensorboardX; either would need
pip and the package index inside that build, and the full tensorboard package also brings grpcio,
the data server and a web stack into the image for a few scalars. What TensorBoard reads is a small
stable format: TFRecord framing (length, masked CRC-32C, data, masked CRC-32C) around ``Event``
protocol buffers. The three messages and five fields used here are encoded below (about 60 lines);
trainer/tests/test_tbevents.py reads the files back with tensorboard's own EventAccumulator and a
real TensorBoard server (pinned in requirements.txt for the tests only).

One file per output directory, ``events.out.tfevents.<first epoch's unix time>.trainfleet``, one
event per epoch, the epoch as the step, four scalars (``TAGS``). The file is a function of the run's
metrics history (each record carries its ``wall_time``): a resumed run rebuilds it from the
snapshot's history, so epochs trained after the last snapshot by the attempt that died are dropped
and every step is in the file once, and the bytes of the epochs that the snapshot covers are the
same as before, so a reader that had read the old file up to some offset goes on at that offset.
Each write stores the whole file through trainer.storage (local: temp file + rename; S3: one
PutObject), so a reader never sees half a record; the content only ever grows by appending, and
TensorBoard's loader (``--load_fast=false``) opens the file by path for each read.
"""

import re
import struct

EVENTS_PREFIX = "events.out.tfevents."
EVENTS_SUFFIX = ".trainfleet"
_NAME_RE = re.compile(r"^" + re.escape(EVENTS_PREFIX) + r"\d+" + re.escape(EVENTS_SUFFIX) + r"$")
FILE_VERSION = "brain.Event:2"

# tag -> key of a metrics record (trainer.loop's history): what each epoch's event holds.
TAGS = {
    "train/loss": "loss",
    "test/accuracy": "test_acc",
    "train/samples_per_s": "samples_per_s",
    "train/learning_rate": "lr",
}


def _crc32c_table():
    table = []
    for byte in range(256):
        crc = byte
        for _bit in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC_TABLE = _crc32c_table()


def crc32c(data):
    """CRC-32C (Castagnoli), the checksum of TFRecord framing."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data):
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(value):
    out = bytearray()
    value &= 0xFFFFFFFFFFFFFFFF  # int64 on the wire: two's complement
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _key(field, wire_type):
    return _varint((field << 3) | wire_type)


def _length_delimited(field, payload):
    return _key(field, 2) + _varint(len(payload)) + payload


def encode_event(wall_time, step=0, file_version=None, scalars=None):
    """An ``Event`` message: wall_time (1, double), step (2, int64), file_version (3, string),
    summary (5, ``Summary`` of repeated ``Summary.Value`` (1): tag (1, string), simple_value (2, float))."""
    out = _key(1, 1) + struct.pack("<d", float(wall_time))
    if step:
        out += _key(2, 0) + _varint(int(step))
    if file_version is not None:
        out += _length_delimited(3, file_version.encode("utf-8"))
    if scalars:
        summary = b"".join(
            _length_delimited(1, _length_delimited(1, tag.encode("utf-8")) + _key(2, 5) + struct.pack("<f", float(value)))
            for tag, value in scalars)
        out += _length_delimited(5, summary)
    return out


def frame(data):
    """One TFRecord: length (uint64), its masked CRC-32C, the data, the data's masked CRC-32C."""
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", masked_crc32c(length)) + data + struct.pack("<I", masked_crc32c(data))


def read_records(blob):
    """The records of a TFRecord file (for tests and tools); raises ValueError on a damaged one."""
    records, pos = [], 0
    while pos < len(blob):
        if pos + 12 > len(blob):
            raise ValueError(f"truncated record header at byte {pos}")
        length_bytes = blob[pos:pos + 8]
        (length,) = struct.unpack("<Q", length_bytes)
        if struct.unpack("<I", blob[pos + 8:pos + 12])[0] != masked_crc32c(length_bytes):
            raise ValueError(f"bad length checksum at byte {pos}")
        data = blob[pos + 12:pos + 12 + length]
        end = pos + 12 + length + 4
        if end > len(blob):
            raise ValueError(f"truncated record at byte {pos}")
        if struct.unpack("<I", blob[end - 4:end])[0] != masked_crc32c(data):
            raise ValueError(f"bad data checksum at byte {pos}")
        records.append(data)
        pos = end
    return records


def epoch_scalars(record):
    """(tag, value) pairs of one metrics record, in TAGS order."""
    return [(tag, record[key]) for tag, key in TAGS.items()]


def events_name(history):
    """The event file's name: from the first epoch's wall time, so a resumed run keeps the same file."""
    return f"{EVENTS_PREFIX}{int(history[0]['wall_time'])}{EVENTS_SUFFIX}"


def is_events_name(name):
    """True for a file this module writes (other tools' event files are left alone)."""
    return bool(_NAME_RE.match(name))


def events_bytes(history):
    """The whole event file for ``history`` (records with epoch and wall_time): the header, then one
    event per epoch in epoch order. Empty history: no file (b"")."""
    records = sorted(history, key=lambda r: r["epoch"])
    if not records:
        return b""
    out = [frame(encode_event(records[0]["wall_time"], file_version=FILE_VERSION))]
    out.extend(frame(encode_event(r["wall_time"], step=r["epoch"], scalars=epoch_scalars(r))) for r in records)
    return b"".join(out)


class EventLog:
    """Rank 0's event file in the output storage (trainer.storage LocalStorage or S3Storage).

    ``start(history)`` removes event files of an earlier attempt under another name and writes the
    file rebuilt from the restored history; ``write(history)`` stores the whole file after an epoch.
    Both return the file's URI, or None when there is nothing to write yet; storage errors propagate
    (the loop turns them into a warning, and the next write carries everything)."""

    def __init__(self, storage):
        self.storage = storage
        self.uri = None

    def start(self, history):
        keep = events_name(history) if history else None
        for name in self.storage.list(EVENTS_PREFIX):
            if is_events_name(name) and name != keep:
                self.storage.delete(name)
        return self.write(history) if history else None

    def write(self, history):
        if not history:
            return None
        self.uri = self.storage.write_bytes(events_name(history), events_bytes(history))
        return self.uri
