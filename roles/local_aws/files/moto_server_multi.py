# -*- coding: utf-8 -*-
# Copyright: trainfleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""moto server on several addresses with one in-memory state (role local_aws).

``moto_server`` binds one address. The local stack needs two: 127.0.0.1 for this host's clients
and the kind network's gateway for the pods, and never 0.0.0.0 (moto has no authentication and
a reset endpoint). Every listener here serves the same moto application in the same process, so
a bucket created through one address is seen through the other.

The role installs this file as ``<run dir>/moto_server`` and starts it with the project's Python
in isolated mode: ``python3 -I <run dir>/moto_server --host 127.0.0.1 --host 172.18.0.1 --port 5050``.
Every address is bound before anything is served: one that cannot be bound stops the start with
exit code 1 and the reason. SIGTERM and SIGINT stop every listener.
"""

from __future__ import absolute_import, division, print_function

import argparse
import os
import signal
import sys
import threading

__metaclass__ = type


def parse_args(argv):
    """--host (repeated, at least once) and --port."""
    parser = argparse.ArgumentParser(prog="moto_server", description=__doc__.split("\n", 1)[0])
    parser.add_argument("-H", "--host", action="append", required=True,
                        help="an IPv4 address to listen on (repeat for several)")
    parser.add_argument("-p", "--port", type=int, required=True, help="the TCP port of every listener")
    args = parser.parse_args(argv)
    hosts = []
    for host in args.host:
        if host not in hosts:
            hosts.append(host)
    if "0.0.0.0" in hosts and len(hosts) > 1:
        parser.error("0.0.0.0 already covers every address; give it alone")
    if not 0 < args.port < 65536:
        parser.error("--port must be 1..65535, got %d" % args.port)
    args.host = hosts
    return args


def moto_application():
    """The WSGI application and request handler moto_server itself runs."""
    # Imported here so that --help and argument errors work without moto.
    from moto.moto_server.werkzeug_app import (  # pylint: disable=import-outside-toplevel
        DomainDispatcherApplication, MotoRequestHandler, create_backend_app)
    app = DomainDispatcherApplication(create_backend_app)
    app.debug = True  # as moto_server: tracebacks of moto's own errors in the response
    return app, MotoRequestHandler


def bind(hosts, port, app, handler):
    """One threaded WSGI server per host, all bound; on a failure the bound ones are closed."""
    from werkzeug.serving import make_server  # pylint: disable=import-outside-toplevel
    servers = []
    for host in hosts:
        try:
            servers.append(make_server(host, port, app, threaded=True, request_handler=handler))
        except (OSError, SystemExit) as error:  # werkzeug exits (after printing why) when a bind fails
            for server in servers:
                server.server_close()
            raise OSError("cannot listen on %s:%d (%s)" % (host, port, error)) from error
    return servers


def serve(servers, stop):
    """Serve every server in its own thread until stop is set, then shut them all down."""
    threads = [threading.Thread(target=server.serve_forever, name="moto-%s" % server.server_address[0], daemon=True)
               for server in servers]
    for thread in threads:
        thread.start()
    stop.wait()
    for server in servers:
        server.shutdown()
        server.server_close()
    for thread in threads:
        thread.join(timeout=10)


def main(argv=None):
    """Bind every --host, serve until SIGTERM/SIGINT; 0 on a clean stop, 1 when a bind fails."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    os.environ.setdefault("MOTO_PORT", str(args.port))
    app, handler = moto_application()
    try:
        servers = bind(args.host, args.port, app, handler)
    except OSError as error:
        sys.stderr.write("moto_server: %s\n" % error)
        return 1
    stop = threading.Event()

    def request_stop(_signum, _frame):
        stop.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    for server in servers:
        sys.stdout.write("moto_server: listening on http://%s:%d\n" % server.server_address[:2])
    sys.stdout.flush()
    serve(servers, stop)
    return 0


if __name__ == "__main__":
    sys.exit(main())
