"""trainer/image/torch_patches.py: the image build's patches of Debian's torch (no libuv; the rendezvous on SIGTERM)."""

from datetime import timedelta

import pytest
import torch.distributed as dist

from trainer.image import torch_patches

# The lines of torch/distributed/__init__.py (torch 2.6) around the import the patch follows.
INIT = ("if is_available():\n    from torch._C._distributed_c10d import (\n        Store,\n"
        + torch_patches.LIBUV_ANCHOR + "\n    class _DistributedPdb(pdb.Pdb):\n        pass\n")


def test_patch_goes_right_after_the_import_once():
    patched = torch_patches.patch_text(INIT)
    head, tail = patched.split(torch_patches.LIBUV_ANCHOR)
    assert head == INIT.split(torch_patches.LIBUV_ANCHOR, maxsplit=1)[0]
    assert tail.startswith("\n    " + torch_patches.LIBUV_MARK + "\n    class TCPStore(TCPStore):")
    assert tail.endswith("\n    class _DistributedPdb(pdb.Pdb):\n        pass\n")
    assert torch_patches.patch_text(patched) == patched  # a second run changes nothing
    compile(patched, "__init__.py", "exec")


@pytest.mark.parametrize("text", ["", INIT.replace("Work as _Work", "Work"), INIT + torch_patches.LIBUV_ANCHOR])
def test_an_unknown_torch_fails_instead_of_going_unpatched(text):
    with pytest.raises(torch_patches.PatchError, match="needs exactly 1"):
        torch_patches.patch_text(text)


def _patched_class():
    """The patch's TCPStore, defined over this torch's TCPStore the way the patched module does."""
    scope = {"TCPStore": dist.TCPStore}
    exec(compile("if True:\n" + torch_patches.LIBUV_PATCH, "patch", "exec"), scope)  # pylint: disable=exec-used
    return scope["TCPStore"]


def test_patched_store_defaults_to_no_libuv_and_follows_use_libuv(monkeypatch):
    store_class = _patched_class()
    assert issubclass(store_class, dist.TCPStore) and store_class.__doc__ == dist.TCPStore.__doc__
    monkeypatch.delenv("USE_LIBUV", raising=False)
    server = store_class("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=5))
    assert server.libuvBackend is False
    server.set("k", "v")
    client = store_class("127.0.0.1", server.port, is_master=False, timeout=timedelta(seconds=5))
    assert client.get("k") == b"v" and isinstance(client, dist.Store)
    # an explicit argument wins; USE_LIBUV=1 asks for libuv (this venv's torch has it)
    assert store_class("127.0.0.1", 0, is_master=True, wait_for_workers=False, use_libuv=False).libuvBackend is False
    monkeypatch.setenv("USE_LIBUV", "1")
    assert torch_patches.has_libuv()
    assert store_class("127.0.0.1", 0, is_master=True, wait_for_workers=False).libuvBackend is True


def test_patch_leaves_a_torch_that_needs_neither_alone(monkeypatch, capsys):
    """This venv's torch has libuv and an agent that never closes the rendezvous: nothing is written."""
    def refuse(*_args, **_kwargs):
        raise AssertionError("a torch that needs no patch must not be patched")

    monkeypatch.setattr(torch_patches.Path, "write_text", refuse)
    assert torch_patches.main(["patch"]) == 0
    out = capsys.readouterr().out
    assert "has libuv" in out and "never closes the rendezvous" in out


# torch 2.6's SimpleElasticAgent.run (agent/server/api.py) and LocalElasticAgent._shutdown
# (agent/server/local_elastic_agent.py), as far as the rendezvous patch reads them.
API = ("        except SignalException as e:\n" + torch_patches.RDZV_ANCHOR
       + "            shutdown_called = True\n            raise\n")
LOCAL = ("        if self._pcontext:\n            self._pcontext.close(death_sig)\n" + torch_patches.RDZV_CLOSE
         + "\n    def _monitor_workers(self, worker_group):\n")


def test_rendezvous_patch_stops_workers_without_closing_the_rendezvous_on_a_death_signal():
    patched = torch_patches.rendezvous_text(API, LOCAL)
    assert patched == ("        except SignalException as e:\n"
                       '            logger.warning("Received %s death signal, shutting down workers", e.sigval)\n'
                       f"            {torch_patches.RDZV_MARK}\n"
                       "            self._shutdown(e.sigval, is_restart=True)\n"
                       "            shutdown_called = True\n            raise\n")
    assert torch_patches.rendezvous_text(patched, LOCAL) == patched  # a second run changes nothing


def test_rendezvous_patch_leaves_an_agent_that_never_closes_alone():
    assert torch_patches.rendezvous_text(API, LOCAL.replace(torch_patches.RDZV_CLOSE, "")) is None


@pytest.mark.parametrize("api, local", [
    ("", LOCAL),  # the death-signal branch is gone
    (API.replace("self._shutdown(e.sigval)", "self._shutdown(e.sigval, timeout=30)"), LOCAL),
    (API + API, LOCAL),
    (API, LOCAL + LOCAL),  # two closes
])
def test_rendezvous_patch_fails_on_an_unknown_agent(api, local):
    with pytest.raises(torch_patches.PatchError, match="needs exactly 1"):
        torch_patches.rendezvous_text(api, local)


def test_patch_failure_is_a_clear_exit(monkeypatch, capsys):
    def unknown():
        raise torch_patches.PatchError("agent/server/api.py has 0 copies of the lines this patch changes")

    monkeypatch.setattr(torch_patches, "patch_rendezvous", unknown)
    monkeypatch.setattr(torch_patches, "patch_libuv", lambda: None)
    assert torch_patches.main(["patch"]) == 1
    assert capsys.readouterr().err.startswith("torch_patches: agent/server/api.py has 0 copies")


def test_usage(capsys):
    assert torch_patches.main([]) == 2 and torch_patches.main(["other"]) == 2
    assert "usage" in capsys.readouterr().err


def test_rejoin_check_passes_with_real_agents_on_this_torch(monkeypatch):
    """The build's rejoin check, run here with real torchrun agents on the venv's torch (which never
    closes the rendezvous from an agent) and the image's TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1: the
    agent that stays re-forms a world of 2 with a new agent, restarting only its worker. The image
    build runs it on Debian's torch after the patch; without either mend it fails there (tried)."""
    monkeypatch.setenv("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "1")
    torch_patches.check_rejoin(budget_s=150)
