#!/usr/bin/python3 -I
"""OCI runtime wrapper for hosts whose capability bounding set is restricted (trainfleet).

Docker 20.10 asks the runtime for every capability the kernel knows when a container is
privileged.  On hosts whose bounding set lacks some of them (e.g. CAP_SYS_RESOURCE) runc fails
with "unable to apply caps: operation not permitted", and kind always starts its nodes
privileged (its `docker run` arguments are fixed: no way to pick a runtime for them).  So this
wrapper is dockerd's default runtime, and for kind node containers only it edits the OCI process
spec before runc sees it:

* capabilities outside the current bounding set are removed from every capability set;
* rlimits above the current hard limits are clamped to those limits.

A kind node container is one whose Docker labels hold io.x-k8s.kind.cluster (what `kind create
cluster` puts on its nodes), or whose image is one of the kind node images (the node image build
runs one privileged container of it).  Docker keeps both in <data root>/containers/<id>/config.v2.json.
Every other container, and every other runc command, is passed to runc untouched.

Handled invocations: ``create``/``run`` (``--bundle DIR``/``-b DIR``, DIR/config.json, default
DIR is the working directory) and ``exec`` (``--process FILE``/``-p FILE``), the container id
being the last argument (how containerd's shim calls runc).  When the spec of a kind node cannot
be clamped the wrapper fails (exit 1, the reason on stderr) instead of starting it unclamped.

Python runs isolated (-I: no PYTHON* variable, no user site, no script directory on sys.path).
The real runc, Docker's data root and the kind node images come from <this file>.json, which the
docker_engine role installs beside the wrapper (root's, mode 0644): the path is found from the
wrapper's own path, no environment variable changes it. A configuration that is missing,
unreadable, not the wrapper owner's alone (another owner, group or world writable) or not of the
expected types makes every invocation fail (exit 1, the reason on stderr): the wrapper never
guesses, and never passes a kind node through unclamped for want of its configuration.
"""

import collections
import json
import os
import re
import resource
import sys

# The wrapper's configuration (see load_settings): <wrapper path>.json, written by the role.
SETTINGS_PATH = os.path.abspath(__file__) + ".json"
SETTINGS_KEYS = ("RUNC", "DOCKER_DATA_ROOT", "KIND_NODE_IMAGES")
MAX_SETTINGS_BYTES = 1024 * 1024
KIND_NODE_LABEL = "io.x-k8s.kind.cluster"
CONTAINER_ID = re.compile(r"^[0-9a-f]{64}\Z")
MAX_CONFIG_BYTES = 16 * 1024 * 1024

# Linux capability numbers (include/uapi/linux/capability.h).
CAPABILITIES = [
    "CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID",
    "SETPCAP", "LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST", "NET_ADMIN", "NET_RAW",
    "IPC_LOCK", "IPC_OWNER", "SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT",
    "SYS_ADMIN", "SYS_BOOT", "SYS_NICE", "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD",
    "LEASE", "AUDIT_WRITE", "AUDIT_CONTROL", "SETFCAP", "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG",
    "WAKE_ALARM", "BLOCK_SUSPEND", "AUDIT_READ", "PERFMON", "BPF", "CHECKPOINT_RESTORE",
]

RLIMITS = {
    name: getattr(resource, name)
    for name in (
        "RLIMIT_AS", "RLIMIT_CORE", "RLIMIT_CPU", "RLIMIT_DATA", "RLIMIT_FSIZE", "RLIMIT_LOCKS",
        "RLIMIT_MEMLOCK", "RLIMIT_MSGQUEUE", "RLIMIT_NICE", "RLIMIT_NOFILE", "RLIMIT_NPROC",
        "RLIMIT_RSS", "RLIMIT_RTPRIO", "RLIMIT_RTTIME", "RLIMIT_SIGPENDING", "RLIMIT_STACK",
    )
    if hasattr(resource, name)
}

Settings = collections.namedtuple("Settings", ["runc", "data_root", "kind_node_images"])


class ClampError(Exception):
    """The spec of a kind node could not be clamped: the container must not start."""


class SettingsError(Exception):
    """The wrapper's configuration is missing, unreadable or malformed: runc must not run."""


def absolute_path(document, key):
    """document[key], which must be an absolute path."""
    value = document[key]
    if not isinstance(value, str) or not os.path.isabs(value) or "\0" in value:
        raise SettingsError("%s must be an absolute path (got %s)" % (key, json.dumps(value)))
    return value


def load_settings(path):
    """The Settings in the JSON object at path, which the role writes (root's, mode 0644):
    {"RUNC": "/usr/bin/runc", "DOCKER_DATA_ROOT": "/var/lib/docker", "KIND_NODE_IMAGES": [...]}.
    It names the program this wrapper execs, so it must belong to the wrapper's owner and be
    writable by nobody else."""
    wrapper = os.path.abspath(__file__)
    try:
        with open(path, "rb") as handle:
            status = os.fstat(handle.fileno())
            raw = handle.read(MAX_SETTINGS_BYTES + 1)
        owner = os.stat(wrapper).st_uid
    except FileNotFoundError:
        raise SettingsError("missing (the docker_engine role installs it)") from None
    except OSError as error:
        raise SettingsError("unreadable: %s" % error) from None
    if status.st_uid != owner or status.st_mode & 0o022:
        raise SettingsError("must belong to uid %d (the wrapper's owner) and be writable by nobody else"
                            " (uid %d, mode %04o)" % (owner, status.st_uid, status.st_mode & 0o7777))
    if len(raw) > MAX_SETTINGS_BYTES:
        raise SettingsError("larger than %d bytes" % MAX_SETTINGS_BYTES)
    try:
        document = json.loads(raw.decode("utf-8"))
    except ValueError as error:
        raise SettingsError("not JSON: %s" % error) from None
    if not isinstance(document, dict):
        raise SettingsError("not a JSON object")
    missing = [key for key in SETTINGS_KEYS if key not in document]
    unexpected = sorted(key for key in document if key not in SETTINGS_KEYS)
    if missing or unexpected:
        raise SettingsError("keys missing: %s; unexpected: %s" % (", ".join(missing) or "none", ", ".join(unexpected) or "none"))
    runc = absolute_path(document, "RUNC")
    data_root = absolute_path(document, "DOCKER_DATA_ROOT")
    images = document["KIND_NODE_IMAGES"]
    if not isinstance(images, list) or not all(isinstance(image, str) for image in images):
        raise SettingsError("KIND_NODE_IMAGES must be a list of strings (got %s)" % json.dumps(images))
    if os.path.abspath(runc) == wrapper:
        raise SettingsError("RUNC is this wrapper itself (%s)" % runc)
    return Settings(runc, data_root, tuple(images))


