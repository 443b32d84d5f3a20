"""Command line and validated configuration.

Every check here runs before any process group starts: a bad argument ends the process with exit
code 2 and a message naming the argument and what was expected (``ConfigError``).
"""

import argparse
import glob
import math
import os
from dataclasses import asdict, dataclass, field
from typing import Optional

from trainer.compilecache import MAX_LOCK_WAIT_S, cache_set_problem, set_path
from trainer.storage import StorageError, check_local_dir_writable, is_s3_uri, parse_s3_uri

DATASETS_HELP = "digits | synthetic | corpus | dir:PATH | s3://bucket/prefix"
DATA_SUFFIXES = (".npz", ".csv")
# The transformer's dir:/s3:// datasets: UTF-8 text shards (trainer.text; ``python -m trainer.datasets
# export corpus DIR`` writes the built-in corpus so).
TEXT_SUFFIXES = (".txt",)
MODELS = ("mlp", "cnn", "transformer")
# The transformer's sizes (trainer.model.TRANSFORMER_SIZES holds their shapes) and the datasets it reads:
# corpus (trainer.text: the stdlib's docstrings as byte tokens), synthetic (random tokens, for benchmarks),
# and dir:/s3:// datasets of *.txt shards.
MODEL_SIZES = ("tiny", "small", "base")
TEXT_DATASETS = ("corpus", "synthetic")
MAX_SEQ_LEN = 4096
MAX_CORPUS_BYTES = 64 << 20
# fp32: plain float32; tf32: float32 with TensorFloat-32 matrix products (CUDA); bf16: bfloat16 autocast.
PRECISIONS = ("fp32", "tf32", "bf16")
OPTIMIZERS = ("sgd", "adam", "adamw")
BACKENDS = ("auto", "gloo", "nccl", "xla")
# xla: torch_xla's runtime (trainer.xla): its CPU device here, NeuronCores under torch-neuronx.
DEVICES = ("auto", "cpu", "cuda", "xla")
DIGITS_FEATURES = 64


class ConfigError(ValueError):
    """A bad argument; ``argument`` is the CLI flag it concerns."""

    def __init__(self, argument, message):
        super().__init__(f"argument {argument}: {message}")
        self.argument = argument


# Upper bounds: a typo such as 10**12 is refused at once, not after the data is loaded.
# The trainjob role checks the same bounds (trainjob_trainer_batch_size, trainjob_trainer_epochs).
MAX_BATCH_SIZE = 65536
MAX_EPOCHS = 100000
# --min-epoch-s pads an epoch to a known length (fault-injection tests, demos); an hour at most.
MAX_MIN_EPOCH_S = 3600


def _positive_int(name, value, upper=None):
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(name, f"expected a positive integer, got {value!r}")
    if upper is not None and value > upper:
        raise ConfigError(name, f"expected a positive integer of at most {upper}, got {value!r}")


