# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controllers' checks of their inputs (roles/training_operator, mpi_operator, volcano: tasks/preflight.yml).

The three install a controller the same way (a Go module's source and manifests, images built here,
a fingerprinted server-side apply, a bounded wait): what that shares is checked once, by prefix; each
one's own settings are its own. module_utils/checks.py says how the checks run.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.trainfleet.training.plugins.module_utils.checks import (
    DEBIAN_PACKAGE, DNS_1123_LABEL, DNS_LABEL_63, DOTDOT, DOT_OR_DOTDOT, REPOSITORY_PATH, absolute, first, is_list, matches, q, text,
    to_int, whole)

VERSION = re.compile(r"^v[0-9]+\.[0-9]+\.[0-9]+\Z")
MODULE = re.compile(r"^[a-z0-9.-]+(/[A-Za-z0-9._-]+)+\Z")
PACKAGE = re.compile(r"^[A-Za-z0-9._/-]+\Z")
OVERLAY = re.compile(r"^manifests/[A-Za-z0-9._/-]+\Z")
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
DEPLOYMENT = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?\Z")
IMAGE = re.compile(r"^[a-z0-9][A-Za-z0-9._:/@-]*\Z")
REVISION = re.compile(r"^[0-9]{1,4}\Z")
WEIGHT = re.compile(r"^[0-9]{1,5}\Z")
VOLCANO_MANIFEST = re.compile(r"^installer/[A-Za-z0-9._/-]+\.yaml\Z")
RESOURCE = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[a-z0-9]([-a-z0-9_.]*[a-z0-9])?\Z")
QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?([mkMGTPE]|[KMGTPE]i)?\Z")


def _common(v, p):
    """(ok, what it says) of what every controller has."""
    module, namespace = v[p + "_module"], v[p + "_namespace"]
    ok = (v[p + "_state"] in ("present", "absent") and matches(VERSION, v[p + "_version"])
          and matches(MODULE, module) and not DOT_OR_DOTDOT.search(module)
          and absolute(v[p + "_cache_dir"])
          and 0 < to_int(v[p + "_build_timeout"]) <= 14400 and 0 < to_int(v[p + "_wait_timeout"]) <= 3600
          and 0 < to_int(v[p + "_wait_delay"]) <= 300 and text(v[p + "_field_manager"]) != "")
    said = ("%s_state must be present|absent (got %s), %s_version a tag like v1.9.3 (got %s), %s_module a Go module path (got %s), "
            "%s_cache_dir an absolute path (got %s), %s_build_timeout 1..14400, %s_wait_timeout 1..3600 and %s_wait_delay 1..300 "
            "seconds (got %s, %s, %s), %s_field_manager not empty, %s_namespace %s (got %s)"
            % (p, q(v[p + "_state"]), p, q(v[p + "_version"]), p, q(module), p, q(v[p + "_cache_dir"]), p, p, p,
               q(v[p + "_build_timeout"]), q(v[p + "_wait_timeout"]), q(v[p + "_wait_delay"]), p, p,
               "a DNS label" if p == "training_operator" else "a DNS label other than default and kube-*", q(namespace)))
    if p == "training_operator":
        ok = ok and matches(DNS_1123_LABEL, namespace)
    else:
        ok = ok and matches(DNS_LABEL_63, namespace) and namespace not in SYSTEM_NAMESPACES
    return ok, said


def _tolerance(v, p, whose):
    name = p + "_node_lost_toleration_seconds"
    if not whole(v[name], 1, 3600):
        return ("%s must be an integer from 1 to 3600 (seconds before %s pod on a lost node is evicted), got %s."
                % (name, whose, q(v[name])))
    return None


def _manifests(v, p, package_dots=DOTDOT):
    """The kustomize package and overlay (the training operator's and the MPI operator's)."""
    package, overlay = v[p + "_package"], v[p + "_overlay"]
    ok = (matches(PACKAGE, package) and not package_dots.search(package) and matches(OVERLAY, overlay)
          and not DOT_OR_DOTDOT.search(overlay) and matches(DEPLOYMENT, v[p + "_deployment"]))
    said = ("%s_package and %s_overlay paths inside the module without . or .. components (overlay under manifests/; got %s and %s), "
            "%s_deployment a DNS subdomain (got %s)" % (p, p, q(package), q(overlay), p, q(v[p + "_deployment"])))
    return ok, said


