"""The training loop proper (imported by trainer.train only after the arguments are valid).

Order of a run: start the process group, load the data (s3:// is downloaded once per node by local
rank 0), build the model and optimizer, restore the latest snapshot, wrap in DDP, train, snapshot on
global rank 0, write the final model, metrics and plot, print the result line. The process group is
destroyed on every exit path (``launch``).

A snapshot or metrics write that fails (after the storage's retries) does not stop training: rank 0
prints a ``trainfleet-warning:`` line and the next epoch snapshots again, whatever
``--snapshot-every`` says. The final outputs must be written: their failure ends the run (the
restart resumes from the last snapshot and writes them again).
"""

import contextlib
import importlib.util
import math
import random
import shutil
import time

import numpy as np
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from trainer import dist, emit
from trainer.compilecache import CacheLock, job_identity
from trainer.config import ConfigError
from trainer.data import DataError, download_s3_dataset, load_split, s3_cache_path
from trainer.metrics import (METRICS_NAME, MODEL_NAME, PLOT_NAME, compile_line, epoch_line, info_line, metrics_jsonl, plot_png, result_line,
                             resume_line, snapshot_failed_line, snapshot_line, stopped_line, storage_retry_line, warning_line)
from trainer.model import build_model, model_spec
from trainer.snapshot import load_latest, load_snapshot, make_snapshot, save_snapshot, to_bytes
from trainer.storage import Breaker, RetryPolicy, StorageError, is_s3_uri, open_storage
from trainer.tbevents import EventLog
from trainer.watchdog import Watchdog, tcp_store
from trainer.xla import missing_reason as xla_missing


class Logger:  # pylint: disable=too-few-public-methods
    """Rank 0 speaks; other ranks only with --verbose-ranks (prefixed with their rank)."""

    def __init__(self, ctx, verbose):
        self.ctx = ctx
        self.enabled = ctx.is_rank0 or verbose

    def __call__(self, message):
        if self.enabled:
            emit(message if self.ctx.is_rank0 else f"[rank {self.ctx.rank}] {message}")


def seed_everything(seed):
    random.seed(seed)
    np.random.seed(seed % (2 ** 32))
    torch.manual_seed(seed)


def make_optimizer(cfg, params, device=None):
    """The --optimizer; Adam and AdamW use their fused CUDA kernel on a GPU (one launch per step)."""
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)
    fused = {"fused": True} if device is not None and device.type == "cuda" else {}
    if cfg.optimizer == "adam":
        return torch.optim.Adam(params, lr=cfg.lr, weight_decay=cfg.weight_decay, **fused)
    return torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay, **fused)


def set_precision(precision, device):
    """TF32 matrix products on for --precision tf32, off otherwise (fp32 means fp32); returns the context
    each forward pass runs in (bf16: bfloat16 autocast)."""
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
        torch.backends.cudnn.allow_tf32 = precision == "tf32"
    if precision == "bf16":
        return lambda: torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext


# A dataset goes onto the GPU when it takes at most this share of the GPU's free memory; otherwise it
# stays in pinned host memory and each batch is copied without blocking (overlapping the last step).
RESIDENT_SHARE = 0.25


def place_data(split, device, log):
    """Move the split to ``device`` when it fits (RESIDENT_SHARE), else pin it; returns the split."""
    if device.type != "cuda":
        return split
    tensors = ("x_train", "y_train", "x_test", "y_test")
    need = sum(getattr(split, name).nbytes for name in tensors)
    free = torch.cuda.mem_get_info(device)[0]
    resident = need <= free * RESIDENT_SHARE
    for name in tensors:
        tensor = getattr(split, name)
        setattr(split, name, tensor.to(device) if resident else tensor.pin_memory())
    log(info_line(f"dataset {need / 2**20:.1f} MiB " + (f"resident on {device}" if resident else
                                                        f"pinned in host memory ({free / 2**20:.0f} MiB free on {device})")))
    return split