def _positive_float(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ConfigError(name, f"expected a positive number, got {value!r}")


def _check_location(name, value):
    """A local directory that is or can be made writable, or a well-formed s3:// URI."""
    if not value:
        raise ConfigError(name, "expected a directory or an s3://bucket/prefix URI, got an empty value")
    if is_s3_uri(value):
        try:
            parse_s3_uri(value)
        except StorageError as exc:
            raise ConfigError(name, str(exc)) from exc
        return
    reason = check_local_dir_writable(value)
    if reason:
        raise ConfigError(name, f"expected a writable directory or an s3://bucket/prefix URI, {value!r} {reason}")


def data_files(path, suffixes=DATA_SUFFIXES):
    """Data files (*.npz, *.csv; *.txt for text) of a ``dir:`` dataset, sorted, searched recursively."""
    files = []
    for suffix in suffixes:
        files.extend(glob.glob(os.path.join(path, "**", "*" + suffix), recursive=True))
    return sorted(files)


@dataclass
class TrainConfig:  # pylint: disable=too-many-instance-attributes
    """Everything a run needs; ``__post_init__`` validates it."""

    dataset: str = "digits"
    data_cache_dir: str = field(default_factory=lambda: os.environ.get("TRAINFLEET_DATA_CACHE", "/tmp/trainfleet-data"))
    synthetic_samples: int = 20000
    synthetic_features: int = 64
    synthetic_classes: int = 10
    test_fraction: float = 0.2
    normalize: bool = True
    model: str = "mlp"
    hidden: list[int] = field(default_factory=lambda: [128, 64])
    model_size: str = "tiny"
    seq_len: int = 128
    corpus_bytes: int = 2 << 20
    precision: str = "fp32"
    compile: bool = False
    optimizer: str = "adam"
    lr: float = 1e-3
    momentum: float = 0.9
    weight_decay: float = 0.0
    batch_size: int = 64
    epochs: int = 10
    seed: int = 0
    snapshot_dir: Optional[str] = None
    snapshot_every: int = 1
    keep_snapshots: int = 2
    stop_after_epoch: Optional[int] = None
    min_epoch_s: float = 0.0
    output_dir: str = "out/trainer"
    backend: str = "auto"
    device: str = "auto"
    timeout_s: float = 1800.0
    stall_timeout_s: float = 120.0
    compile_cache_dir: Optional[str] = None
    cache_set: str = "default"
    precompile: bool = False
    cache_lock_wait_s: float = 300.0
    s3_endpoint_url: Optional[str] = None
    storage_attempts: int = 8
    storage_backoff_s: float = 0.5
    verbose_ranks: bool = False

    def __post_init__(self):
        self._check_dataset()
        _positive_int("--synthetic-samples", self.synthetic_samples)
        _positive_int("--synthetic-features", self.synthetic_features)
        if isinstance(self.synthetic_classes, bool) or not isinstance(self.synthetic_classes, int) or self.synthetic_classes < 2:
            raise ConfigError("--synthetic-classes", f"expected an integer >= 2, got {self.synthetic_classes!r}")
        if not isinstance(self.test_fraction, (int, float)) or not 0.0 < self.test_fraction < 1.0:
            raise ConfigError("--test-fraction", f"expected a number strictly between 0 and 1, got {self.test_fraction!r}")
        if self.model not in MODELS:
            raise ConfigError("--model", f"expected one of {', '.join(MODELS)}, got {self.model!r}")
        if not self.hidden or any(isinstance(h, bool) or not isinstance(h, int) or h <= 0 for h in self.hidden):
            raise ConfigError("--hidden", f"expected comma-separated positive integers such as 128,64, got {self.hidden!r}")
        self._check_text()
        if self.precision not in PRECISIONS:
            raise ConfigError("--precision", f"expected one of {', '.join(PRECISIONS)}, got {self.precision!r}")
        if self.precision == "tf32" and self.device == "cpu":
            raise ConfigError("--precision", "expected fp32 or bf16 with --device cpu (tf32 is a CUDA matrix mode)")
        if not isinstance(self.compile, bool):
            raise ConfigError("--compile", f"expected true or false, got {self.compile!r}")
        if self.model == "cnn":
            features = {"digits": DIGITS_FEATURES, "synthetic": self.synthetic_features}.get(self.dataset)
            if features is not None and math.isqrt(features) ** 2 != features:
                raise ConfigError("--model", f"cnn expected square images (a square number of features), {self.dataset} has {features}")
        if self.optimizer not in OPTIMIZERS:
            raise ConfigError("--optimizer", f"expected one of {', '.join(OPTIMIZERS)}, got {self.optimizer!r}")
        _positive_float("--lr", self.lr)
        if not isinstance(self.momentum, (int, float)) or not 0.0 <= self.momentum < 1.0:
            raise ConfigError("--momentum", f"expected a number in [0, 1), got {self.momentum!r}")
        if not isinstance(self.weight_decay, (int, float)) or not math.isfinite(self.weight_decay) or self.weight_decay < 0:
            raise ConfigError("--weight-decay", f"expected a number >= 0, got {self.weight_decay!r}")
        _positive_int("--batch-size", self.batch_size, MAX_BATCH_SIZE)
        _positive_int("--epochs", self.epochs, MAX_EPOCHS)
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ConfigError("--seed", f"expected an integer >= 0, got {self.seed!r}")
        _positive_int("--snapshot-every", self.snapshot_every)
        _positive_int("--keep-snapshots", self.keep_snapshots)
        if self.snapshot_dir is not None:
            _check_location("--snapshot-dir", self.snapshot_dir)
        if self.stop_after_epoch is not None:
            if isinstance(self.stop_after_epoch, bool) or not isinstance(self.stop_after_epoch, int) or not 1 <= self.stop_after_epoch <= self.epochs:
                raise ConfigError("--stop-after-epoch", f"expected an integer between 1 and --epochs ({self.epochs}), got {self.stop_after_epoch!r}")
        if isinstance(self.min_epoch_s, bool) or not isinstance(self.min_epoch_s, (int, float)) \
                or not math.isfinite(self.min_epoch_s) or not 0 <= self.min_epoch_s <= MAX_MIN_EPOCH_S:
            raise ConfigError("--min-epoch-s", f"expected a number of seconds in [0, {MAX_MIN_EPOCH_S}], got {self.min_epoch_s!r}")
        _check_location("--output-dir", self.output_dir)
        if self.backend not in BACKENDS:
            raise ConfigError("--backend", f"expected one of {', '.join(BACKENDS)}, got {self.backend!r}")
        if self.device not in DEVICES:
            raise ConfigError("--device", f"expected one of {', '.join(DEVICES)}, got {self.device!r}")
        if self.backend == "nccl" and self.device in ("cpu", "xla"):
            raise ConfigError("--backend", f"expected gloo or auto with --device {self.device} (nccl needs CUDA devices)")
        self._check_xla()
        _positive_float("--timeout-s", self.timeout_s)
        if isinstance(self.stall_timeout_s, bool) or not isinstance(self.stall_timeout_s, (int, float)) \
                or not math.isfinite(self.stall_timeout_s) or not (self.stall_timeout_s == 0 or 10 <= self.stall_timeout_s <= 86400):
            raise ConfigError("--stall-timeout-s", f"expected 0 (off) or a number of seconds in [10, 86400], got {self.stall_timeout_s!r}")
        if isinstance(self.storage_attempts, bool) or not isinstance(self.storage_attempts, int) or not 1 <= self.storage_attempts <= 20:
            raise ConfigError("--storage-attempts", f"expected an integer between 1 and 20, got {self.storage_attempts!r}")
        if isinstance(self.storage_backoff_s, bool) or not isinstance(self.storage_backoff_s, (int, float)) \
                or not math.isfinite(self.storage_backoff_s) or not 0 < self.storage_backoff_s <= 60:
            raise ConfigError("--storage-backoff-s", f"expected a number of seconds in (0, 60], got {self.storage_backoff_s!r}")
        if self.s3_endpoint_url is not None and not self.s3_endpoint_url.startswith(("http://", "https://")):
            raise ConfigError("--s3-endpoint-url", f"expected an http:// or https:// URL, got {self.s3_endpoint_url!r}")

    def _check_xla(self):
        """--device xla and its compile cache (trainer.xla, trainer.compilecache)."""
        if self.backend == "xla" and self.device != "xla":
            raise ConfigError("--backend", f"xla is the XLA runtime's backend: expected --device xla with it, got --device {self.device!r}")
        if self.device == "xla":
            if self.precision != "fp32":
                raise ConfigError("--precision", f"expected fp32 with --device xla (this trainer does not autocast on XLA), "
                                                 f"got {self.precision!r}")
            if self.compile:
                raise ConfigError("--compile", "expected no --compile with --device xla (XLA compiles every step's graph itself)")
        problem = cache_set_problem(self.cache_set)
        if problem:
            raise ConfigError("--cache-set", problem)
        if self.compile_cache_dir is not None:
            if self.device != "xla":
                raise ConfigError("--compile-cache-dir", f"the compile cache holds XLA graphs: expected --device xla with it, "
                                                         f"got --device {self.device!r}")
            if not self.compile_cache_dir or is_s3_uri(self.compile_cache_dir):
                raise ConfigError("--compile-cache-dir", f"expected a directory (a shared volume's mount), got {self.compile_cache_dir!r}")
            reason = check_local_dir_writable(self.compile_cache_dir)
            if reason:
                raise ConfigError("--compile-cache-dir", f"expected a writable directory, {self.compile_cache_dir!r} {reason}")
        if not isinstance(self.precompile, bool):
            raise ConfigError("--precompile", f"expected true or false, got {self.precompile!r}")
        if self.precompile and self.compile_cache_dir is None:
            raise ConfigError("--precompile", "expected --compile-cache-dir (and --device xla): a precompile run fills a cache set")
        if isinstance(self.cache_lock_wait_s, bool) or not isinstance(self.cache_lock_wait_s, (int, float)) \
                or not math.isfinite(self.cache_lock_wait_s) or not 0 <= self.cache_lock_wait_s <= MAX_LOCK_WAIT_S:
            raise ConfigError("--cache-lock-wait-s", f"expected a number of seconds in [0, {MAX_LOCK_WAIT_S}], got {self.cache_lock_wait_s!r}")

    @property
    def compile_cache_path(self):
        """The cache set's directory, or None without --compile-cache-dir."""
        return set_path(self.compile_cache_dir, self.cache_set) if self.compile_cache_dir else None

    def _check_text(self):
        if self.model == "transformer":
            if self.dataset not in TEXT_DATASETS and not self.dataset.startswith("dir:") and not is_s3_uri(self.dataset):
                raise ConfigError("--dataset", f"the transformer reads text: expected one of {', '.join(TEXT_DATASETS)}, "
                                               f"dir:PATH or s3://bucket/prefix (*.txt shards), got {self.dataset!r}")
            if self.model_size not in MODEL_SIZES:
                raise ConfigError("--model-size", f"expected one of {', '.join(MODEL_SIZES)}, got {self.model_size!r}")
            _positive_int("--corpus-bytes", self.corpus_bytes, MAX_CORPUS_BYTES)
            if isinstance(self.seq_len, bool) or not isinstance(self.seq_len, int) or not 8 <= self.seq_len <= MAX_SEQ_LEN:
                raise ConfigError("--seq-len", f"expected an integer between 8 and {MAX_SEQ_LEN}, got {self.seq_len!r}")
        elif self.dataset == "corpus":
            raise ConfigError("--dataset", f"corpus is text: expected --model transformer with it, got --model {self.model!r}")

    def _check_dataset(self):
        value = self.dataset
        if value in ("digits", "synthetic", "corpus"):
            return
        if value.startswith("dir:"):
            path = value[len("dir:"):]
            if not path:
                raise ConfigError("--dataset", "expected dir:PATH with a directory path, got an empty path")
            if not os.path.isdir(path):
                raise ConfigError("--dataset", f"expected dir:PATH to name an existing directory, {path!r} is not one")
            if not os.access(path, os.R_OK | os.X_OK):
                raise ConfigError("--dataset", f"directory {path!r} is not readable")
            suffixes = self.data_suffixes
            files = data_files(path, suffixes)
            if not files:
                raise ConfigError("--dataset", f"directory {path!r} holds no data files ({', '.join('*' + s for s in suffixes)}"
                                               f"{' for --model transformer' if self.model == 'transformer' else ''})")
            unreadable = [f for f in files if not os.access(f, os.R_OK)]
            if unreadable:
                raise ConfigError("--dataset", f"data file {unreadable[0]!r} is not readable")
            return
        if is_s3_uri(value):
            try:
                parse_s3_uri(value)
            except StorageError as exc:
                raise ConfigError("--dataset", str(exc)) from exc
            reason = check_local_dir_writable(self.data_cache_dir)
            if reason:
                raise ConfigError("--data-cache-dir", f"expected a writable directory for s3:// downloads, {self.data_cache_dir!r} {reason}")
            return
        raise ConfigError("--dataset", f"expected {DATASETS_HELP}, got {value!r}")

    @property
    def data_suffixes(self):
        """What a dir:/s3:// dataset's files are: text shards for the transformer, arrays otherwise."""
        return TEXT_SUFFIXES if self.model == "transformer" else DATA_SUFFIXES

    @property
    def uses_s3(self):
        return any(is_s3_uri(v) for v in (self.dataset, self.snapshot_dir, self.output_dir) if v)

    def to_dict(self):
        return asdict(self)


def _hidden_list(text):
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected comma-separated positive integers such as 128,64, got {text!r}") from exc
    return values


def build_parser():
    """The CLI; defaults come from TrainConfig so there is one source of truth."""
    d = TrainConfig.__dataclass_fields__  # pylint: disable=no-member

    def default(name):
        f = d[name]
        return f.default_factory() if callable(f.default_factory) else f.default

    p = argparse.ArgumentParser(prog="python -m trainer.train", description="trainfleet DDP trainer (launch with torchrun or alone).")
    g = p.add_argument_group("data")
    g.add_argument("--dataset", default=default("dataset"), help=f"{DATASETS_HELP} (default: %(default)s)")
    g.add_argument("--data-cache-dir", default=default("data_cache_dir"), help="local cache for s3:// datasets (default: %(default)s)")
    g.add_argument("--synthetic-samples", type=int, default=default("synthetic_samples"), help="synthetic: number of samples (default: %(default)s)")
    g.add_argument("--synthetic-features", type=int, default=default("synthetic_features"), help="synthetic: features per sample (default: %(default)s)")
    g.add_argument("--synthetic-classes", type=int, default=default("synthetic_classes"), help="synthetic: number of classes (default: %(default)s)")
    g.add_argument("--test-fraction", type=float, default=default("test_fraction"), help="held-out fraction, split by --seed (default: %(default)s)")
    g.add_argument("--no-normalize", dest="normalize", action="store_false", help="do not standardise features with the training-set mean/std")
    g = p.add_argument_group("model and optimisation")
    g.add_argument("--model", default=default("model"), help=f"{' | '.join(MODELS)} (default: %(default)s)")
    g.add_argument("--hidden", type=_hidden_list, default=default("hidden"), help="hidden layer sizes, comma-separated (default: 128,64)")
    g.add_argument("--model-size", default=default("model_size"),
                   help=f"transformer: {' | '.join(MODEL_SIZES)} (default: %(default)s)")
    g.add_argument("--seq-len", type=int, default=default("seq_len"), help="transformer: tokens per sequence (default: %(default)s)")
    g.add_argument("--corpus-bytes", type=int, default=default("corpus_bytes"),
                   help="transformer: bytes of text read, of corpus (the stdlib's docstrings hold 1-2 MB) or of *.txt shards (default: %(default)s)")
    g.add_argument("--precision", default=default("precision"),
                   help=f"{' | '.join(PRECISIONS)}; bf16 = bfloat16 autocast, tf32 = TensorFloat-32 matrix products on CUDA (default: %(default)s)")
    g.add_argument("--compile", action="store_true", help="torch.compile the model (needs a C compiler on CPU, Triton on CUDA)")
    g.add_argument("--optimizer", default=default("optimizer"), help=f"{' | '.join(OPTIMIZERS)} (default: %(default)s)")
    g.add_argument("--lr", type=float, default=default("lr"), help="learning rate (default: %(default)s)")
    g.add_argument("--momentum", type=float, default=default("momentum"), help="sgd momentum (default: %(default)s)")
    g.add_argument("--weight-decay", type=float, default=default("weight_decay"), help="weight decay (default: %(default)s)")
    g.add_argument("--batch-size", type=int, default=default("batch_size"), help="per-process batch size (default: %(default)s)")
    g.add_argument("--epochs", type=int, default=default("epochs"), help="total epochs of the run (default: %(default)s)")
    g.add_argument("--seed", type=int, default=default("seed"), help="seed for split, init and shuffling (default: %(default)s)")
    g = p.add_argument_group("snapshots and outputs")
    g.add_argument("--snapshot-dir", default=default("snapshot_dir"), help="directory or s3:// URI for snapshots; resume from it (default: none)")
    g.add_argument("--snapshot-every", type=int, default=default("snapshot_every"), help="snapshot every N epochs (default: %(default)s)")
    g.add_argument("--keep-snapshots", type=int, default=default("keep_snapshots"), help="snapshots kept, older ones deleted (default: %(default)s)")
    g.add_argument("--stop-after-epoch", type=int, default=default("stop_after_epoch"),
                   help="stop cleanly after this epoch and its snapshot, without final outputs (simulates preemption)")
    g.add_argument("--min-epoch-s", type=float, default=default("min_epoch_s"),
                   help="make each epoch last at least this many seconds (a pause before its closing all-reduce), so that "
                        "a fault injected by a test lands mid-run; not counted in epoch_time_s (default: %(default)s)")
    g.add_argument("--output-dir", default=default("output_dir"), help="directory or s3:// URI for model.pt, metrics.jsonl, plot.png (default: %(default)s)")
    g = p.add_argument_group("distributed")
    g.add_argument("--backend", default=default("backend"),
                   help=f"{' | '.join(BACKENDS)}; auto = nccl on GPU, gloo on CPU, xla on an XLA runtime that spans processes "
                        "(default: %(default)s)")
    g.add_argument("--device", default=default("device"), help=f"{' | '.join(DEVICES)} (default: %(default)s)")
    g.add_argument("--timeout-s", type=float, default=default("timeout_s"), help="process group timeout in seconds (default: %(default)s)")
    g.add_argument("--stall-timeout-s", type=float, default=default("stall_timeout_s"),
                   help="a rank that makes no training step for this long (after its first) prints a trainfleet-stall line "
                        "naming the rank that held it up and exits 3, so the group restarts; 0 = off (default: %(default)s)")
    g.add_argument("--s3-endpoint-url", default=default("s3_endpoint_url"), help="S3 endpoint (default: $AWS_ENDPOINT_URL, else AWS)")
    g.add_argument("--storage-attempts", type=int, default=default("storage_attempts"),
                   help="tries per S3 call while the endpoint is unavailable (default: %(default)s)")
    g.add_argument("--storage-backoff-s", type=float, default=default("storage_backoff_s"),
                   help="first wait between S3 tries; doubles each time, capped at 8 s (default: %(default)s)")
    g.add_argument("--verbose-ranks", action="store_true", help="let every rank log, not only rank 0")
    g = p.add_argument_group("XLA compile cache (--device xla)")
    g.add_argument("--compile-cache-dir", default=default("compile_cache_dir"),
                   help="directory (a shared volume) holding compile cache sets; XLA's persistent cache, Neuron's compiler "
                        "cache (default: none)")
    g.add_argument("--cache-set", default=default("cache_set"),
                   help="the cache set in --compile-cache-dir; one job at a time uses a set (a lock) (default: %(default)s)")
    g.add_argument("--precompile", action="store_true",
                   help="compile this run's graphs into the cache set (one epoch, no snapshot, no outputs) and stop")
    g.add_argument("--cache-lock-wait-s", type=float, default=default("cache_lock_wait_s"),
                   help="wait this long for another job's lock on the cache set, then fail naming it; 0 = fail at once "
                        "(default: %(default)s)")
    return p


def parse_config(argv=None):
    """Parse argv into a validated TrainConfig; raises ConfigError (argparse's own errors exit 2 too)."""
    args = build_parser().parse_args(argv)
    return TrainConfig(**vars(args))
