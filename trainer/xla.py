"""``--device xla``: the trainer on torch_xla's PJRT runtime, the code path torch-neuronx runs on Trainium.

What changes against the CPU/CUDA path (trainer.loop asks this module for each):

- the device is the runtime's (``xla:0``); tensors on it are lazy: operations build a graph that
  runs at a step boundary. The loader (torch_xla's MpDeviceLoader over the trainer's batches) copies
  each batch to the device in a background thread and marks a step after each one, so one training
  step is one graph, compiled once per shape and then reused;
- gradients are summed across ranks here, not by DDP (which cannot wrap a lazy module):
  - backend ``xla``: the runtime spans every process (NeuronCores, TPU chips, GPUs under torchrun),
    so the all-reduce is part of the step's graph (xm.all_reduce), as torch-neuronx's examples do;
  - backend ``gloo``: the CPU runtime gives each process a device of its own and no collectives
    between processes, so the gradients travel through the host: one flat buffer per step,
    all-reduced by gloo and copied back (what this machine's tests run);
- snapshots and model.pt are written through xm.save (tensors moved to the CPU first), so they
  load anywhere, with or without torch_xla;
- the compile cache: XLA's persistent compilation cache in ``--compile-cache-dir/--cache-set``
  (initialised before the first computation); on Neuron, NEURON_COMPILE_CACHE_URL names the same
  directory for the Neuron compiler. trainer.compilecache holds its lock.

torch_xla must match torch exactly (2.6 with 2.6): scripts/xla-requirements.txt pins the pair the
tests run in a virtual environment of their own.
"""

import io
import os

import torch
import torch.distributed as torch_dist

# The Neuron compiler's cache location (read by torch-neuronx's compiler when it compiles a graph).
NEURON_CACHE_ENV = "NEURON_COMPILE_CACHE_URL"


def missing_reason(find_spec=None):
    """Why --device xla cannot run in this Python (torch_xla absent), or None."""
    import importlib.util  # pylint: disable=import-outside-toplevel

    find_spec = find_spec or importlib.util.find_spec
    if find_spec("torch_xla") is None:
        return (f"the torch_xla package is not installed in this Python (it must match torch {torch.__version__} "
                f"exactly; scripts/xla-requirements.txt pins a working pair)")
    return None


class XlaRuntime:
    """The PJRT runtime of this process; ``cache_path`` (a cache set's directory) is set up first."""

    def __init__(self, cache_path=None):
        # torch_xla imports torch's inductor, which starts a pool of compile workers (2 processes per rank)
        # unless told to compile in-process; XLA never uses them.
        os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
        if cache_path:
            os.makedirs(cache_path, exist_ok=True)
            os.environ.setdefault(NEURON_CACHE_ENV, cache_path)
        # pylint: disable=import-outside-toplevel
        import torch_xla.core.xla_model as xm
        import torch_xla.debug.metrics as met
        import torch_xla.distributed.parallel_loader as pl
        import torch_xla.runtime as xr

        self._xm, self._met, self._pl = xm, met, pl
        self.device_type = xr.device_type() or "CPU"
        self.cache_path = cache_path
        if cache_path and self.device_type != "NEURON":
            xr.initialize_cache(cache_path, readonly=False)
        self.device = torch.device(str(xm.xla_device()))

    @property
    def spans_processes(self):
        """True when the runtime's collectives reach every process (all but the CPU runtime)."""
        return self.device_type != "CPU"

    def backend(self, requested):
        """The process group's backend: auto = xla where the runtime spans processes, else gloo."""
        if requested == "auto":
            return "xla" if self.spans_processes else "gloo"
        if requested == "xla" and not self.spans_processes:
            raise RuntimeError("--backend xla needs a runtime whose collectives span processes (NeuronCores, TPU, "
                               "GPU); the XLA CPU runtime has none: use --backend gloo or auto")
        return requested

    @staticmethod
    def register_backend():
        """Make 'xla' a torch.distributed backend (torch_xla registers it on import)."""
        import torch_xla.distributed.xla_backend  # noqa: F401 pylint: disable=import-outside-toplevel,unused-import

    def feed(self, batches):
        """The batches, copied to the device ahead of use, with a step boundary after each."""
        return self._pl.MpDeviceLoader(batches, self._xm.xla_device())

    def reduce_gradients(self, params, backend, world_size):
        """Average the gradients over the ranks (the job DDP does on the other devices)."""
        grads = [p.grad for p in params if p.grad is not None]
        if world_size <= 1 or not grads:
            return
        if backend == "xla":
            self._xm.all_reduce(self._xm.REDUCE_SUM, grads, scale=1.0 / world_size)
            return
        flat = torch.cat([g.reshape(-1) for g in grads]).cpu()  # runs the step's graph up to here
        torch_dist.all_reduce(flat)
        flat = flat.div_(world_size).to(grads[0].device)
        offset = 0
        for grad in grads:
            count = grad.numel()
            grad.copy_(flat[offset:offset + count].view_as(grad))
            offset += count

    def to_bytes(self, obj):
        """torch.save bytes of ``obj`` with every device tensor moved to the CPU (xm.save)."""
        buffer = io.BytesIO()
        self._xm.save(obj, buffer, master_only=False)
        return buffer.getvalue()

    def compile_stats(self):
        """Graphs compiled so far in this process, their compile seconds and persistent-cache hits/misses."""
        data = self._met.metric_data("CompileTime")
        count, total_ns = (data[0], data[1]) if data else (0, 0.0)
        return {"graphs_compiled": int(count), "compile_s": round(total_ns / 1e9, 3),
                "cache_hits": int(self._met.counter_value("PersistentCacheHit") or 0),
                "cache_misses": int(self._met.counter_value("PersistentCacheMiss") or 0)}
