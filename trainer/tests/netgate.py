"""A TCP gate in front of a real server: open, it forwards 127.0.0.1:<port> to the target; closed, the
port refuses connections and every open connection is reset. The trainer is pointed at the gate,
so a test can make the (real) moto server unreachable for a while without stopping it (moto keeps
its objects in memory: a restart would lose the bucket)."""

import socket
import struct
import threading

from tests.support.moto import free_port

_CHUNK = 65536


def _reset(sock):
    """Close with RST (SO_LINGER 0): the peer sees "connection reset by peer"."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass


class TcpGate:
    """Forwarder with open()/close(); use as a context manager (stop() always runs)."""

    def __init__(self, target_host, target_port, connect_timeout=5.0):
        self.target = (target_host, target_port)
        self.port = free_port()
        self.connect_timeout = connect_timeout
        self._lock = threading.Lock()
        self._listener = None
        self._conns = set()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self):
        self.open()
        return self

    def __exit__(self, *exc):
        self.stop()

    def open(self):
        with self._lock:
            if self._listener is not None:
                return
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", self.port))
            sock.listen(64)
            self._listener = sock
        threading.Thread(target=self._accept, args=(sock,), daemon=True).start()

    def close(self):
        """Refuse new connections and reset the open ones."""
        with self._lock:
            listener, self._listener = self._listener, None
            conns, self._conns = self._conns, set()
        if listener is not None:
            try:
                listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            listener.close()
        for sock in conns:
            _reset(sock)

    stop = close

    def _accept(self, listener):
        while True:
            try:
                client, _addr = listener.accept()
            except OSError:
                return  # closed
            try:
                upstream = socket.create_connection(self.target, timeout=self.connect_timeout)
                upstream.settimeout(None)
            except OSError:
                _reset(client)
                continue
            with self._lock:
                if self._listener is not listener:  # closed meanwhile
                    _reset(client)
                    _reset(upstream)
                    return
                self._conns.update((client, upstream))
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src, dst):
        try:
            while True:
                data = src.recv(_CHUNK)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with self._lock:
                self._conns.discard(src)
                self._conns.discard(dst)
            for sock in (src, dst):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                try:
                    sock.close()
                except OSError:
                    pass