def shard_order(samples, world_size, rank, seed, epoch, device=None):
    """This rank's sample order for an epoch, as a tensor on ``device`` (where the data lives): on the CPU
    the order torch's DistributedSampler gives (shuffle, drop_last False: the permutation is padded from
    its start to a multiple of world_size, and rank r takes every world_size-th index from r), without its
    Python list of every index. On a GPU the permutation is drawn there (seeded the same way, so every
    rank agrees and a resumed run repeats it; a GPU's stream differs from the CPU's)."""
    device = device or torch.device("cpu")
    generator = torch.Generator(device=device)
    generator.manual_seed(seed + epoch)
    order = torch.randperm(samples, generator=generator, device=device)
    total = -(-samples // world_size) * world_size
    if total > samples:
        order = torch.cat([order, order.repeat(-(-(total - samples) // samples))[:total - samples]])
    return order[rank:total:world_size]


def batches(x, y, indices, batch_size, device):
    """(x, y, n) mini-batches of ``indices``: gathered where the data lives, copied to ``device`` (a GPU:
    place_data leaves data elsewhere only in pinned host memory) without blocking when that is elsewhere;
    n is the batch's sample count (a Python int: no device sync)."""
    order = torch.as_tensor(indices, dtype=torch.long).to(x.device)
    for start in range(0, len(indices), batch_size):
        idx = order[start:start + batch_size]
        xb, yb = x.index_select(0, idx), y.index_select(0, idx)
        if xb.device != device:
            xb, yb = (t.pin_memory().to(device, non_blocking=True) for t in (xb, yb))
        yield xb, yb, min(batch_size, len(indices) - start)


def targets_per_sample(y):
    """Targets in one sample: 1 for a class label, seq_len for a language model's next tokens."""
    return int(y[0].numel()) if len(y) else 1


def flat_loss(loss_fn, logits, yb):
    """Mean cross-entropy over every target (a label per sample, or a next token per position)."""
    return loss_fn(logits.reshape(-1, logits.shape[-1]).float(), yb.reshape(-1))


def fetch_data(cfg, ctx, log):
    """Local cache dir of an s3:// dataset (local rank 0 downloads, every rank waits), else None."""
    if not is_s3_uri(cfg.dataset):
        return None
    error = None
    if ctx.local_rank == 0:
        try:
            local, count = download_s3_dataset(cfg.dataset, cfg.data_cache_dir, cfg.s3_endpoint_url, suffixes=cfg.data_suffixes)
            log(info_line(f"dataset {cfg.dataset} cached in {local} ({count} files downloaded)"))
        except Exception as exc:  # pylint: disable=broad-except
            error = exc
    if not dist.all_ok(ctx, error is None):
        raise DataError(f"downloading {cfg.dataset} failed: {error}" if error else f"downloading {cfg.dataset} failed on another node")
    return s3_cache_path(cfg.dataset, cfg.data_cache_dir)


def feed(ctx, x, y, indices, batch_size):
    """batches() on the run's device; on an XLA device through its loader (trainer.xla: copied ahead of
    use, a step boundary after each batch)."""
    if ctx.xla is not None:
        return ctx.xla.feed(batches(x, y, indices, batch_size, torch.device("cpu")))
    return batches(x, y, indices, batch_size, ctx.device)


def evaluate(module, split, ctx, batch_size, loss_fn, autocast=contextlib.nullcontext, watchdog=None, epoch=0):
    """(mean loss, accuracy) over every target of the test set (a language model's: next-token loss and
    accuracy); each rank takes every world_size-th sample. Sums stay on the device until the end."""
    module.eval()
    indices = torch.arange(ctx.rank, len(split.y_test), ctx.world_size)
    per_sample = targets_per_sample(split.y_test)
    sums = torch.zeros(2, dtype=torch.float64, device=ctx.device)
    watchdog = watchdog or Watchdog(0, ctx.rank, ctx.world_size)  # off: beats are no-ops
    after = watchdog.progress.step  # evaluation steps follow the epoch's training steps
    with torch.no_grad():
        for step, (xb, yb, n) in enumerate(feed(ctx, split.x_test, split.y_test, indices, max(batch_size, 256))):
            watchdog.beat(epoch, after + 1 + step)
            with autocast():
                logits = module(xb)
            sums[0] += flat_loss(loss_fn, logits, yb).double() * (n * per_sample)
            sums[1] += (logits.argmax(dim=-1) == yb).sum()
    total_loss, correct = sums.tolist()
    total_loss, correct, count = dist.all_reduce_sum(ctx, [total_loss, correct, float(len(indices) * per_sample)])
    return total_loss / count, correct / count


def storage_policy(cfg):
    return RetryPolicy(attempts=cfg.storage_attempts, base_s=cfg.storage_backoff_s)


def open_store(cfg, uri, log, breaker=None):
    """Storage for ``uri`` whose S3 retries follow --storage-attempts/--storage-backoff-s and are logged."""
    retry = storage_policy(cfg)

    def on_retry(op, where, attempt, delay, exc):
        log(storage_retry_line(op, where, attempt, retry.attempts, delay, exc))

    return open_storage(uri, cfg.s3_endpoint_url, retry=retry, on_retry=on_retry, breaker=breaker)


def restore(cfg, ctx, model, optimizer, log):
    """Load the newest snapshot (chosen by rank 0) into model and optimizer; returns (start_epoch, history)."""
    if not cfg.snapshot_dir:
        return 1, []
    store = open_store(cfg, cfg.snapshot_dir, log)
    snapshot = None
    if ctx.is_rank0:
        name, snapshot = load_latest(store, warn=lambda text: log(warning_line(text)))
    else:
        name = None
    name = dist.broadcast_object(ctx, name)
    if not name:
        log(info_line(f"no snapshot in {store.uri}, starting at epoch 1"))
        return 1, []
    if snapshot is None:
        snapshot = load_snapshot(store, name)
    model.load_state_dict(snapshot["model"])
    optimizer.load_state_dict(snapshot["optimizer"])
    history = [m for m in snapshot["metrics"] if m["epoch"] <= snapshot["epoch"]]
    now = time.time()
    for record in history:  # snapshots of trainers before the event files carry no wall time
        record.setdefault("wall_time", now)
    log(resume_line(snapshot["epoch"], store.join(name), ctx.restart_count))
    written_by = int(snapshot.get("world_size", ctx.world_size))
    if written_by != ctx.world_size:
        log(info_line(world_size_change_note(snapshot["epoch"], written_by, ctx.world_size, cfg.batch_size)))
    return snapshot["epoch"] + 1, history


def world_size_change_note(epoch, before, now, batch_size):
    """What resuming in a world of another size changes: the weights and optimizer state go on, but
    every step now averages another number of samples and each rank's shard is another, so the run is
    no longer bit for bit the one it would have been (docs/runbooks/train.md states the tolerance)."""
    return (f"world size changed: the snapshot of epoch {epoch} was written by {before} processes, this run has {now}; "
            f"a step now averages {now * batch_size} samples, not {before * batch_size} (--batch-size {batch_size} per "
            f"process), so the epochs after {epoch} are not bit for bit those of an unchanged run")


def train_epoch(ddp, optimizer, loss_fn, split, epoch, cfg, ctx, autocast=contextlib.nullcontext, watchdog=None):
    """One pass over this rank's shard; returns (global mean loss, global samples, seconds of work).

    Nothing waits for the device inside the loop: the loss is summed on the device and read once, at the
    end of the epoch (the epoch's time is taken after that read). With --min-epoch-s the epoch is padded
    to that length (pad_epoch) before its all-reduce. The watchdog beats at every step and starts
    watching once the first step is done (the first one may compile or warm up for long)."""
    torch.manual_seed(cfg.seed * 1000003 + epoch)  # stochastic layers: same stream on a resumed run
    ddp.train()
    per_sample = targets_per_sample(split.y_train)
    start = time.monotonic()
    loss_sum = torch.zeros((), dtype=torch.float64, device=ctx.device)
    samples = 0
    order = shard_order(len(split.y_train), ctx.world_size, ctx.rank, cfg.seed, epoch, split.y_train.device)
    watchdog = watchdog or Watchdog(0, ctx.rank, ctx.world_size)  # off: beats are no-ops
    for step, (xb, yb, n) in enumerate(feed(ctx, split.x_train, split.y_train, order, cfg.batch_size)):
        optimizer.zero_grad(set_to_none=True)
        with autocast():
            loss = flat_loss(loss_fn, ddp(xb), yb)
        loss.backward()
        if ctx.xla is not None and ctx.distributed:  # DDP's part on the other devices
            ctx.xla.reduce_gradients(ddp.parameters(), ctx.backend, ctx.world_size)
        optimizer.step()
        loss_sum.add_(loss.detach(), alpha=n * per_sample)
        samples += n
        watchdog.beat(epoch, step + 1)
        if step == 0:
            watchdog.start()
    loss_total = loss_sum.item()
    seconds = time.monotonic() - start
    with watchdog.io("pause"):
        pad_epoch(cfg.min_epoch_s, seconds)
    loss_total, samples = dist.all_reduce_sum(ctx, [loss_total, float(samples)])
    return loss_total / (samples * per_sample), int(samples), seconds


def pad_epoch(min_epoch_s, seconds, sleep=time.sleep):
    """--min-epoch-s: sleep the rest of ``min_epoch_s`` after ``seconds`` of work; returns the pause.

    Every rank pauses before the epoch's closing all-reduce, so the epochs of a padded run last a
    known time (a test can inject a fault mid-run) and a lost peer is still seen at that collective.
    The pause is not part of the returned epoch time, so samples_per_s stays the training rate.
    """
    pause = max(0.0, float(min_epoch_s) - seconds)
    if pause > 0:
        sleep(pause)
    return pause


def write_events(events, history, when, log, start=False):
    """Rank 0: store the TensorBoard event file (trainer.tbevents); returns False after a failure, which is
    only a warning: the next write carries everything."""
    try:
        if start:
            uri = events.start(history)
            if uri:
                log(info_line(f"tensorboard events rebuilt {when} (epochs 1..{history[-1]['epoch']}): {uri}"))
        else:
            events.write(history)
    except (StorageError, OSError) as exc:
        log(warning_line(f"writing the tensorboard event file {when} failed, training goes on: {exc}"))
        return False
    return True


def write_outputs(cfg, ctx, model, spec, history, started, resumed_from, out, serialize=to_bytes):
    """Rank 0: model.pt, metrics.jsonl, plot.png to --output-dir (storage ``out``); returns the result dict.

    resumed_from_epoch: the epoch of the snapshot this process resumed from (0: started fresh).
    restarts: torchrun's restarts of this node's worker group (TORCHELASTIC_RESTART_COUNT); a pod or
    container restart starts a new count (pytorchjob_info reports those per replica).
    """
    last = history[-1]
    model_uri = out.write_bytes(MODEL_NAME, serialize({
        "format": 1, "model_spec": spec, "state_dict": model.state_dict(), "epoch": last["epoch"],
        "test_acc": last["test_acc"], "test_loss": last["test_loss"], "world_size": ctx.world_size, "config": cfg.to_dict(),
    }))
    metrics_uri = out.write_bytes(METRICS_NAME, metrics_jsonl(history))
    plot_uri = out.write_bytes(PLOT_NAME, plot_png(history, title=f"trainfleet: {cfg.model} on {cfg.dataset}"))
    this_run = [r for r in history if r["epoch"] > resumed_from]
    return {
        "final_accuracy": last["test_acc"],
        "final_loss": last["loss"],
        "final_test_loss": last["test_loss"],
        "epochs": last["epoch"],
        "model_uri": model_uri,
        "metrics_uri": metrics_uri,
        "plot_uri": plot_uri,
        "world_size": ctx.world_size,
        "duration_s": round(time.monotonic() - started, 3),
        "resumed_from_epoch": resumed_from,
        "restarts": ctx.restart_count,
        "dataset": cfg.dataset,
        "samples_per_s": (sum(r["samples_per_s"] for r in this_run) / len(this_run)) if this_run else None,
        **({"final_perplexity": math.exp(min(last["test_loss"], 700.0))} if spec["name"] == "transformer" else {}),
    }


def run(cfg, ctx):
    """Train; returns the process exit code."""
    started = time.monotonic()
    log = Logger(ctx, cfg.verbose_ranks)
    split = load_split(cfg, fetch_data(cfg, ctx, log))
    log(info_line(f"dataset={cfg.dataset} train={len(split.y_train)} test={len(split.y_test)} "
                  f"features={split.num_features} classes={split.num_classes} backend={ctx.backend} device={ctx.device} "
                  f"precision={cfg.precision} compile={str(cfg.compile).lower()}"))
    if cfg.model == "cnn" and split.image_side is None:
        raise ConfigError("--model", f"cnn needs square images, {cfg.dataset} has {split.num_features} features")
    split = place_data(split, ctx.device, log)
    autocast = set_precision(cfg.precision, ctx.device)

    seed_everything(cfg.seed)  # same initial weights on every rank
    spec = model_spec(cfg.model, split.num_features, split.num_classes, cfg.hidden, split.image_side,
                      size=cfg.model_size if cfg.model == "transformer" else None)
    model = build_model(spec).to(ctx.device)
    optimizer = make_optimizer(cfg, model.parameters(), ctx.device)
    # before DDP wraps the model; a precompile run neither resumes nor snapshots: it only compiles
    start_epoch, history = (1, []) if cfg.precompile else restore(cfg, ctx, model, optimizer, log)
    resumed_from = start_epoch - 1
    ddp = model
    if ctx.distributed and ctx.xla is None:  # on XLA, trainer.xla sums the gradients
        ddp = DistributedDataParallel(model, device_ids=[ctx.local_rank] if ctx.device.type == "cuda" else None)
    if cfg.compile:  # the step compiles; model (not its compiled wrapper) keeps the state_dict names
        ddp = torch.compile(ddp)
    loss_fn = nn.CrossEntropyLoss()
    # one breaker for both: after a write that failed every try, the epoch's other writes try once (storage.Breaker)
    breaker = Breaker(storage_policy(cfg).max_total_s())
    snapshots = open_store(cfg, cfg.snapshot_dir, log, breaker) if cfg.snapshot_dir and ctx.is_rank0 and not cfg.precompile else None
    serialize = ctx.xla.to_bytes if ctx.xla is not None else to_bytes
    outputs = open_store(cfg, cfg.output_dir, log, breaker) if ctx.is_rank0 else None
    events = EventLog(outputs) if ctx.is_rank0 else None
    events_owed = bool(events) and not write_events(events, history, "from the restored history", log, start=True)
    snapshot_owed = False  # the last snapshot failed: the next epoch snapshots whatever --snapshot-every says
    watchdog = Watchdog(cfg.stall_timeout_s, ctx.rank, ctx.world_size, store=tcp_store() if ctx.distributed else None,
                        emit=emit)
    try:
        for epoch in range(start_epoch, cfg.epochs + 1):
            loss, samples, seconds = train_epoch(ddp, optimizer, loss_fn, split, epoch, cfg, ctx, autocast, watchdog)
            test_loss, test_acc = evaluate(model, split, ctx, cfg.batch_size, loss_fn, autocast, watchdog, epoch)
            if not math.isfinite(loss):
                raise FloatingPointError(f"training loss is {loss} at epoch {epoch}; lower --lr")
            history.append({"epoch": epoch, "loss": loss, "test_loss": test_loss, "test_acc": test_acc,
                            "samples_per_s": samples / seconds if seconds > 0 else 0.0, "epoch_time_s": seconds,
                            "samples": samples, "world_size": ctx.world_size, "lr": optimizer.param_groups[0]["lr"],
                            "wall_time": time.time()})
            if ctx.xla is not None and epoch == start_epoch:  # every graph of the run has been compiled by now
                log(compile_line({"device": f"xla:{ctx.xla.device_type}", "precompile": cfg.precompile,
                                  "cache_set": cfg.cache_set if cfg.compile_cache_dir else None, **ctx.xla.compile_stats()}))
            if cfg.precompile:
                log(stopped_line(epoch, "--precompile"))
                finish_together(ctx, None)
                return 0
            stopping = cfg.stop_after_epoch == epoch
            if ctx.is_rank0:
                with watchdog.io("epoch outputs"):  # the other ranks wait in the next collective
                    log(epoch_line(history[-1]))
                    try:
                        outputs.write_bytes(METRICS_NAME, metrics_jsonl(history))
                    except (StorageError, OSError) as exc:
                        log(warning_line(f"writing {METRICS_NAME} after epoch {epoch} failed, training goes on: {exc}"))
                    events_owed = not write_events(events, history, f"after epoch {epoch}", log)
                    if snapshots and (snapshot_owed or epoch % cfg.snapshot_every == 0 or epoch == cfg.epochs or stopping):
                        try:
                            uri = save_snapshot(snapshots, make_snapshot(epoch, model, optimizer, history, spec, ctx.world_size),
                                                cfg.keep_snapshots, warn=lambda text: log(warning_line(text)), serialize=serialize)
                        except (StorageError, OSError) as exc:
                            snapshot_owed = True
                            log(snapshot_failed_line(epoch, exc))
                        else:
                            snapshot_owed = False
                            log(snapshot_line(epoch, uri))
            if stopping:
                log(stopped_line(epoch, "--stop-after-epoch"))
                finish_together(ctx, None)
                return 0

        if not history:
            raise RuntimeError("no epoch was trained and no snapshot holds metrics")
        error = None
        breaker.close()  # the final outputs get every try
        with watchdog.io("final outputs"):
            if events_owed:
                write_events(events, history, "with the final outputs", log)
            if ctx.is_rank0:
                try:
                    log(result_line(write_outputs(cfg, ctx, model, spec, history, started, resumed_from, outputs, serialize)))
                except Exception as exc:  # pylint: disable=broad-except
                    error = exc
        finish_together(ctx, error)
        return 0
    finally:
        watchdog.stop()


def finish_together(ctx, error):
    """Every rank waits here until rank 0 has written its outputs, so that all ranks end alike.

    ``error`` (rank 0's, if writing failed) is raised after the wait on rank 0; the other ranks fail
    with a RuntimeError saying so, instead of exiting 0 beside a failed rank 0.
    """
    ok = dist.all_ok(ctx, error is None)
    if error is not None:
        raise error
    if not ok:
        raise RuntimeError("rank 0 could not write the final outputs (its log says why)")


def check_environment(cfg):
    """Checks that need torch but no process group: backend/device choice, bf16 and torch.compile on the
    chosen device. Raises ConfigError."""
    try:
        use_cuda = dist.choose_backend(cfg.backend, cfg.device, torch.cuda.is_available())[1]
    except RuntimeError as exc:
        raise ConfigError("--backend" if "backend" in str(exc) else "--device", f"expected a usable backend/device: {exc}") from exc
    if cfg.precision == "tf32" and not use_cuda:
        raise ConfigError("--precision", "tf32 is a CUDA matrix mode and this run is on the CPU: expected fp32 or bf16")
    if cfg.precision == "bf16" and use_cuda and not torch.cuda.is_bf16_supported():
        raise ConfigError("--precision", f"bf16 expected a GPU that supports bfloat16; {torch.cuda.get_device_name()} does not")
    if cfg.device == "xla":
        reason = xla_missing()
        if reason:
            raise ConfigError("--device", f"xla cannot run here: {reason}")
    if cfg.compile:
        reason = compile_unsupported(use_cuda)
        if reason:
            raise ConfigError("--compile", f"torch.compile cannot run here: {reason}")


def compile_unsupported(use_cuda, which=shutil.which, find_spec=importlib.util.find_spec):
    """Why torch.compile's default backend (inductor) cannot run on this device, or None: it generates
    Triton kernels on CUDA and C++ on the CPU (a compiler must be on the PATH)."""
    if not hasattr(torch, "compile"):
        return f"torch {torch.__version__} has no torch.compile"
    if use_cuda:
        return None if find_spec("triton") else "the triton package is not installed (inductor's CUDA kernels need it)"
    if not any(which(cc) for cc in ("cc", "gcc", "clang")):
        return "no C compiler (cc, gcc or clang) on the PATH (inductor's CPU kernels need one)"
    return None


def hold_cache_set(cfg):
    """The compile cache set's lock, held for this job (trainer.compilecache), or None without a cache.
    Taken before the runtime starts: nothing is compiled into a set another job is using."""
    if not cfg.compile_cache_dir:
        return None
    rank0 = dist.env_ranks()[0] == 0
    lock = CacheLock(cfg.compile_cache_dir, cfg.cache_set, job_identity(), wait_s=cfg.cache_lock_wait_s,
                     emit=lambda text: emit(info_line(text)) if rank0 else None)
    waited = lock.acquire()
    if rank0:
        emit(info_line(f"compile cache set {cfg.cache_set!r} held by job {lock.job!r} after {waited:.1f}s: "
                       f"{cfg.compile_cache_path}"))
    return lock


def launch(cfg):
    """Hold the compile cache set (if any), start the process group, print the rank line, train; always
    destroy the group. Returns the exit code. Rank 0 releases the cache set after a run that ended well;
    a failed job's lock goes stale (trainer.compilecache) unless its restart takes it up again."""
    lock = hold_cache_set(cfg)
    code = 1
    try:
        ctx = dist.init(cfg)
        emit(ctx.rank_line())
        code = run(cfg, ctx)
        return code
    finally:
        if not dist.shutdown():
            emit(warning_line(f"the process group's teardown did not end within {dist.SHUTDOWN_WAIT_S:g}s; exiting anyway"))
        if lock is not None:
            lock.release(remove=code == 0 and dist.env_ranks()[0] == 0)
