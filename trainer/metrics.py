"""Per-epoch metrics: the log-line contract, metrics.jsonl and the PNG plot.

Every ``trainfleet-...:`` line the trainer prints is formatted here (the prefixes are in
trainer/__init__.py); plugins/module_utils/trainerlog.py parses them on the Ansible side.
"""

import datetime
import io
import json
import re

from trainer import (COMPILE_PREFIX, EPOCH_PREFIX, ERROR_PREFIX, EVALUATE_PREFIX, INFO_PREFIX, RANK_PREFIX, RESULT_PREFIX, RESUME_PREFIX, STALL_PREFIX,
                     STOPPED_PREFIX, WARNING_PREFIX)

METRICS_NAME = "metrics.jsonl"
PLOT_NAME = "plot.png"
MODEL_NAME = "model.pt"


def iso_time(now=None):
    """``2025-01-01T10:00:00.123Z``: UTC, milliseconds, the ``time=`` field of the rank and epoch lines."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    now = now.astimezone(datetime.timezone.utc)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


def rank_line(rank, local_rank, world_size, group_rank, host, now=None, launcher=None):
    """``trainfleet-rank: rank=<R> local_rank=<L> world_size=<W> group_rank=<G> host=<hostname> time=<t>
    [launcher=<torchrun|mpirun|none>]`` (every process, once, after the rendezvous; time: when it printed,
    see iso_time; launcher: who started the process, see trainer.dist.launched_by)."""
    line = (f"{RANK_PREFIX} rank={rank} local_rank={local_rank} world_size={world_size} group_rank={group_rank} host={host} "
            f"time={iso_time(now)}")
    return f"{line} launcher={launcher}" if launcher else line


def error_line(message):
    """``trainfleet-trainer: error: <message>`` (stderr, before the exit code 1 or 2)."""
    return f"{ERROR_PREFIX} {one_line(message)}"


def epoch_line(record, now=None):
    """``trainfleet-epoch: epoch=<E> loss=<f> test_acc=<f> samples_per_s=<f> time=<t>`` (loss = mean training loss;
    time: when the epoch was done, see iso_time)."""
    return (f"{EPOCH_PREFIX} epoch={record['epoch']} loss={record['loss']:.6f} "
            f"test_acc={record['test_acc']:.6f} samples_per_s={record['samples_per_s']:.1f} time={iso_time(now)}")


def parse_epoch_line(line):
    """Inverse of epoch_line (for tests and tools): dict of the key=value fields (time as text; lines of
    trainers from before it have none), or None."""
    if not line.startswith(EPOCH_PREFIX):
        return None
    fields = dict(part.split("=", 1) for part in line[len(EPOCH_PREFIX):].split())
    return {k: (int(v) if k == "epoch" else v if k == "time" else float(v)) for k, v in fields.items()}


def _json_line(prefix, obj):
    return f"{prefix} {json.dumps(obj, sort_keys=True)}"


def _parse_json_line(prefix, line):
    """The object of a ``<prefix> {json}`` line, or None for another line."""
    if not line.startswith(prefix):
        return None
    return json.loads(line[len(prefix):])


def result_line(result):
    """``trainfleet-result: {json}`` on one line."""
    return _json_line(RESULT_PREFIX, result)


def parse_result_line(line):
    return _parse_json_line(RESULT_PREFIX, line)


def evaluate_line(report):
    """``trainfleet-evaluate: {json}`` on one line (python -m trainer.evaluate)."""
    return _json_line(EVALUATE_PREFIX, report)


def parse_evaluate_line(line):
    return _parse_json_line(EVALUATE_PREFIX, line)


def compile_line(report):
    """``trainfleet-compile: {json}`` (rank 0 on an XLA device, after the first epoch it ran: device, precompile,
    cache_set, graphs_compiled, compile_s, cache_hits, cache_misses; trainer.xla.compile_stats)."""
    return _json_line(COMPILE_PREFIX, report)


def parse_compile_line(line):
    return _parse_json_line(COMPILE_PREFIX, line)


def one_line(text):
    """``text`` on one line (an exception message may hold newlines; a log line must not)."""
    return re.sub(r"\s*\n\s*", " ", str(text)).strip()


def resume_line(epoch, uri, restarts):
    """``trainfleet-resume: epoch=<k> next_epoch=<k+1> snapshot=<uri> restarts=<n>``."""
    return f"{RESUME_PREFIX} epoch={epoch} next_epoch={epoch + 1} snapshot={uri} restarts={restarts}"


_RESUME_RE = re.compile(r"^" + re.escape(RESUME_PREFIX) + r" epoch=(?P<epoch>\d+) next_epoch=(?P<next_epoch>\d+) "
                        r"snapshot=(?P<snapshot>\S+)(?: restarts=(?P<restarts>\d+))?")


def parse_resume_line(line):
    """Inverse of resume_line: {epoch, next_epoch, snapshot, restarts (None on older trainers)} or None."""
    match = _RESUME_RE.match(line)
    if not match:
        return None
    return {"epoch": int(match.group("epoch")), "next_epoch": int(match.group("next_epoch")),
            "snapshot": match.group("snapshot"),
            "restarts": int(match.group("restarts")) if match.group("restarts") is not None else None}


def stopped_line(epoch, reason):
    """``trainfleet-stopped: epoch=<k> reason=<reason>``."""
    return f"{STOPPED_PREFIX} epoch={epoch} reason={reason}"


def info_line(text):
    """``trainfleet-info: <text>`` (free-form)."""
    return f"{INFO_PREFIX} {one_line(text)}"


def snapshot_line(epoch, uri):
    """``trainfleet-info: snapshot epoch=<k> uri=<uri>``: the snapshot is whole and ``latest`` names it."""
    return info_line(f"snapshot epoch={epoch} uri={uri}")


def stall_line(rank, idle_s, where, why):
    """``trainfleet-stall: rank=<r> no progress for <s>s at epoch=<e> step=<k>; <why>``: the watchdog's
    last line before the rank exits (trainer/watchdog.py); why names the rank that held the run up."""
    return (f"{STALL_PREFIX} rank={rank} no progress for {idle_s:.1f}s at epoch={where['epoch']} "
            f"step={where['step']}; {one_line(why)}")


def warning_line(text):
    """``trainfleet-warning: <text>``: something failed, the run goes on."""
    return f"{WARNING_PREFIX} {one_line(text)}"


def snapshot_failed_line(epoch, error):
    """``trainfleet-warning: snapshot epoch=<k> failed, training goes on (the next epoch tries again): <error>``."""
    return warning_line(f"snapshot epoch={epoch} failed, training goes on (the next epoch tries again): {error}")


def storage_retry_line(op, uri, attempt, attempts, delay_s, error):
    """``trainfleet-warning: storage <op> <uri> attempt <n>/<max> failed (<Error>: <msg>); retrying in <s>s``."""
    return warning_line(f"storage {op} {uri} attempt {attempt}/{attempts} failed "
                        f"({error.__class__.__name__}: {error}); retrying in {delay_s:.1f}s")


def metrics_jsonl(records):
    """One JSON object per line, in epoch order."""
    return "".join(json.dumps(r, sort_keys=True) + "\n" for r in sorted(records, key=lambda r: r["epoch"])).encode("utf-8")


def read_metrics_jsonl(data):
    return [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]


def plot_png(records, title="trainfleet training"):
    """PNG bytes: training/test loss and test accuracy per epoch (matplotlib, Agg backend)."""
    import matplotlib  # pylint: disable=import-outside-toplevel

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel

    records = sorted(records, key=lambda r: r["epoch"])
    epochs = [r["epoch"] for r in records]
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(10, 4))
    try:
        ax_loss.plot(epochs, [r["loss"] for r in records], marker="o", label="train loss")
        ax_loss.plot(epochs, [r["test_loss"] for r in records], marker="o", label="test loss")
        ax_loss.set_xlabel("epoch")
        ax_loss.set_ylabel("cross-entropy loss")
        ax_loss.legend()
        ax_loss.grid(True, alpha=0.3)
        ax_acc.plot(epochs, [r["test_acc"] for r in records], marker="o", color="tab:green", label="test accuracy")
        ax_acc.set_xlabel("epoch")
        ax_acc.set_ylabel("accuracy")
        ax_acc.set_ylim(0.0, 1.0)
        ax_acc.legend()
        ax_acc.grid(True, alpha=0.3)
        fig.suptitle(title)
        fig.tight_layout()
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=100)
        return buffer.getvalue()
    finally:
        plt.close(fig)
