# -*- coding: utf-8 -*-
"""Docker helpers for the suites that run the trainer_image step in check mode."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tarfile

import pytest


def has_image(image):
    """Whether the local Docker engine holds ``image``."""
    return subprocess.run(["docker", "image", "inspect", image], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, timeout=60, check=False).returncode == 0


@contextlib.contextmanager
def empty_image(name, work_dir):
    """An empty local image named ``name`` (imported from an empty archive, never pulled), removed after."""
    if shutil.which("docker") is None:
        pytest.fail("the trainer_image step needs the Docker engine (make setup installs it)")
    archive = work_dir / "empty.tar"
    with tarfile.open(archive, "w"):
        pass
    subprocess.run(["docker", "import", str(archive), name], check=True, stdout=subprocess.DEVNULL, timeout=120)
    try:
        yield name
    finally:
        subprocess.run(["docker", "rmi", name], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=120, check=False)
