# -*- coding: utf-8 -*-
"""The collection as users get it: built with ansible-galaxy, installed, used from elsewhere.

One build and one install for the whole module, both with the real ansible-galaxy of the venv.
Everything after the install runs from a directory outside the checkout, with an ansible.cfg of
its own and a collections path of the temp install plus the venv's bundled collections (the
dependencies), so nothing can resolve through the repo's .collections/ symlink. No network: the
galaxy server is pointed at a closed loopback port and every install is --offline or --no-deps.

A file the roles, plugins or playbooks need but build_ignore drops fails the content tests and,
for the AWS roles, the user playbook run against a moto server of our own.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import boto3
import pytest
import yaml


ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
FQCN = "trainfleet.training"
MOTO_ACCOUNT = "123456789012"
REGION = "us-east-1"

BUILD_TIMEOUT = 180
INSTALL_TIMEOUT = 180
DOC_TIMEOUT = 120
PLAYBOOK_TIMEOUT = 600
GIT_TIMEOUT = 60

# What an installed collection must hold: every git-tracked file under these paths. trainer/ is
# what the trainer_image role builds (from role_path/../../trainer); docs/runbooks/ is what the
# roles' messages point to.
SHIPPED = ("roles/", "plugins/", "meta/", "playbooks/", "trainer/", "docs/runbooks/", "README.md")
# Tracked files under SHIPPED that a user does not need (the image leaves them out too).
NOT_SHIPPED_UNDER_SHIPPED = ("trainer/tests/",)
# What it must not hold: developer tooling, local state, the repo's own configuration.
NEVER_SHIPPED = ("tests/", "molecule/", "benchmarks/", "out/", ".venv/", ".collections/", "scripts/",
                 ".ci/", ".ansible/", ".cache/", "trainer/tests/", "ansible.cfg", "Makefile",
                 "requirements.txt", ".ansible-lint", ".gitignore")
# Written by ansible-galaxy into every artifact.
GALAXY_FILES = {"MANIFEST.json", "FILES.json"}

RECAP_RE = re.compile(
    r"^localhost\s+:\s+ok=(?P<ok>\d+)\s+changed=(?P<changed>\d+)\s+unreachable=(?P<unreachable>\d+)\s+"
    r"failed=(?P<failed>\d+)\s+skipped=(?P<skipped>\d+)\s+rescued=(?P<rescued>\d+)\s+ignored=(?P<ignored>\d+)",
    re.M,
)


def _run(argv, env, cwd, timeout, what):
    """Run argv; fail the test with the output's tail when it times out."""
    proc = None
    try:
        proc = subprocess.run([str(a) for a in argv], cwd=str(cwd), env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        pytest.fail("%s did not finish within %ds:\n%s" % (what, timeout, out[-4000:]))
    return proc


def _ok(proc, what):
    assert proc.returncode == 0, "%s: rc=%s\nstdout:\n%s\nstderr:\n%s" % (
        what, proc.returncode, proc.stdout[-6000:], proc.stderr[-4000:])
    return proc


def _git_files(*args):
    out = subprocess.run(["git", "ls-files", "-z", *args], cwd=str(ROOT), stdout=subprocess.PIPE, check=True,
                         timeout=GIT_TIMEOUT).stdout.decode()
    return set(filter(None, out.split("\0")))


def _site_packages():
    import ansible_collections  # pylint: disable=import-outside-toplevel  # the venv's bundled collections
    return str(Path(list(ansible_collections.__path__)[0]).parent)


@pytest.fixture(scope="module")
def user_dir(tmp_path_factory):
    """A user's working directory outside the checkout, with its own ansible.cfg."""
    home = tmp_path_factory.mktemp("user")
    assert ROOT not in home.parents
    (home / "ansible.cfg").write_text("[defaults]\ninterpreter_python = auto_silent\nretry_files_enabled = false\n"
                                      "stdout_callback = default\nresult_format = yaml\n")
    return home


@pytest.fixture(scope="module")
def collections_path(tmp_path_factory):
    return tmp_path_factory.mktemp("collections")


@pytest.fixture(scope="module")
def user_env(user_dir, collections_path):
    """The environment of a user who installed the collection (nothing of this run's ANSIBLE_/AWS_)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AWS_", "ANSIBLE_", "KUBECONFIG", "TRAINFLEET_"))}
    env.update(
        PATH=str(VENV_BIN) + os.pathsep + env.get("PATH", ""),
        ANSIBLE_CONFIG=str(user_dir / "ansible.cfg"),
        # Our install, then the collections the ansible package bundles (our dependencies); not
        # sys.path, so nothing else on this machine can stand in for either.
        ANSIBLE_COLLECTIONS_PATH=os.pathsep.join([str(collections_path), _site_packages()]),
        ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="false",
        ANSIBLE_LOCAL_TEMP=str(user_dir / ".ansible-tmp"),
        ANSIBLE_NOCOLOR="1",
        # No distribution server is reachable: a closed loopback port.
        ANSIBLE_GALAXY_SERVER="http://127.0.0.1:9/",
    )
    return env


@pytest.fixture(scope="module")
def tarball(tmp_path_factory, user_dir, user_env):
    """ansible-galaxy collection build of the checkout, into a temp dir."""
    out = tmp_path_factory.mktemp("dist")
    _ok(_run([VENV_BIN / "ansible-galaxy", "collection", "build", "--output-path", out, ROOT],
             user_env, user_dir, BUILD_TIMEOUT, "ansible-galaxy collection build"), "collection build")
    built = sorted(out.glob("trainfleet-training-*.tar.gz"))
    assert len(built) == 1, built
    return built[0]


@pytest.fixture(scope="module")
def members(tarball):
    """Regular files in the artifact, by path."""
    with tarfile.open(tarball) as tar:
        return {m.name[2:] if m.name.startswith("./") else m.name for m in tar.getmembers() if m.isfile()}


@pytest.fixture(scope="module")
def installed(tarball, collections_path, user_dir, user_env):
    """ansible-galaxy collection install --no-deps of the artifact into the temp collections path."""
    _ok(_run([VENV_BIN / "ansible-galaxy", "collection", "install", "--no-deps", "-p", collections_path, tarball],
             user_env, user_dir, INSTALL_TIMEOUT, "ansible-galaxy collection install"), "collection install")
    path = collections_path / "ansible_collections" / "trainfleet" / "training"
    assert (path / "MANIFEST.json").is_file()
    return path


@pytest.fixture(scope="module")
def galaxy():
    with open(ROOT / "galaxy.yml", encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def _modules():
    return sorted(p.stem for p in (ROOT / "plugins" / "modules").glob("*.py") if p.stem != "__init__")


def _roles():
    return sorted(p.parent.parent.name for p in (ROOT / "roles").glob("*/tasks/main.yml"))


def _redirects():
    """Module and action redirects in meta/runtime.yml (plugin_routing), by name."""
    with open(ROOT / "meta" / "runtime.yml", encoding="utf-8") as handle:
        routing = (yaml.safe_load(handle) or {}).get("plugin_routing") or {}
    return sorted(name for kind in ("modules", "action") for name, entry in (routing.get(kind) or {}).items()
                  if (entry or {}).get("redirect"))


# --- the artifact --------------------------------------------------------------------------------

@pytest.mark.parametrize("prefix", SHIPPED)
def test_artifact_holds_every_tracked_file_users_need(members, prefix):
    wanted = {f for f in _git_files() if (f.startswith(prefix) or f == prefix)
              and not f.startswith(NOT_SHIPPED_UNDER_SHIPPED)}
    assert wanted, "no tracked file under %s" % prefix
    missing = sorted(wanted - members)
    assert not missing, "left out of the artifact: %s" % missing


@pytest.mark.parametrize("prefix", NEVER_SHIPPED)
def test_artifact_leaves_out_what_users_do_not_need(members, prefix):
    shipped = sorted(m for m in members if m.startswith(prefix) or m == prefix.rstrip("/"))
    assert not shipped, "in the artifact: %s" % shipped


def test_artifact_holds_only_files_of_the_checkout(members):
    """Nothing git ignores (test output, caches, venv, earlier builds) gets into the artifact."""
    ours = _git_files("--cached", "--others", "--exclude-standard")
    stray = sorted(members - ours - GALAXY_FILES)
    assert not stray, "not files of the checkout: %s" % stray


def test_manifest_declares_the_dependencies(tarball, galaxy):
    with tarfile.open(tarball) as tar:
        manifest = json.load(tar.extractfile("MANIFEST.json"))["collection_info"]
    assert manifest["dependencies"] == galaxy["dependencies"]
    assert manifest["version"] == galaxy["version"]


def test_every_collection_we_call_is_a_dependency(galaxy):
    """Each namespace.collection named in roles/, plugins/ and playbooks/ is declared."""
    fqcn_re = re.compile(r"\b(?:ansible_collections\.)?([a-z][a-z0-9_]*)\.([a-z][a-z0-9_]*)\.(?:plugins\.)?[a-z_]")
    known = set(galaxy["dependencies"]) | {"ansible.builtin", FQCN}
    site = Path(_site_packages()) / "ansible_collections"
    used = set()
    for area in ("roles", "plugins", "playbooks"):
        for path in (ROOT / area).rglob("*"):
            if path.suffix in (".yml", ".yaml", ".py", ".j2") and path.is_file():
                for ns, name in fqcn_re.findall(path.read_text(encoding="utf-8")):
                    # Only names of collections that exist (not k8s labels, hosts or file names).
                    if (site / ns / name / "MANIFEST.json").is_file() or (ns, name) == ("trainfleet", "training"):
                        used.add("%s.%s" % (ns, name))
    assert "amazon.aws" in used and "kubernetes.core" in used, used
    assert not sorted(used - known), "used but not in galaxy.yml dependencies: %s" % sorted(used - known)


def test_dependencies_resolve_offline_from_the_bundled_collections(tarball, tmp_path, user_dir, user_env):
    """ansible-galaxy's own resolver: every range is met by the venv's collections, nothing fetched."""
    proc = _ok(_run([VENV_BIN / "ansible-galaxy", "collection", "install", "--offline", "-p", tmp_path, tarball],
                    user_env, user_dir, INSTALL_TIMEOUT, "ansible-galaxy collection install --offline"),
               "offline install with dependencies")
    with tarfile.open(tarball) as tar:
        deps = json.load(tar.extractfile("MANIFEST.json"))["collection_info"]["dependencies"]
    assert deps
    for dep in deps:
        assert re.search(r"'%s:[0-9.]+' is already installed" % re.escape(dep), proc.stdout), proc.stdout
    # Only our collection was written: the dependencies were found, not installed.
    assert sorted(p.name for p in (tmp_path / "ansible_collections").iterdir()) == ["trainfleet"]


def test_install_from_a_git_url_gives_the_same_files(tmp_path, members, user_dir, user_env):
    """The README's other route: ansible-galaxy collection install git+<url> (here a file:// clone
    of the checkout's files as they are now, committed in a repo of its own)."""
    snapshot = tmp_path / "training"
    for rel in sorted(_git_files("--cached", "--others", "--exclude-standard")):
        src, dest = ROOT / rel, snapshot / rel
        if not os.path.lexists(src):
            continue  # deleted in the working tree, not yet in the index
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest, follow_symlinks=False)
    commit = ["-c", "user.name=test", "-c", "user.email=test@invalid", "-c", "commit.gpgsign=false",
              "commit", "-qm", "snapshot"]
    for argv in (["init", "-q"], ["add", "-A"], commit):
        _ok(_run(["git", *argv], user_env, snapshot, GIT_TIMEOUT, "git"), "git %s" % argv)
    dest = tmp_path / "collections"
    _ok(_run([VENV_BIN / "ansible-galaxy", "collection", "install", "--no-deps", "-p", dest,
              "git+file://%s" % snapshot], user_env, user_dir, INSTALL_TIMEOUT, "install from git"),
        "ansible-galaxy collection install git+file://")
    with open(dest / "ansible_collections" / "trainfleet" / "training" / "FILES.json", encoding="utf-8") as handle:
        files = {f["name"] for f in json.load(handle)["files"] if f["ftype"] == "file"}
    assert sorted(files ^ (members - GALAXY_FILES)) == []


