"""Debian's torch, mended at image build time: plain torchrun without libuv, and a lost pod that leaves
the rendezvous open for the pods that stay.

Run as root during the image build (trainer/Dockerfile), ``patch`` applies each patch that this
torch needs and ``check`` proves plain torchrun and an in-place rejoin after SIGTERM. Every patch is anchored on exact lines that must
match exactly once, so a torch this script does not know fails the build instead of going
unpatched; a second run changes nothing.

libuv
    Debian's python3-torch (2.6 in trixie, the trainer image's) is built without libuv, but since
    torch 2.4 ``torch.distributed.TCPStore`` asks for libuv unless told otherwise, and several
    callers never tell it: torchrun's rendezvous (c10d, static, dynamic) and every worker's
    ``init_process_group`` under torchrun (the agent-store client in
    ``rendezvous._create_c10d_store``). Each fails with "use_libuv was requested but PyTorch was
    build without libuv support", so plain torchrun cannot start any worker (an open upstream bug;
    the ``USE_LIBUV`` variable only reaches some of those callers). When, and only when, the
    installed torch has no libuv, this redefines ``TCPStore`` in torch/distributed/__init__.py,
    right after torch imports it, as a subclass whose ``use_libuv`` defaults to
    ``USE_LIBUV == "1"`` (unset: no libuv). Every module that later binds
    ``torch.distributed.TCPStore`` gets it.

rendezvous
    In torch 2.6 an elastic agent (torchrun) that receives SIGTERM - what the kubelet sends when a
    pod is deleted, evicted or its node drained - shuts its workers down and then *closes* the
    c10d rendezvous for every node. The nodes that stay cannot re-form the world: their agents end
    with RendezvousClosedError, their containers restart, and each restart counts against the
    PyTorchJob's backoffLimit, so one lost pod can fail a job that was built to survive it (seen in
    our fault proof; upstream pytorch issues 67742, 147064, 150916). Later torch (2.15, this repo's
    test venv) never closes the rendezvous from the agent. This patch makes torch 2.6 do the same
    for a death signal only: the stopped agent still stops its workers, and leaves the rendezvous
    open, so the survivors' agents restart their workers in place and re-form the world with the
    replacement pod, without a container restart. A run that ends by itself (success or failure)
    still closes it, as before. Applied when the agent's ``run`` and ``_shutdown`` have the lines
    below; left alone on a torch whose agent no longer closes the rendezvous.

    The rejoin also needs ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1`` (the image's ENV; the pytorchjob
    role sets it in elastic pods): with torch's shared store only an agent's first round publishes
    the workers' store address, and the replacement, joining the survivor's second round, waits
    for it until the store timeout (torch 2.6 and 2.15 alike). ``check`` fails without either.
"""

import os
import queue
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path

LIBUV_MARK = "# trainfleet: TCPStore without libuv (trainer/image/torch_patches.py)"
LIBUV_ANCHOR = "        TCPStore,\n        Work as _Work,\n    )\n"
LIBUV_PATCH = f"""
    {LIBUV_MARK}
    class TCPStore(TCPStore):  # type: ignore[no-redef]  # pylint: disable=function-redefined
        __doc__ = TCPStore.__doc__

        def __init__(self, *args, **kwargs):
            if len(args) < 9:  # use_libuv is the ninth parameter
                kwargs.setdefault("use_libuv", __import__("os").environ.get("USE_LIBUV") == "1")
            super().__init__(*args, **kwargs)

"""

RDZV_MARK = "# trainfleet: a stopped agent leaves the rendezvous open (trainer/image/torch_patches.py)"
# SimpleElasticAgent.run (agent/server/api.py): the death-signal branch, and what it becomes.
# is_restart=True is the agent's own way of stopping its workers without closing the rendezvous
# (what it does between two rounds).
RDZV_ANCHOR = ('            logger.warning("Received %s death signal, shutting down workers", e.sigval)\n'
               "            self._shutdown(e.sigval)\n")
RDZV_PATCH = ('            logger.warning("Received %s death signal, shutting down workers", e.sigval)\n'
              f"            {RDZV_MARK}\n"
              "            self._shutdown(e.sigval, is_restart=True)\n")