def allowed_capabilities():
    """Names (CAP_X) of the capabilities in this process' bounding set."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("CapBnd:"):
                mask = int(line.split()[1], 16)
                break
        else:
            raise ClampError("no CapBnd line in /proc/self/status")
    return {
        "CAP_" + name for bit, name in enumerate(CAPABILITIES) if mask & (1 << bit)
    }


def clamp_process(process):
    """Clamp one OCI "process" object in place; True when something changed."""
    changed = False
    allowed = allowed_capabilities()
    caps = process.get("capabilities") or {}
    for kind, names in caps.items():
        if isinstance(names, list):
            kept = [name for name in names if name in allowed]
            if kept != names:
                caps[kind] = kept
                changed = True
    for limit in process.get("rlimits") or []:
        number = RLIMITS.get(limit.get("type"))
        if number is None:
            continue
        _soft, hard = resource.getrlimit(number)
        if hard == resource.RLIM_INFINITY:
            continue
        for key in ("hard", "soft"):
            if limit.get(key, 0) > hard:
                limit[key] = hard
                changed = True
    return changed


def rewrite(path, select):
    """Load the JSON document at path, clamp the process in it, write it back if changed."""
    with open(path, encoding="utf-8") as handle:
        document = json.load(handle)
    process = select(document)
    if not isinstance(process, dict):
        raise ClampError("%s holds no process object" % path)
    if not clamp_process(process):
        return
    temporary = path + ".capclamp"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(document, handle)
    os.chmod(temporary, os.stat(path).st_mode & 0o7777)
    os.replace(temporary, path)


def option(args, long_name, short_name):
    """Value of --long VALUE, --long=VALUE or -s VALUE in args, else None."""
    for index, arg in enumerate(args):
        if arg in (long_name, short_name) and index + 1 < len(args):
            return args[index + 1]
        if arg.startswith(long_name + "="):
            return arg.split("=", 1)[1]
    return None


def image_repository(reference):
    """trainfleet/kind-node from trainfleet/kind-node:v1.32.2 (or ...@sha256:...)."""
    name = reference.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        name = name[:len(name) - len(last)] + last.split(":", 1)[0]
    return name


def is_kind_node(container_id, settings):
    """True when Docker's record of the container says it is a kind node. False otherwise, also
    when there is no readable record (a container this engine did not create): such a container
    is passed through untouched, as if there were no wrapper."""
    if not CONTAINER_ID.match(container_id):
        return False
    path = os.path.join(settings.data_root, "containers", container_id, "config.v2.json")
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_CONFIG_BYTES + 1)
        if len(raw) > MAX_CONFIG_BYTES:
            raise ValueError("larger than %d bytes" % MAX_CONFIG_BYTES)
        config = json.loads(raw.decode("utf-8")).get("Config") or {}
        labels = config.get("Labels") or {}
        image = config.get("Image") or ""
        if not isinstance(labels, dict) or not isinstance(image, str):
            raise ValueError("unexpected Labels or Image")
    except FileNotFoundError:
        return False
    except (OSError, ValueError, AttributeError) as error:
        sys.stderr.write("runc-capclamp: %s: %s; passed through untouched\n" % (path, error))
        return False
    return KIND_NODE_LABEL in labels or image_repository(image) in settings.kind_node_images


def adjust(args, settings):
    """Clamp the spec of a kind node for create/run/exec; leave everything else alone."""
    command = next((arg for arg in args if arg in ("create", "run", "exec")), None)
    if command is None:
        return
    container_id = args[-1]
    if command in ("create", "run"):
        bundle = option(args, "--bundle", "-b") or os.getcwd()
        if is_kind_node(container_id, settings):
            rewrite(os.path.join(bundle, "config.json"), lambda doc: doc.get("process"))
    else:
        process_file = option(args, "--process", "-p")
        if process_file and is_kind_node(container_id, settings):
            rewrite(process_file, lambda doc: doc)


def main(argv):
    """Adjust the spec of a kind node, then exec the real runc with the original arguments."""
    args = argv[1:]
    try:
        settings = load_settings(SETTINGS_PATH)
    except SettingsError as error:
        sys.stderr.write("runc-capclamp: not running runc: configuration %s: %s\n" % (SETTINGS_PATH, error))
        return 1
    try:
        adjust(args, settings)
    except (ClampError, OSError, ValueError) as error:
        sys.stderr.write("runc-capclamp: not starting kind node %s: %s\n" % (args[-1] if args else "?", error))
        return 1
    try:
        os.execv(settings.runc, [settings.runc] + args)
    except OSError as error:
        sys.stderr.write("runc-capclamp: cannot run %s: %s\n" % (settings.runc, error))
    return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv))