# --- the installed collection, from a user's directory --------------------------------------------

def test_installed_collection_is_the_one_used(installed, user_dir, user_env, collections_path):
    proc = _ok(_run([VENV_BIN / "ansible-galaxy", "collection", "list", FQCN, "--format", "json"],
                    user_env, user_dir, DOC_TIMEOUT, "ansible-galaxy collection list"), "collection list")
    found = json.loads(proc.stdout)
    assert list(found) == [str(collections_path / "ansible_collections")], found
    assert (installed / "roles" / "trainer_image" / ".." / ".." / "trainer" / "Dockerfile").is_file()


@pytest.mark.parametrize("module", _modules() + _redirects())
def test_ansible_doc_of_module(installed, user_dir, user_env, module):
    name = "%s.%s" % (FQCN, module)
    proc = _ok(_run([VENV_BIN / "ansible-doc", "--json", "-t", "module", name], user_env, user_dir,
                    DOC_TIMEOUT, "ansible-doc " + name), "ansible-doc " + name)
    # ansible-doc exits 0 with {} for a module it cannot load: the document itself is the proof.
    doc = json.loads(proc.stdout).get(name, {}).get("doc")
    assert doc, "no documentation for %s:\n%s" % (name, proc.stderr[-3000:])
    assert doc["filename"].startswith(str(installed)), doc["filename"]
    assert doc.get("options") or doc.get("short_description")


