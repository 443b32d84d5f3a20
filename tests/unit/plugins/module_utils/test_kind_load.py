# -*- coding: utf-8 -*-
"""module_utils/kind_load.py: images into the kind nodes that lack them, and nowhere else.

No Docker and no cluster here: a stand-in runner answers `kind get nodes`, each node's
`ctr images list` and `kind load docker-image`, and records what was run.
"""

from __future__ import absolute_import, division, print_function

import os

import pytest

from ansible_collections.trainfleet.training.plugins.module_utils import kind_load as K
from ansible_collections.trainfleet.training.plugins.module_utils.errors import TrainfleetError
from ansible_collections.trainfleet.training.plugins.module_utils.image_source import CommandTimeout

NODES = ["trainfleet-control-plane", "trainfleet-worker", "trainfleet-worker2"]
IMAGE = "trainfleet/volcano-scheduler:v1.10.0"
LOCAL = "localhost:5001/trainfleet/mpi-operator:v0.6.0"


class Cluster(object):
    """`has`: {node: set of containerd references}; loads add to it."""

    def __init__(self, nodes=tuple(NODES), has=None, fail_load=False, get_rc=0, timeout_on=None):
        self.nodes = list(nodes)
        self.has = {n: set((has or {}).get(n, ())) for n in self.nodes}
        self.fail_load = fail_load
        self.get_rc = get_rc
        self.timeout_on = timeout_on
        self.calls = []

    def __call__(self, argv, timeout):
        self.calls.append(list(argv))
        assert timeout > 0
        if self.timeout_on and self.timeout_on in argv:
            raise CommandTimeout("%s did not finish within %ss" % (" ".join(argv[:3]), timeout))
        if argv[1:3] == ["get", "nodes"]:
            return self.get_rc, "\n".join(self.nodes) + ("\n" if self.nodes else ""), \
                "" if self.nodes else "No kind nodes found for cluster \"trainfleet\"."
        if argv[0] == "docker" and argv[1] == "exec":
            ref = argv[-1][len("name=="):]
            return 0, (ref + "\n") if ref in self.has[argv[2]] else "", ""
        if argv[1:3] == ["load", "docker-image"]:
            if self.fail_load:
                return 1, "", "ERROR: failed to load image: image not present locally"
            for node in [a[len("--nodes="):] for a in argv if a.startswith("--nodes=")]:
                self.has[node].add(K.containerd_ref(argv[3]))
            return 0, "", ""
        raise AssertionError("unexpected command %s" % argv)

    def loads(self):
        return [c for c in self.calls if c[1:3] == ["load", "docker-image"]]


@pytest.mark.parametrize("image, ref", [
    ("busybox", "docker.io/library/busybox"),
    ("busybox:1.36", "docker.io/library/busybox:1.36"),
    ("trainfleet/pytorch-init:1.35", "docker.io/trainfleet/pytorch-init:1.35"),
    ("ghcr.io/kubeflow/training-v1/training-operator:v1-d6eb98e", "ghcr.io/kubeflow/training-v1/training-operator:v1-d6eb98e"),
    ("localhost/x:1", "localhost/x:1"),
    (LOCAL, LOCAL),
])
def test_containerd_reference_is_dockers_normal_form(image, ref):
    assert K.containerd_ref(image) == ref


def test_loads_only_into_the_nodes_that_lack_the_image():
    cluster = Cluster(has={"trainfleet-worker": {K.containerd_ref(IMAGE)}})
    result = K.load("trainfleet", [IMAGE], runner=cluster)
    assert result["changed"] is True and result["nodes"] == NODES
    assert result["loaded"] == {IMAGE: ["trainfleet-control-plane", "trainfleet-worker2"]}
    assert result["present"] == {IMAGE: ["trainfleet-worker"]}
    assert cluster.loads() == [["kind", "load", "docker-image", IMAGE, "--name", "trainfleet",
                                "--nodes=trainfleet-control-plane", "--nodes=trainfleet-worker2"]]


def test_a_second_run_changes_nothing():
    cluster = Cluster()
    assert K.load("trainfleet", [IMAGE, LOCAL], runner=cluster)["changed"] is True
    again = K.load("trainfleet", [IMAGE, LOCAL], runner=cluster)
    assert again["changed"] is False and again["loaded"] == {}
    assert again["present"] == {IMAGE: NODES, LOCAL: NODES}
    assert len(cluster.loads()) == 2


def test_check_mode_asks_the_nodes_and_loads_nothing():
    cluster = Cluster()
    result = K.load("trainfleet", [IMAGE], check_mode=True, runner=cluster)
    assert result["changed"] is True and result["loaded"] == {IMAGE: NODES}
    assert cluster.loads() == []


def test_a_cluster_without_nodes_is_an_error_naming_it():
    with pytest.raises(K.KindLoadError, match=r"kind get nodes --name other found no node .*No kind nodes found"):
        K.load("other", [IMAGE], runner=Cluster(nodes=[]))
    with pytest.raises(K.KindLoadError, match="rc=1"):
        K.load("trainfleet", [IMAGE], runner=Cluster(get_rc=1))


def test_a_failed_load_names_the_image_the_nodes_and_the_reason():
    with pytest.raises(K.KindLoadError) as err:
        K.load("trainfleet", [IMAGE], runner=Cluster(fail_load=True))
    assert IMAGE in err.value.msg and "trainfleet-worker2" in err.value.msg and "not present locally" in err.value.msg
    assert isinstance(err.value, TrainfleetError)


def test_a_hanging_command_is_bounded_and_named():
    with pytest.raises(K.KindLoadError, match="kind load docker-image .* did not finish"):
        K.load("trainfleet", [IMAGE], runner=Cluster(timeout_on="load"), load_timeout=5)


def test_the_real_runner_reports_a_missing_binary():
    with pytest.raises(K.KindLoadError, match="cannot run /nonexistent/kind"):
        K.load("trainfleet", [IMAGE], kind="/nonexistent/kind")


def _exe(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)


def test_find_kind_takes_the_newest_built_binary_within_three_levels(tmp_path):
    assert K.find_kind(str(tmp_path)) == "kind"
    _exe(tmp_path / "kind" / "v0.25.0" / "bin" / "kind")
    _exe(tmp_path / "kind" / "v0.26.0" / "bin" / "kind")
    _exe(tmp_path / "kind" / "v0.27.0" / "bin" / "deep" / "kind")  # four levels down: not looked at
    (tmp_path / "kind" / "v0.26.0" / "kind").symlink_to("bin/kind")  # a link is not the binary itself
    not_exe = tmp_path / "kind" / "v0.26.1" / "bin" / "kind"
    not_exe.parent.mkdir(parents=True)
    not_exe.write_text("")
    assert K.find_kind(str(tmp_path)) == os.path.join(str(tmp_path), "kind", "v0.26.0", "bin", "kind")
