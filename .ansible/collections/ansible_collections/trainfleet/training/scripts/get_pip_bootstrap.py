"""Stand-in for the get-pip.py bootstrap script that ansible-test downloads from its own CI host.

That host is unreachable here, so scripts/sanity.sh places this file in ansible-test's cache
(~/.ansible/test/cache/get_pip_<version>.py). ansible-test runs it inside a fresh virtual
environment created without pip, with the arguments it would give get-pip.py (the pinned pip and
options). We install the pip bundled with CPython (ensurepip, no network), then let that pip
install the exact packages ansible-test asked for from the configured package index.
"""
import ensurepip
import os
import ssl
import subprocess
import sys


def main() -> int:
    ensurepip.bootstrap(upgrade=False, default_pip=True)
    args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
    # ansible-test hides pip's configuration (PIP_CONFIG_FILE=/dev/null), and the bundled pip
    # trusts only its own CA bundle: point it at the system store, as newer pip does by itself.
    paths = ssl.get_default_verify_paths()
    cafile = os.environ.get("PIP_CERT") or next((f for f in (paths.cafile, paths.openssl_cafile) if f and os.path.exists(f)), None)
    if cafile:
        args = ["--cert", cafile, *args]
    return subprocess.call([sys.executable, "-m", "pip", "install", "--upgrade", *args])


if __name__ == "__main__":
    sys.exit(main())
