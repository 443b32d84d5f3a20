"""A real moto server on a free loopback port, started and stopped with bounded waits.

Used by tests/integration (site.yml --check against a local AWS endpoint) and trainer/tests
(s3:// round trips). trainer/ ships in the image without its tests, so the image never needs this.
"""

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

START_TIMEOUT = 60
STOP_TIMEOUT = 15


def free_port():
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def answers(url):
    """True once anything answers HTTP on url (an HTTP error status is an answer too)."""
    try:
        with urllib.request.urlopen(url, timeout=2):
            return True
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False


class MotoStartError(RuntimeError):
    """The server exited or did not answer within the start timeout."""


@contextlib.contextmanager
def moto_server(log_path, env=None, start_timeout=START_TIMEOUT):
    """Run `python -m moto.server` on a free port; yields its URL, always stops it.

    log_path gets the server's output (shown in the error when it does not come up); env adds
    variables to the server's environment (e.g. MOTO_IAM_LOAD_MANAGED_POLICIES=true).
    """
    port = free_port()
    url = "http://127.0.0.1:%d" % port
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(  # pylint: disable=consider-using-with
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, **(env or {})),
            cwd=os.path.dirname(os.path.abspath(log_path)))
    try:
        deadline = time.monotonic() + start_timeout
        while not answers(url + "/moto-api/"):
            if proc.poll() is not None or time.monotonic() > deadline:
                with open(log_path, "rb") as log:
                    tail = log.read()[-2000:].decode("utf-8", "replace")
                raise MotoStartError("moto server on %s did not answer within %ds (rc=%s): %s"
                                     % (url, start_timeout, proc.poll(), tail))
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=STOP_TIMEOUT)
