"""Per-epoch metrics: the log-line contract, metrics.jsonl and the PNG plot."""

import io
import json

from trainer import EPOCH_PREFIX, RESULT_PREFIX

METRICS_NAME = "metrics.jsonl"
PLOT_NAME = "plot.png"
MODEL_NAME = "model.pt"


def epoch_line(record):
    """``trainfleet-epoch: epoch=<E> loss=<f> test_acc=<f> samples_per_s=<f>`` (loss = mean training loss)."""
    return (f"{EPOCH_PREFIX} epoch={record['epoch']} loss={record['loss']:.6f} "
            f"test_acc={record['test_acc']:.6f} samples_per_s={record['samples_per_s']:.1f}")


def parse_epoch_line(line):
    """Inverse of epoch_line (for tests and tools): dict of the key=value fields, or None."""
    if not line.startswith(EPOCH_PREFIX):
        return None
    fields = dict(part.split("=", 1) for part in line[len(EPOCH_PREFIX):].split())
    return {k: (int(v) if k == "epoch" else float(v)) for k, v in fields.items()}


def result_line(result):
    """``trainfleet-result: {json}`` on one line."""
    return f"{RESULT_PREFIX} {json.dumps(result, sort_keys=True)}"


def parse_result_line(line):
    if not line.startswith(RESULT_PREFIX):
        return None
    return json.loads(line[len(RESULT_PREFIX):])


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