def test_ansible_doc_of_roles(installed, user_dir, user_env):
    names = ["%s.%s" % (FQCN, r) for r in _roles()]
    proc = _ok(_run([VENV_BIN / "ansible-doc", "--json", "-t", "role", *names], user_env, user_dir,
                    DOC_TIMEOUT, "ansible-doc -t role"), "ansible-doc -t role")
    docs = json.loads(proc.stdout)
    assert sorted(docs) == sorted(names), proc.stderr[-3000:]
    for name, doc in docs.items():
        assert "main" in doc["entry_points"], name
        assert str(doc["path"]).startswith(str(installed)), (name, doc["path"])


def test_syntax_check_of_every_role_and_playbook(installed, user_dir, user_env):
    """A user playbook naming every role and importing every collection playbook, by FQCN."""
    playbook = [{"name": "Every role of %s" % FQCN, "hosts": "localhost", "gather_facts": False,
                 "roles": [{"role": "%s.%s" % (FQCN, r)} for r in _roles()]}]
    # The checkout's playbooks (not the installed ones): one the artifact lacks fails the check.
    playbook += [{"name": "Collection playbook %s" % p.stem,
                  "ansible.builtin.import_playbook": "%s.%s" % (FQCN, p.stem)}
                 for p in sorted((ROOT / "playbooks").glob("*.yml"))]
    path = user_dir / "every_role.yml"
    path.write_text(yaml.safe_dump(playbook, sort_keys=False))
    _ok(_run([VENV_BIN / "ansible-playbook", "--syntax-check", "-i", "localhost,", path], user_env, user_dir,
             PLAYBOOK_TIMEOUT, "ansible-playbook --syntax-check"), "syntax check of every role and playbook")
    # The collection's own entry point, run from where it was installed.
    _ok(_run([VENV_BIN / "ansible-playbook", "--syntax-check", "-i", "localhost,", installed / "site.yml"],
             user_env, user_dir, PLAYBOOK_TIMEOUT, "ansible-playbook --syntax-check site.yml"),
        "syntax check of the installed site.yml")


