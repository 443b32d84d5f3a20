"""trainer/image/torch_libuv.py: the image build's patch of Debian's torch (built without libuv)."""

from datetime import timedelta

import pytest
import torch.distributed as dist

from trainer.image import torch_libuv

# The lines of torch/distributed/__init__.py (torch 2.6) around the import the patch follows.
INIT = ("if is_available():\n    from torch._C._distributed_c10d import (\n        Store,\n"
        + torch_libuv.ANCHOR + "\n    class _DistributedPdb(pdb.Pdb):\n        pass\n")


def test_patch_goes_right_after_the_import_once():
    patched = torch_libuv.patch_text(INIT)
    head, tail = patched.split(torch_libuv.ANCHOR)
    assert head == INIT.split(torch_libuv.ANCHOR, maxsplit=1)[0]
    assert tail.startswith("\n    " + torch_libuv.MARK + "\n    class TCPStore(TCPStore):")
    assert tail.endswith("\n    class _DistributedPdb(pdb.Pdb):\n        pass\n")
    assert torch_libuv.patch_text(patched) == patched  # a second run changes nothing
    compile(patched, "__init__.py", "exec")


@pytest.mark.parametrize("text", ["", INIT.replace("Work as _Work", "Work"), INIT + torch_libuv.ANCHOR])
def test_an_unknown_torch_fails_instead_of_going_unpatched(text):
    with pytest.raises(torch_libuv.PatchError, match="needs exactly 1"):
        torch_libuv.patch_text(text)


def _patched_class():
    """The patch's TCPStore, defined over this torch's TCPStore the way the patched module does."""
    scope = {"TCPStore": dist.TCPStore}
    exec(compile("if True:\n" + torch_libuv.PATCH, "patch", "exec"), scope)  # pylint: disable=exec-used
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
    assert torch_libuv.has_libuv()
    assert store_class("127.0.0.1", 0, is_master=True, wait_for_workers=False).libuvBackend is True


def test_patch_leaves_a_torch_with_libuv_alone(monkeypatch, capsys):
    def refuse(*_args, **_kwargs):
        raise AssertionError("a torch with libuv must not be patched")

    monkeypatch.setattr(torch_libuv.Path, "write_text", refuse)
    assert torch_libuv.main(["patch"]) == 0
    assert "has libuv" in capsys.readouterr().out


def test_usage(capsys):
    assert torch_libuv.main([]) == 2 and torch_libuv.main(["other"]) == 2
    assert "usage" in capsys.readouterr().err
