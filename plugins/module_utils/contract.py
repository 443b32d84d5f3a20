# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The platform contract's checks beyond its argument spec (roles/platform/tasks/preflight.yml).

The argument spec `contract` checks types, choices and required fields; this checks names, paths,
URLs and references. Each problem names the variable the value came from (platform_<name>_...,
s3_bucket_name, platform_launchers) and quotes the value as JSON, as every preflight message does.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.trainfleet.training.plugins.module_utils.checks import BUCKET, is_list, q

NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?\Z")
URL = re.compile(r"^https?://[A-Za-z0-9.:\[\]-]+(/[A-Za-z0-9._/-]*)?\Z")
REPO = re.compile(r"^[a-z0-9.-]+(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)*\Z")
IMAGE = re.compile(r"^[A-Za-z0-9.:/@_-]+\Z")
CONTEXT = re.compile(r"^[A-Za-z0-9@:._/-]*\Z")
LAUNCHERS = ("mpi_operator", "volcano")


def problems(contract, platform_name, launchers):
    """Every problem of the contract published for platform `platform_name`, and of the
    platform_launchers setting, in words; empty when there is none."""
    out = []
    prefix = "platform_%s_" % platform_name
    kubeconfig = contract["kubeconfig"]
    if not (isinstance(kubeconfig, str) and os.path.isabs(kubeconfig) and "\n" not in kubeconfig):
        out.append(prefix + "kubeconfig must be an absolute path (got %s)" % q(kubeconfig))
    if not CONTEXT.match(contract["context"]):
        out.append(prefix + "context must be a kubeconfig context name (got %s)" % q(contract["context"]))
    registry = contract["registry"]
    if registry["prefix"] != "" and not REPO.match(registry["prefix"]):
        out.append(prefix + "registry_prefix must be registry-host[:port]/path in lowercase (got %s)" % q(registry["prefix"]))
    if registry["pull"] == "pull_secret" and not NAME.match(registry["pull_secret"]):
        out.append(prefix + "registry_pull_secret must be a DNS subdomain (got %s)" % q(registry["pull_secret"]))
    store = contract["object_store"]
    if store["kind"] != "none" and not BUCKET.match(store["bucket"]):
        out.append("s3_bucket_name must be an S3 bucket name (got %s)" % q(store["bucket"]))
    for field in ("endpoint_url", "pod_endpoint_url"):
        if store[field] != "" and not URL.match(store[field]):
            out.append(prefix + "s3_%s must be http(s)://host[:port][/path] (got %s)" % (field, q(store[field])))
    if store["kind"] == "s3_compatible" and store["endpoint_url"] == "":
        out.append(prefix + "s3_endpoint_url is required for an s3_compatible object store")
    if store["credentials"] == "secret" and not NAME.match(store["credentials_secret"]):
        out.append(prefix + "s3_credentials_secret must be a DNS subdomain (got %s)" % q(store["credentials_secret"]))
    class_name = contract["storage"]["class_name"]
    if class_name != "" and not NAME.match(class_name):
        out.append(prefix + "storage_class must be a DNS subdomain (got %s)" % q(class_name))
    for field in ("image", "init_image"):
        value = contract["operator"][field]
        if value != "" and not IMAGE.match(value):
            out.append(prefix + "operator_%s must be an image reference (got %s)" % (field, q(value)))
    if not is_list(launchers) or any(item not in LAUNCHERS for item in launchers):
        out.append("platform_launchers must be a list of %s (got %s)" % (", ".join(LAUNCHERS), q(launchers)))
    return out
