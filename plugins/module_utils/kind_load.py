# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Images into the nodes of a kind cluster, only where they are missing.

No kind node can pull: the controllers' images built here reach the nodes with
`kind load docker-image` (docker save | ctr import on each node). Loading into a node that has the
image already would re-import it for nothing and report a change, so each node is asked first
(`ctr images list name==<ref>` inside the node container) and only the nodes that lack the image
are named with --nodes. One function for every component role that builds images locally
(training_operator, volcano, mpi_operator).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.trainfleet.training.plugins.module_utils.errors import TrainfleetError
from ansible_collections.trainfleet.training.plugins.module_utils.image_source import CommandTimeout, run_command

LIST_TIMEOUT = 60
FIND_DEPTH = 3


class KindLoadError(TrainfleetError):
    """The cluster's nodes cannot be listed or read, or an image cannot be loaded."""


def containerd_ref(image):
    """The reference containerd stores for an image, as Docker names it: the first component is a
    registry when the name has a slash and that component has a dot or a port or is localhost;
    otherwise docker.io (and library/ for a name without a slash, tagged or not)."""
    if "/" in image:
        first = image.split("/", 1)[0]
        if "." in first or ":" in first or first == "localhost":
            return image
        return "docker.io/" + image
    return "docker.io/library/" + image


def find_kind(cache_dir, depth=FIND_DEPTH):
    """The kind binary the cluster step built under <cache_dir>/kind: among the executable files
    named kind at most `depth` levels below it, the last path in sort order (the newest version
    directory); `kind` on PATH when there is none."""
    root = os.path.join(cache_dir, "kind")
    found = []
    for path, dirs, files in os.walk(root):
        level = 0 if path == root else os.path.relpath(path, root).count(os.sep) + 1
        if level + 1 >= depth:
            dirs[:] = []
        for name in files:
            full = os.path.join(path, name)
            if name == "kind" and not os.path.islink(full) and os.path.isfile(full) and os.access(full, os.X_OK):
                found.append(full)
    return sorted(found)[-1] if found else "kind"


def _run(runner, argv, timeout, what):
    try:
        rc, out, err = runner(argv, timeout)
    except CommandTimeout as exc:
        raise KindLoadError("%s: %s" % (what, exc)) from exc
    except OSError as exc:
        raise KindLoadError("%s: cannot run %s: %s" % (what, argv[0], exc)) from exc
    return rc, out, err


def load(cluster, images, kind="kind", docker="docker", check_mode=False, load_timeout=600, runner=run_command):
    """Load each image into the nodes of `cluster` that lack it. Returns the module's result:
    changed, nodes, loaded ({image: [nodes]}: loaded, or to load in check mode), present ({image: [nodes]})."""
    what = "kind get nodes --name %s" % cluster
    rc, out, err = _run(runner, [kind, "get", "nodes", "--name", cluster], LIST_TIMEOUT, what)
    nodes = [line.strip() for line in out.splitlines() if line.strip()]
    if rc != 0 or not nodes:
        raise KindLoadError("%s found no node (rc=%s): %s" % (what, rc, (err or out).strip()[-500:]))
    loaded, present = {}, {}
    for image in images:
        ref = containerd_ref(image)
        missing = []
        for node in nodes:
            argv = [docker, "exec", node, "ctr", "--namespace=k8s.io", "images", "list", "--quiet", "name==" + ref]
            rc, out, err = _run(runner, argv, LIST_TIMEOUT, "list the images of node %s" % node)
            if rc != 0:
                raise KindLoadError("cannot list the images of node %s (rc=%s): %s" % (node, rc, err.strip()[-500:]))
            (present.setdefault(image, []) if out.strip() else missing).append(node)
        if not missing:
            continue
        loaded[image] = missing
        if check_mode:
            continue
        argv = [kind, "load", "docker-image", image, "--name", cluster] + ["--nodes=" + node for node in missing]
        rc, out, err = _run(runner, argv, load_timeout, "kind load docker-image %s" % image)
        if rc != 0:
            raise KindLoadError("kind load docker-image %s into %s failed (rc=%s): %s"
                                % (image, ", ".join(missing), rc, (err or out).strip()[-800:]))
    return dict(changed=bool(loaded), nodes=nodes, loaded=loaded, present=present)
