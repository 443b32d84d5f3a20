# -*- coding: utf-8 -*-
"""A TCP listener that accepts every connection and never answers (a cluster being torn down)."""

from __future__ import annotations

import contextlib
import socket
import threading


@contextlib.contextmanager
def silent_listener(backlog=16):
    """Yield (port, held): held lists the connections accepted so far; all are closed on exit."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(backlog)
    held = []

    def accept():
        try:
            while True:
                held.append(listener.accept()[0])
        except OSError:
            return

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield listener.getsockname()[1], held
    finally:
        listener.close()
        for conn in held:
            conn.close()
