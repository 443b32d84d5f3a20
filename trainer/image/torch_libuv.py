"""Debian's torch without libuv: make its TCPStore default to the backend it has, then prove torchrun.

Debian's python3-torch (2.6 in trixie, the trainer image's) is built without libuv, but since torch
2.4 ``torch.distributed.TCPStore`` asks for libuv unless told otherwise, and several callers never
tell it: torchrun's rendezvous (c10d, static, dynamic) and every worker's ``init_process_group``
under torchrun (the agent-store client in ``rendezvous._create_c10d_store``). Each fails with "use_libuv
was requested but PyTorch was build without libuv support", so plain torchrun cannot start any
worker (an open upstream bug; the ``USE_LIBUV`` variable only reaches some of those callers).

Run as root during the image build (trainer/Dockerfile), this script:
  patch  - when, and only when, the installed torch has no libuv, redefines ``TCPStore`` in
           torch/distributed/__init__.py, right after torch imports it, as a subclass whose
           ``use_libuv`` defaults to ``USE_LIBUV == "1"`` (unset: no libuv). Every module that
           later binds ``torch.distributed.TCPStore`` gets it. The anchor must match exactly once,
           so a different torch fails the build instead of going unpatched. A second run changes
           nothing.
  check  - runs ``torchrun --standalone --nproc_per_node 2`` of this file's worker: rendezvous,
           ``init_process_group("gloo")`` and an all_reduce, as any tutorial script does.
"""

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

MARK = "# trainfleet: TCPStore without libuv (trainer/image/torch_libuv.py)"
ANCHOR = "        TCPStore,\n        Work as _Work,\n    )\n"
PATCH = f"""
    {MARK}
    class TCPStore(TCPStore):  # type: ignore[no-redef]  # pylint: disable=function-redefined
        __doc__ = TCPStore.__doc__

        def __init__(self, *args, **kwargs):
            if len(args) < 9:  # use_libuv is the ninth parameter
                kwargs.setdefault("use_libuv", __import__("os").environ.get("USE_LIBUV") == "1")
            super().__init__(*args, **kwargs)

"""


class PatchError(Exception):
    pass


def patch_text(text):
    """``text`` (torch/distributed/__init__.py) with the patch after the import; unchanged if patched."""
    if MARK in text:
        return text
    if text.count(ANCHOR) != 1:
        raise PatchError(f"torch/distributed/__init__.py has {text.count(ANCHOR)} copies of the import "
                         f"this patch follows (needs exactly 1): a torch this script does not know")
    return text.replace(ANCHOR, ANCHOR + PATCH, 1)


def has_libuv():
    import torch.distributed as dist  # pylint: disable=import-outside-toplevel
    try:
        dist.TCPStore("127.0.0.1", 0, is_master=True, use_libuv=True, wait_for_workers=False,
                      timeout=timedelta(seconds=5))
    except RuntimeError as exc:
        if "libuv" in str(exc):
            return False
        raise
    return True


def patch():
    import torch.distributed as dist  # pylint: disable=import-outside-toplevel
    path = Path(dist.__file__)
    if has_libuv():
        print(f"torch_libuv: this torch has libuv, {path} left as it is")
        return
    text = path.read_text(encoding="utf-8")
    new = patch_text(text)
    if new != text:
        path.write_text(new, encoding="utf-8")
    print(f"torch_libuv: {path}: TCPStore defaults to use_libuv=False")


def worker():
    import torch  # pylint: disable=import-outside-toplevel
    import torch.distributed as dist  # pylint: disable=import-outside-toplevel
    dist.init_process_group("gloo")
    value = torch.ones(1)
    dist.all_reduce(value)
    assert value.item() == dist.get_world_size() == 2, value
    dist.destroy_process_group()


def check():
    cmd = ["torchrun", "--standalone", "--nproc_per_node", "2", "--max_restarts", "0", __file__, "worker"]
    subprocess.run(cmd, check=True, timeout=300)
    print("torch_libuv: plain torchrun, 2 workers, gloo all_reduce: ok")


def main(argv):
    actions = {"patch": patch, "check": check, "worker": worker}
    if len(argv) != 1 or argv[0] not in actions:
        print(f"usage: {os.path.basename(__file__)} patch|check", file=sys.stderr)
        return 2
    try:
        actions[argv[0]]()
    except PatchError as exc:
        print(f"torch_libuv: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