# LocalElasticAgent._shutdown (agent/server/local_elastic_agent.py): the close the patch avoids.
RDZV_CLOSE = "        if not is_restart and self._rdzv_handler:\n            self._rdzv_handler.shutdown()\n"


class PatchError(Exception):
    pass


def insert_once(text, anchor, patch, mark, what):
    """``text`` with ``anchor`` replaced by ``patch`` (exactly one copy); unchanged if ``mark`` is there."""
    if mark in text:
        return text
    if text.count(anchor) != 1:
        raise PatchError(f"{what} has {text.count(anchor)} copies of the lines this patch changes "
                         f"(needs exactly 1): a torch this script does not know")
    return text.replace(anchor, patch, 1)


def patch_text(text):
    """torch/distributed/__init__.py with the TCPStore patch after the import; unchanged if patched."""
    return insert_once(text, LIBUV_ANCHOR, LIBUV_ANCHOR + LIBUV_PATCH, LIBUV_MARK,
                       "torch/distributed/__init__.py")


def rendezvous_text(api_text, local_agent_text):
    """agent/server/api.py patched so a death signal leaves the rendezvous open, or None when this
    torch's agent does not close it on shutdown (nothing to do)."""
    if RDZV_MARK not in api_text and RDZV_CLOSE not in local_agent_text:
        return None
    if local_agent_text.count(RDZV_CLOSE) != 1:
        raise PatchError(f"agent/server/local_elastic_agent.py has {local_agent_text.count(RDZV_CLOSE)} "
                         "copies of the rendezvous close (needs exactly 1): a torch this script does not know")
    return insert_once(api_text, RDZV_ANCHOR, RDZV_PATCH, RDZV_MARK, "agent/server/api.py")


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


def _write(path, text, new):
    if new != text:
        path.write_text(new, encoding="utf-8")


def patch_libuv():
    import torch.distributed as dist  # pylint: disable=import-outside-toplevel
    path = Path(dist.__file__)
    if has_libuv():
        print(f"torch_patches: this torch has libuv, {path} left as it is")
        return
    text = path.read_text(encoding="utf-8")
    _write(path, text, patch_text(text))
    print(f"torch_patches: {path}: TCPStore defaults to use_libuv=False")


def patch_rendezvous():
    from torch.distributed.elastic.agent.server import (  # pylint: disable=import-outside-toplevel
        api, local_elastic_agent)
    api_path, local_path = Path(api.__file__), Path(local_elastic_agent.__file__)
    text = api_path.read_text(encoding="utf-8")
    new = rendezvous_text(text, local_path.read_text(encoding="utf-8"))
    if new is None:
        print(f"torch_patches: this torch's agent never closes the rendezvous, {api_path} left as it is")
        return
    _write(api_path, text, new)
    print(f"torch_patches: {api_path}: a death signal leaves the rendezvous open")


def patch():
    patch_libuv()
    patch_rendezvous()


def worker():
    import torch  # pylint: disable=import-outside-toplevel
    import torch.distributed as dist  # pylint: disable=import-outside-toplevel
    dist.init_process_group("gloo")
    value = torch.ones(1)
    dist.all_reduce(value)
    assert value.item() == dist.get_world_size() == 2, value
    dist.destroy_process_group()


def rejoin_worker():
    """A worker that all-reduces until the file named by TORCH_PATCHES_STOP exists on any rank."""
    import torch  # pylint: disable=import-outside-toplevel
    import torch.distributed as dist  # pylint: disable=import-outside-toplevel
    dist.init_process_group("gloo")
    restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "?")
    print(f"{REJOIN_LINE} rank={dist.get_rank()} world={dist.get_world_size()} restart={restart}", flush=True)
    stop = Path(os.environ["TORCH_PATCHES_STOP"])
    while True:
        flag = torch.tensor([1.0 if stop.exists() else 0.0])
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        if flag.item() > 0:
            break
        time.sleep(0.1)
    dist.destroy_process_group()


REJOIN_LINE = "torch_patches-rejoin"