# --- a user's playbook: the AWS roles and a module, in check mode against moto ---------------------

USER_INVENTORY = """\
all:
  children:
    training:
      hosts:
        localhost:
          ansible_connection: local
          ansible_python_interpreter: "{{ ansible_playbook_python }}"
      vars:
        trainfleet_platform: aws
        trainfleet_name: mytrain
        trainfleet_aws_region: %(region)s
        trainfleet_tags:
          project: mytrain
          owner: installed-collection-test
        s3_bucket_name: mytrain-%(account)s-%(region)s
"""

USER_PLAYBOOK = """\
---
- name: My training account, planned with the installed collection
  hosts: training
  gather_facts: false
  roles:
    - role: trainfleet.training.iam
    - role: trainfleet.training.s3
    - role: trainfleet.training.ecr
  post_tasks:
    - name: Look for anything tagged with my project
      trainfleet.training.aws_tagged_resources_info:
        tags: "{{ trainfleet_tags }}"
        services: [iam, ecr, s3]
        region: "{{ trainfleet_aws_region }}"
        endpoint_url: "{{ trainfleet_aws_endpoint_url }}"
      register: leftovers

    - name: Check mode created nothing
      ansible.builtin.assert:
        that: leftovers.arns | length == 0
        fail_msg: "created in check mode: {{ leftovers.arns }}"
"""


