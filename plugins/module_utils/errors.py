# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's exceptions: logic raises them, each module's main() turns them into
fail_json(msg=..., **details)."""

from __future__ import annotations


class PyTorchJobError(Exception):
    """Any failure a module reports; `details` are extra keys for fail_json."""

    def __init__(self, msg, **details):
        super(PyTorchJobError, self).__init__(msg)
        self.msg = msg
        self.details = details


class ClientConfigError(PyTorchJobError):
    """kubeconfig/context/host settings are unusable."""


class ApiUnreachableError(PyTorchJobError):
    """The API server did not answer (connection refused, DNS, TLS)."""


class ApiAccessError(PyTorchJobError):
    """The API server refused the request (401/403) or failed it."""


class CrdMissingError(PyTorchJobError):
    """kubeflow.org/v1 pytorchjobs is not served: the training operator is not installed."""


class JobNotFoundError(PyTorchJobError):
    """The named PyTorchJob does not exist."""


class WatchExpiredError(PyTorchJobError):
    """The watch's resourceVersion is too old (HTTP 410): list again, then watch again."""


class LogReadError(PyTorchJobError):
    """A pod's log cannot be read (container not started, no previous container, ...)."""
