# -*- coding: utf-8 -*-
"""The build scripts of roles/*/files: the Debian mirror is found on every kind of apt tree, and
no script that stops on an error stops silently (each names the line and the command)."""

from __future__ import annotations

import glob
import os
import re
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
FIND_MIRROR = os.path.join(ROOT, "roles", "kind_images", "files", "find-debian-mirror.sh")
SCRIPTS = sorted(glob.glob(os.path.join(ROOT, "roles", "*", "files", "**", "*"), recursive=True))
SCRIPTS = [p for p in SCRIPTS if os.path.isfile(p) and open(p, "rb").read(2) == b"#!"]

DEB822_MAIN = """Types: deb
# a comment
URIs: http://mirror.example.invalid/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.example.invalid/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""
SECURITY_ONLY_822 = """Types: deb
URIs: http://security.example.invalid/debian-security
Suites: bookworm-security
Components: main
"""
ONE_LINE = """# one-line sources
deb [arch=amd64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://oneline.example.invalid/debian/ bookworm main contrib
deb http://oneline.example.invalid/debian-security bookworm-security main
deb-src http://src.example.invalid/debian bookworm main
"""


def apt_tree(tmp_path, files):
    apt = tmp_path / "apt"
    (apt / "sources.list.d").mkdir(parents=True)
    for name, text in files.items():
        (apt / name).write_text(text)
    return str(apt)


def find_mirror(apt):
    return subprocess.run(["bash", FIND_MIRROR, apt], capture_output=True, text=True, timeout=30, check=False)


@pytest.mark.parametrize("files, expected", [
    # Debian 12's default: deb822 only, no sources.list, no *.list.
    ({"sources.list.d/debian.sources": DEB822_MAIN}, "http://mirror.example.invalid/debian"),
    ({"sources.list": ONE_LINE}, "http://oneline.example.invalid/debian"),
    ({"sources.list.d/extra.list": ONE_LINE}, "http://oneline.example.invalid/debian"),
    # Both: one-line files are read first (apt's own order: sources.list, then sources.list.d).
    ({"sources.list": ONE_LINE, "sources.list.d/debian.sources": DEB822_MAIN},
     "http://oneline.example.invalid/debian"),
    # The security archive alone is not a mirror; a disabled stanza does not count.
    ({"sources.list.d/security.sources": SECURITY_ONLY_822,
      "sources.list.d/debian.sources": DEB822_MAIN}, "http://mirror.example.invalid/debian"),
    # A vendor repository first (its own component) does not win over the Debian archive.
    ({"sources.list.d/a-vendor.sources": "Types: deb\nURIs: https://vendor.example.invalid/linux/debian\n"
                                         "Suites: bookworm\nComponents: stable\n",
      "sources.list.d/debian.sources": DEB822_MAIN}, "http://mirror.example.invalid/debian"),
    # URIs on a continuation line, lower-case keys, several URIs.
    ({"sources.list.d/debian.sources": "types: deb\nuris:\n http://cont.example.invalid/debian\n"
                                       " http://second.example.invalid/debian\nsuites: bookworm\ncomponents: main\n"},
     "http://cont.example.invalid/debian"),
    # A proxy path that does not end in /debian is still taken when nothing else qualifies.
    ({"sources.list.d/proxy.sources": "Types: deb\nURIs: http://proxy.example.invalid:3142/archive\n"
                                      "Suites: bookworm\nComponents: main\n"}, "http://proxy.example.invalid:3142/archive"),
], ids=["deb822-only", "one-line-only", "one-line-in-list-d", "both", "security-and-main",
        "vendor-first", "continuation-lines", "proxy-path"])
def test_mirror_found(tmp_path, files, expected):
    done = find_mirror(apt_tree(tmp_path, files))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == expected


@pytest.mark.parametrize("files", [
    {},
    {"sources.list.d/security.sources": SECURITY_ONLY_822},
    {"sources.list.d/debian.sources": DEB822_MAIN.replace("Types: deb\n# a comment", "Types: deb\nEnabled: no", 1)
     .split("\n\n", 1)[0] + "\n"},
    {"sources.list": "deb-src http://src.example.invalid/debian bookworm main\n"},
], ids=["none", "security-only", "disabled", "source-only"])
def test_no_mirror_names_the_variable(tmp_path, files):
    done = find_mirror(apt_tree(tmp_path, files))
    assert done.returncode == 3
    assert done.stdout == ""
    assert "kind_images_debian_mirror" in done.stderr
    assert "sources.list.d/*.sources" in done.stderr


def test_every_stopping_script_names_what_failed():
    """A script that stops on errors (set -e) must say which line and command failed."""
    assert SCRIPTS, "no scripts found under roles/*/files"
    checked = 0
    for path in SCRIPTS:
        text = open(path).read()
        if not re.search(r"^set -\w*e", text, re.M):
            continue
        checked += 1
        rel = os.path.relpath(path, ROOT)
        if text.startswith("#!/bin/sh"):
            # POSIX sh has no ERR trap: every command that can fail there prints its own error.
            assert ">/dev/null 2>&1" not in text.replace("2>/dev/null | grep", ""), rel
            continue
        assert re.search(r"^set -E\w*e\w*", text, re.M), "%s: set -E so that functions inherit the ERR trap" % rel
        assert re.search(r"^trap '.*LINENO.*BASH_COMMAND.*' ERR$", text, re.M), "%s has no ERR trap" % rel
    assert checked >= 5


def test_err_trap_names_line_and_command(tmp_path):
    """build-go-binaries.sh with no go on PATH: the message names the script, line and command."""
    script = os.path.join(ROOT, "roles", "kind_images", "files", "build-go-binaries.sh")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    env["PATH"] = ":".join(p for p in env["PATH"].split(":") if not os.path.exists(os.path.join(p, "go")))
    done = subprocess.run(["bash", script, str(tmp_path / "out"), "example.invalid/mod", "v1.0.0", "example.invalid/mod"],
                          capture_output=True, text=True, env=env, timeout=60, check=False)
    assert done.returncode != 0
    assert re.search(r"build-go-binaries\.sh: line \d+: exit 127: go get ", done.stderr), done.stderr


def test_build_rootfs_without_mirror_explains(tmp_path):
    """build-rootfs.sh on a host whose apt sources name no mirror stops with find-debian-mirror's
    message (the failure this test guards against was an exit 1 with an empty stderr)."""
    files = tmp_path / "files"
    files.mkdir()
    src = os.path.join(ROOT, "roles", "kind_images", "files")
    for name in ("build-rootfs.sh", "find-debian-mirror.sh"):
        text = open(os.path.join(src, name)).read()
        if name == "find-debian-mirror.sh":
            text = text.replace('apt_dir="${1:-/etc/apt}"', 'apt_dir="${1:-%s}"' % (tmp_path / "apt"))
        (files / name).write_text(text)
        (files / name).chmod(0o755)
    (tmp_path / "apt" / "sources.list.d").mkdir(parents=True)
    done = subprocess.run([str(files / "build-rootfs.sh"), "bookworm", str(tmp_path / "out" / "rootfs.tar")],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 3
    assert "kind_images_debian_mirror" in done.stderr
    assert "build-rootfs.sh: line" in done.stderr
    assert not (tmp_path / "out" / "rootfs.tar").exists()