class _Agent:
    """One torchrun agent of the rejoin check, its output read line by line on a thread."""

    def __init__(self, name, port, env):
        self.name = name
        self.lines = queue.Queue()
        self.seen = []
        cmd = ["torchrun", "--nnodes", "1:2", "--nproc_per_node", "1", "--rdzv_backend", "c10d",
               "--rdzv_endpoint", f"127.0.0.1:{port}", "--rdzv_id", "torch-patches-check",
               "--rdzv_conf", "last_call_timeout=1", "--local_addr", "127.0.0.1",
               "--max_restarts", "1", "--monitor_interval", "0.2", __file__, "rejoin-worker"]
        self.proc = subprocess.Popen(  # pylint: disable=consider-using-with
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def expect(self, want, deadline):
        """Wait for a line of rejoin_worker's that ends with ``want``; PatchError with the output if not."""
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.5)
            except queue.Empty:
                if self.proc.poll() is not None and self.lines.empty():
                    break
                continue
            self.seen.append(line)
            if line.startswith(REJOIN_LINE) and line.endswith(want):
                return
        tail = "\n".join(self.seen[-25:])
        raise PatchError(f"rejoin check: agent {self.name} never printed '{want}' (exit code "
                         f"{self.proc.poll()}); its last lines:\n{tail}")


def check_rejoin(budget_s=240):
    """Two elastic agents (c10d, 1:2 nodes) train; the one that does not host the store gets
    SIGTERM, as a deleted pod's torchrun does, and a new agent takes its place. The one that stays
    must re-form a world of 2 by restarting its worker in place (TORCHELASTIC_RESTART_COUNT=1), its
    agent never exiting; then both finish with exit code 0."""
    deadline = time.monotonic() + budget_s
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, TORCH_PATCHES_STOP=os.path.join(tmp, "stop"), OMP_NUM_THREADS="1")
        agents = []
        try:
            stays = _Agent("that stays", port, env)
            agents.append(stays)
            while time.monotonic() < deadline:  # the first agent hosts the store: wait for it
                with socket.socket() as probe:
                    if probe.connect_ex(("127.0.0.1", port)) == 0:
                        break
                time.sleep(0.2)
            leaves = _Agent("that leaves", port, env)
            agents.append(leaves)
            stays.expect("world=2 restart=0", deadline)
            leaves.expect("world=2 restart=0", deadline)
            leaves.proc.send_signal(signal.SIGTERM)
            leaves.proc.wait(timeout=max(1, deadline - time.monotonic()))
            joins = _Agent("that joins", port, env)
            agents.append(joins)
            stays.expect("world=2 restart=1", deadline)
            joins.expect("world=2 restart=0", deadline)
            Path(env["TORCH_PATCHES_STOP"]).touch()
            for agent in (stays, joins):
                code = agent.proc.wait(timeout=max(1, deadline - time.monotonic()))
                if code != 0:
                    raise PatchError(f"rejoin check: agent {agent.name} ended with exit code {code}")
        except subprocess.TimeoutExpired as exc:
            raise PatchError(f"rejoin check: {exc}") from exc
        finally:
            for agent in agents:
                if agent.proc.poll() is None:
                    agent.proc.kill()
                    agent.proc.wait()


def check():
    cmd = ["torchrun", "--standalone", "--nproc_per_node", "2", "--max_restarts", "0", __file__, "worker"]
    subprocess.run(cmd, check=True, timeout=300)
    print("torch_patches: plain torchrun, 2 workers, gloo all_reduce: ok")
    started = time.monotonic()
    check_rejoin()
    print(f"torch_patches: an agent stopped with SIGTERM left the rendezvous open; the one that stayed "
          f"re-formed a world of 2 with a new agent in place ({time.monotonic() - started:.0f} s): ok")


def main(argv):
    actions = {"patch": patch, "check": check, "worker": worker, "rejoin-worker": rejoin_worker}
    if len(argv) != 1 or argv[0] not in actions:
        print(f"usage: {os.path.basename(__file__)} patch|check", file=sys.stderr)
        return 2
    try:
        actions[argv[0]]()
    except PatchError as exc:
        print(f"torch_patches: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
