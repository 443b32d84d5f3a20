# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where the local platform's kind node image comes from: built here, or pulled.

decide() holds the decision; the Docker CLI calls go through a DockerCli whose runner the unit
tests replace. Sources:
  build  everything is built here from pinned sources (no image pull; air-gapped hosts);
  pull   the pinned official images are pulled by digest; a failure is an error;
  auto   pull when the registry answers a manifest request within probe_timeout seconds,
         else (unreachable, refused, timed out, or the pull itself failing) build.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import signal
import subprocess
import time

from ansible_collections.trainfleet.training.plugins.module_utils.errors import TrainfleetError

SOURCES = ("build", "pull", "auto")
# Last characters of a failing command's output kept in a reason.
DETAIL_CHARS = 300


class SourceError(TrainfleetError):
    """The configured source cannot be honoured; the message names the setting."""


class CommandTimeout(TrainfleetError):
    """A command ran longer than its timeout and was killed."""


def digest_ref(ref):
    """repo:tag@sha256:... -> repo@sha256:... (what docker pull and inspect take); others unchanged."""
    if "@" not in ref:
        return ref
    name, digest = ref.split("@", 1)
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        name = name[:len(name) - len(last)] + last.split(":", 1)[0]
    return "%s@%s" % (name, digest)


def _tail(text):
    text = " ".join((text or "").split())
    return text[-DETAIL_CHARS:]


def run_command(argv, timeout, env=None):
    """(rc, stdout, stderr) of argv; CommandTimeout after timeout seconds (its whole process group is killed)."""
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                          env=dict(os.environ, **(env or {})), start_new_session=True) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise CommandTimeout("%s did not finish within %ss" % (" ".join(argv[:3]), timeout)) from exc
    return proc.returncode, out, err


class DockerCli:
    """The three Docker CLI calls the decision needs."""

    # `docker manifest inspect` is experimental before Docker 20.10.
    ENV = {"DOCKER_CLI_EXPERIMENTAL": "enabled"}

    def __init__(self, docker="docker", runner=None):
        self.docker = docker
        self.runner = runner or run_command

    def _run(self, args, timeout):
        try:
            return self.runner([self.docker] + args, timeout, self.ENV)
        except OSError as exc:
            return 127, "", "%s: %s" % (self.docker, exc)

    def present(self, ref, timeout=30):
        """Whether the image is in the local Docker engine (no registry involved)."""
        try:
            answer = self._run(["image", "inspect", "--format", "{{.Id}}", digest_ref(ref)], timeout)
        except CommandTimeout:
            return False
        return answer[0] == 0

    def probe(self, ref, timeout):
        """('ok' | 'unreachable' | 'timeout', detail): does the registry serve the image's manifest?"""
        try:
            rc, out, err = self._run(["manifest", "inspect", digest_ref(ref)], timeout)
        except CommandTimeout as exc:
            return "timeout", str(exc)
        if rc == 0:
            return "ok", "manifest of %s served" % digest_ref(ref)
        return "unreachable", _tail(err or out) or "exit code %d" % rc

    def pull(self, ref, timeout):
        """(ok, detail) of docker pull."""
        try:
            rc, out, err = self._run(["pull", digest_ref(ref)], timeout)
        except CommandTimeout as exc:
            return False, str(exc)
        if rc == 0:
            return True, "pulled %s" % digest_ref(ref)
        return False, _tail(err or out) or "exit code %d" % rc


def decide(source, images, docker, probe_timeout=5, pull_timeout=900, check_mode=False,
           variable="kind_images_source", clock=time.monotonic):
    """The source to use and why, as a dict; SourceError when an explicit pull cannot be honoured.

    images: the pinned references to pull (the node image first); docker: a DockerCli (or a
    stand-in with present/probe/pull).
    """
    if source not in SOURCES:
        raise SourceError("%s must be one of %s, got %r" % (variable, ", ".join(SOURCES), source))
    result = {"source": "build", "pulled": [], "missing": [], "probe": None, "changed": False}
    if source == "build":
        result["reason"] = "%s is build: everything is built here from pinned sources, nothing is pulled" % variable
        return result
    if not images:
        raise SourceError("%s is %s, but no image to pull is pinned" % (variable, source))
    missing = [ref for ref in images if not docker.present(ref)]
    result["missing"] = missing
    if not missing:
        result.update(source="pull", reason="%s is %s and the pinned images are in the local Docker engine already"
                      % (variable, source))
        return result
    if source == "auto":
        started = clock()
        status, detail = docker.probe(missing[0], probe_timeout)
        result["probe"] = {"status": status, "detail": detail, "seconds": round(clock() - started, 3)}
        if status != "ok":
            result["reason"] = ("%s is auto and the registry did not serve %s within %ss (%s: %s): building everything "
                                "here instead" % (variable, digest_ref(missing[0]), probe_timeout, status, detail))
            return result
    if check_mode:
        result.update(source="pull", changed=True,
                      reason="%s is %s: would pull %s" % (variable, source, ", ".join(digest_ref(r) for r in missing)))
        return result
    for ref in missing:
        ok, detail = docker.pull(ref, pull_timeout)
        if not ok:
            if source == "auto":
                result.update(source="build", changed=bool(result["pulled"]),
                              reason="%s is auto and pulling %s failed (%s): building everything here instead"
                              % (variable, digest_ref(ref), detail))
                return result
            raise SourceError("%s is pull, but pulling %s failed (%s); set %s to build (or auto) to build everything "
                              "here without a registry" % (variable, digest_ref(ref), detail, variable))
        result["pulled"].append(ref)
    result.update(source="pull", changed=True,
                  reason="%s is %s: pulled %s" % (variable, source, ", ".join(digest_ref(r) for r in missing)))
    return result