@pytest.fixture(scope="module")
def user_check_run(installed, moto_endpoint, user_dir, user_env):
    """ansible-playbook --check of a user's playbook of roles iam, s3, ecr, once."""
    (user_dir / "inventory.yml").write_text(USER_INVENTORY % dict(region=REGION, account=MOTO_ACCOUNT))
    (user_dir / "account.yml").write_text(USER_PLAYBOOK)
    cache = user_dir / "cache"
    env = dict(user_env, AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
               AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull,
               ANSIBLE_CALLBACK_RESULT_FORMAT="json", TRAINFLEET_CACHE=str(cache))
    proc = _run([VENV_BIN / "ansible-playbook", "-i", "inventory.yml", "account.yml", "--check",
                 "-e", "trainfleet_aws_endpoint_url=" + moto_endpoint], env, user_dir, PLAYBOOK_TIMEOUT,
                "the user playbook")
    out = proc.stdout + proc.stderr
    (user_dir / "account-check.log").write_text(out)
    return dict(rc=proc.returncode, out=out, cache=cache, endpoint=moto_endpoint)


def test_user_playbook_succeeds(user_check_run):
    assert user_check_run["rc"] == 0, user_check_run["out"][-6000:]
    recaps = RECAP_RE.findall(user_check_run["out"])
    assert len(recaps) == 1, user_check_run["out"][-3000:]
    stats = RECAP_RE.search(user_check_run["out"]).groupdict()
    for key in ("failed", "unreachable", "rescued", "ignored"):
        assert stats[key] == "0", "%s=%s in the recap" % (key, stats[key])
    assert int(stats["changed"]) >= 4


@pytest.mark.parametrize("planned", [
    "TASK [trainfleet.training.iam : Create the training role (trusted by pod_identity)]",
    "TASK [trainfleet.training.iam : Create the node role (EC2 trust, ECR pull, EKS worker policies)]",
    "check mode: bucket mytrain-%s-%s (%s) does not exist and would be created" % (MOTO_ACCOUNT, REGION, REGION),
    "check mode: ECR repository %s.dkr.ecr.%s.amazonaws.com/mytrain/trainer would be created" % (MOTO_ACCOUNT, REGION),
    "TASK [Look for anything tagged with my project]",
], ids=["iam-training-role", "iam-node-role", "s3-bucket", "ecr-repository", "own-module"])
def test_user_playbook_reports_the_plan(user_check_run, planned):
    assert planned in user_check_run["out"], user_check_run["out"][-6000:]


def test_user_playbook_created_nothing(user_check_run):
    kw = dict(endpoint_url=user_check_run["endpoint"], aws_access_key_id="testing", aws_secret_access_key="testing",
              region_name=REGION)
    iam = boto3.client("iam", **kw)
    assert [r["RoleName"] for r in iam.list_roles()["Roles"]] == []
    assert [p["PolicyName"] for p in iam.list_policies(Scope="Local")["Policies"]] == []
    assert boto3.client("s3", **kw).list_buckets()["Buckets"] == []
    assert boto3.client("ecr", **kw).describe_repositories()["repositories"] == []
    assert not user_check_run["cache"].exists()
