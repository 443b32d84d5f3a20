# -*- coding: utf-8 -*-
"""module_utils/script_dir.py: a local directory of training code as the job's ConfigMap."""

from __future__ import absolute_import, division, print_function

import base64
import os
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
for _path in (ROOT, os.path.join(ROOT, ".collections")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from ansible_collections.trainfleet.training.plugins.module_utils import script_dir as sd  # noqa: E402


def _dir(tmp_path, files):
    code = tmp_path / "code"
    code.mkdir()
    for name, content in files.items():
        (code / name).write_bytes(content)
    return code


def test_text_and_binary_files_with_labels(tmp_path):
    code = _dir(tmp_path, {"train.py": b"print('hi')\n", "util.py": b"X = 1\n", "weights.bin": b"\xff\x00\xfe"})
    (code / ".git").mkdir()
    (code / "__pycache__").mkdir()
    (code / ".env").write_bytes(b"SECRET=1")
    cm = sd.script_configmap(str(code), "job-script", "training", {"app.kubernetes.io/managed-by": "trainfleet"})
    assert cm == {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "job-script", "namespace": "training", "labels": {"app.kubernetes.io/managed-by": "trainfleet"}},
        "data": {"train.py": "print('hi')\n", "util.py": "X = 1\n"},
        "binaryData": {"weights.bin": base64.b64encode(b"\xff\x00\xfe").decode()},
    }
    content = sd.read_script_dir(str(code))
    assert content["files"] == ["train.py", "util.py", "weights.bin"]
    assert content["bytes"] == len("print('hi')\n") + len("train.py") + 6 + 7 + 3 + 11


def test_relative_path_and_only_text(tmp_path, monkeypatch):
    _dir(tmp_path, {"train.py": b"pass\n"})
    monkeypatch.chdir(tmp_path)
    cm = sd.script_configmap("code", "j-script", "ns", None)
    assert cm["data"] == {"train.py": "pass\n"} and "binaryData" not in cm and cm["metadata"]["labels"] == {}


def test_the_size_limit_counts_names_and_content(tmp_path):
    code = _dir(tmp_path, {"a.py": b"x" * 96})
    assert sd.read_script_dir(str(code), limit=100)["bytes"] == 100
    (code / "b.py").write_bytes(b"")
    with pytest.raises(sd.ScriptDirError, match=r'holds more than 100 bytes; a ConfigMap holds at most 1 MiB'):
        sd.read_script_dir(str(code), limit=100)


@pytest.mark.parametrize("setup, value, message", [
    (None, "/nonexistent/trainfleet-code", r'^trainjob_script_dir "/nonexistent/trainfleet-code": cannot be read'),
    (None, "", r'^trainjob_script_dir "": must be the path of a local directory'),
    (None, "code\n", r'^trainjob_script_dir "code\\n": must be the path of a local directory'),
    ("file", "code/train.py", r'^trainjob_script_dir "code/train.py": is not a directory$'),
    ("empty", "code", r'^trainjob_script_dir "code": has no file to ship$'),
    ("subdir", "code", r'"pkg" is a directory; only the files at the top are shipped'),
    ("symlink", "code", r'"passwd" is a symbolic link; copy the file in instead'),
    ("bad-key", "code", r'the file name "my script.py" is not a ConfigMap key'),
])
def test_refused_naming_the_variable_and_quoting_the_value(tmp_path, monkeypatch, setup, value, message):
    monkeypatch.chdir(tmp_path)
    code = tmp_path / "code"
    code.mkdir()
    if setup == "file":
        (code / "train.py").write_text("pass\n")
    elif setup == "subdir":
        (code / "train.py").write_text("pass\n")
        (code / "pkg").mkdir()
    elif setup == "symlink":
        (code / "passwd").symlink_to("/etc/passwd")
    elif setup == "bad-key":
        (code / "my script.py").write_text("pass\n")
    with pytest.raises(sd.ScriptDirError, match=message):
        sd.read_script_dir(value)


def test_the_directory_itself_may_be_a_symbolic_link(tmp_path):
    code = _dir(tmp_path, {"train.py": b"pass\n"})
    link = tmp_path / "latest"
    link.symlink_to(code)
    assert sd.read_script_dir(str(link))["files"] == ["train.py"]


def test_a_file_swapped_for_a_link_after_the_check_is_not_followed(tmp_path, monkeypatch):
    secret = tmp_path / "secret"
    secret.write_text("not yours\n")
    code = _dir(tmp_path, {"train.py": b"pass\n"})
    (code / "util.py").symlink_to(secret)
    real_lstat = os.lstat
    # the race: the check sees a regular file, the open meets the link
    monkeypatch.setattr(sd.os, "lstat", lambda p: real_lstat(str(secret)) if str(p).endswith("util.py") else real_lstat(p))
    with pytest.raises(sd.ScriptDirError, match=r'"util.py" cannot be read'):
        sd.read_script_dir(str(code))


def test_not_a_string():
    with pytest.raises(sd.ScriptDirError, match="must be the path of a local directory"):
        sd.read_script_dir(None)
