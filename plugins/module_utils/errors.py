# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's exceptions: logic raises them, each module's main() turns them into
fail_json(msg=..., **details). TrainfleetError is the base of every one of them, whatever the job
kind or the module (the Kubernetes ones below; image_source, dataset_sync, eksctl, torchx_request,
kind_load, contract, manifests and script_dir define theirs on it)."""

from __future__ import annotations


class TrainfleetError(Exception):
    """Any failure a module reports; `details` are extra keys for fail_json."""

    def __init__(self, msg, **details):
        super(TrainfleetError, self).__init__(msg)
        self.msg = msg
        self.details = details


class ClientConfigError(TrainfleetError):
    """kubeconfig/context/host settings are unusable."""


class ApiUnreachableError(TrainfleetError):
    """The API server did not answer (connection refused, DNS, TLS)."""


class ApiAccessError(TrainfleetError):
    """The API server refused the request (401/403) or failed it."""


class CrdMissingError(TrainfleetError):
    """kubeflow.org/v1 pytorchjobs is not served: the training operator is not installed."""


class JobNotFoundError(TrainfleetError):
    """The named PyTorchJob does not exist."""


class WatchExpiredError(TrainfleetError):
    """The watch's resourceVersion is too old (HTTP 410): list again, then watch again."""


class LogReadError(TrainfleetError):
    """A pod's log cannot be read (container not started, no previous container, ...)."""