def _invalid(p, parts):
    ok = all(part[0] for part in parts)
    return None if ok else "Invalid %s input: %s." % (p, "; ".join(part[1] for part in parts))


def _kubeconfig(v, p, context):
    kubeconfig = v[p + "_kubeconfig"]
    if not (context.get("check_mode") or os.path.exists(os.path.expanduser(text(kubeconfig)))):
        return ("%s_kubeconfig=%s does not exist: create the cluster first (playbooks/cluster.yml) or point %s_kubeconfig at its "
                "kubeconfig." % (p, q(kubeconfig), p))
    return None


def _names(p, own):
    return tuple(p + suffix for suffix in (
        "_state", "_version", "_module", "_namespace", "_cache_dir", "_build_timeout", "_wait_timeout", "_wait_delay",
        "_field_manager", "_node_lost_toleration_seconds", "_kubeconfig")) + tuple(p + suffix for suffix in own)


# --------------------------------------------------------------------------- the training operator


def _training_operator(v):
    p = "training_operator"
    own = (matches(DEBIAN_PACKAGE, v[p + "_init_package"]) and matches(REPOSITORY_PATH, v[p + "_init_image_repository"]),
           "%s_init_package a Debian package name (got %s), %s_init_image_repository a lowercase repository (got %s)"
           % (p, q(v[p + "_init_package"]), p, q(v[p + "_init_image_repository"])))
    problem = _invalid(p, (_common(v, p), _manifests(v, p), own)) or _tolerance(v, p, "the operator's")
    if problem:
        return problem
    if v[p + "_gang_scheduler"] not in ("", "volcano"):
        return ("training_operator_gang_scheduler must be \"\" (no gang scheduling) or \"volcano\" (the operator creates a Volcano "
                "PodGroup per job), got %s." % q(v[p + "_gang_scheduler"]))
    return None


TRAINING_OPERATOR = _names("training_operator", (
    "_package", "_overlay", "_deployment", "_init_package", "_init_image_repository", "_gang_scheduler"))


def training_operator_problems(values, context=None):
    """The first problem of the training operator's inputs, as a list. context: check_mode."""
    context = context or {}
    return first(values, TRAINING_OPERATOR, (_training_operator, lambda v: _kubeconfig(v, "training_operator", context)))


# --------------------------------------------------------------------------- the MPI operator


def _mpi_operator(v):
    p = "mpi_operator"
    image = v[p + "_image"]
    own = (isinstance(image, str) and (image == "" or IMAGE.match(image)) and matches(REPOSITORY_PATH, v[p + "_image_repository"])
           and matches(REVISION, text(v[p + "_image_revision"])) and v[p + "_gang_scheduler"] in ("", "volcano")
           and isinstance(v[p + "_resources"], dict),
           "%s_image empty or an image reference (got %s), %s_image_repository a lowercase repository (got %s), "
           "%s_image_revision a number (got %s), %s_gang_scheduler \"\" or volcano (got %s), %s_resources a mapping (got %s)"
           % (p, q(image), p, q(v[p + "_image_repository"]), p, q(v[p + "_image_revision"]), p, q(v[p + "_gang_scheduler"]),
              p, q(v[p + "_resources"])))
    return _invalid(p, (_common(v, p), _manifests(v, p, DOT_OR_DOTDOT), own)) or _tolerance(v, p, "the controller's")


MPI_OPERATOR = _names("mpi_operator", (
    "_package", "_overlay", "_deployment", "_image", "_image_repository", "_image_revision", "_gang_scheduler", "_resources"))


def mpi_operator_problems(values, context=None):
    """The first problem of the MPI operator's inputs, as a list. context: check_mode."""
    context = context or {}
    return first(values, MPI_OPERATOR, (_mpi_operator, lambda v: _kubeconfig(v, "mpi_operator", context)))


# --------------------------------------------------------------------------- Volcano


def _bad_queue(queue):
    if not isinstance(queue, dict) or set(queue) - {"name", "weight", "capability"}:
        return True
    name, weight, capability = queue.get("name", ""), queue.get("weight", 1), queue.get("capability", {})
    return (not matches(DNS_LABEL_63, name) or name in ("default", "root")
            or not WEIGHT.match(text(weight)) or not 1 <= to_int(weight) <= 65535
            or not isinstance(capability, dict) or not all(matches(RESOURCE, key) for key in capability)
            or not all(QUANTITY.match(text(val)) for val in capability.values()))


def _volcano(v):
    p = "volcano"
    components, upstream = v["_volcano_components"], v["_volcano_upstream_admissions"]
    images, admissions, resources, manifest = (v[p + "_images"], v[p + "_admissions"], v[p + "_resources"], v[p + "_manifest"])
    conf = v[p + "_scheduler_conf"]
    validity, renew = to_int(v[p + "_cert_validity_days"]), to_int(v[p + "_cert_renew_before_days"])
    own = (matches(VOLCANO_MANIFEST, manifest) and not DOT_OR_DOTDOT.search(manifest)
           and isinstance(images, dict) and not set(images) - set(components) and all(matches(IMAGE, i) for i in images.values())
           and matches(REPOSITORY_PATH, v[p + "_image_repository_prefix"]) and matches(REVISION, text(v[p + "_image_revision"]))
           and is_list(admissions) and len(admissions) > 0 and not set(admissions) - set(upstream)
           and isinstance(conf, str) and re.search(r"(?m)^actions:", conf) is not None
           and isinstance(resources, dict) and sorted(resources) == sorted(components)
           and 0 < renew < validity <= 36500,
           "volcano_manifest a .yaml path under installer/ without . or .. components (got %s), volcano_images a mapping of %s to "
           "image references (got %s), volcano_image_repository_prefix a lowercase repository path (got %s), volcano_image_revision "
           "a number (got %s), volcano_admissions a non-empty list out of %s (got %s), volcano_scheduler_conf the scheduler's YAML "
           "configuration with an actions line (got %s), volcano_resources a mapping with exactly %s (got %s), "
           "volcano_cert_validity_days (got %s) at most 36500 and greater than volcano_cert_renew_before_days (got %s) > 0"
           % (q(manifest), q(list(components)), q(images), q(v[p + "_image_repository_prefix"]), q(v[p + "_image_revision"]),
              q(list(upstream)), q(admissions), q(conf)[:200], q(list(components)), q(resources),
              q(v[p + "_cert_validity_days"]), q(v[p + "_cert_renew_before_days"])))
    problem = _invalid(p, (_common(v, p), own)) or _tolerance(v, p, "a Volcano component's")
    if problem:
        return problem
    queues = v[p + "_queues"]
    bad = [queue for queue in queues if _bad_queue(queue)] if is_list(queues) else []
    names = [queue.get("name", "") for queue in queues if isinstance(queue, dict)] if is_list(queues) else []
    if not is_list(queues) or bad or len(set(names)) != len(queues):
        return ("Invalid volcano_queues %s: a list of {name, weight, capability} with unique names. Bad entries: %s. name: a DNS "
                "label other than default and root; weight: an integer 1..65535 (default 1); capability: a mapping of resource "
                "name to quantity, e.g. {cpu: \"4\", memory: 8Gi} ({} = no limit)." % (q(queues)[:400], q(bad)))
    return None


VOLCANO = _names("volcano", (
    "_manifest", "_images", "_image_repository_prefix", "_image_revision", "_admissions", "_scheduler_conf", "_resources",
    "_cert_validity_days", "_cert_renew_before_days", "_queues")) + ("_volcano_components", "_volcano_upstream_admissions")


def volcano_problems(values, context=None):
    """The first problem of Volcano's inputs, as a list. context: check_mode."""
    context = context or {}
    return first(values, VOLCANO, (_volcano, lambda v: _kubeconfig(v, "volcano", context)))
