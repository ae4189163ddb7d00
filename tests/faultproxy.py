"""A fault-injecting HTTP proxy in front of the real API server, for the retry tests.

The client under test speaks plain HTTP to the proxy on a free 127.0.0.1 port; the
proxy forwards each request to the API server over TLS with the admin credentials of
the control plane's kubeconfig, and counts every request it sees. Faults are queued per
method and used up in order:

* ``lose_responses(method, n)``: the next ``n`` such requests are forwarded (the server
  carries them out) and then the client's connection is closed without a byte of the
  answer: the response was lost after the server processed the request.
* ``answer(method, status, retry_after, n)``: the next ``n`` such requests are answered
  by the proxy itself with ``status`` and a ``Retry-After`` header, never forwarded.
* ``end_watches()``: from now on every WATCH (``watch=true``) is answered by the proxy
  with 200 and an empty body, never forwarded: a watch that ends cleanly at once with no
  event, as a misbehaving proxy or server does. ``watches_ended`` counts them.

``FaultProxy`` is a context manager: it starts its server thread on entry and stops it
(and closes its upstream pool) on exit.
"""

from __future__ import annotations

import http.server
import socket
import threading
from collections import Counter
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import urllib3
from kubernetes import client as k8s_client

from cronjob_operator.runtime.client import load_configuration

__all__ = ["FaultProxy"]

_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


@dataclass
class _Fault:
    lose: bool
    status: int = 0
    retry_after: str | None = None


class FaultProxy:
    """Forwards to the API server of ``kubeconfig``, injecting queued faults (module doc)."""

    def __init__(self, kubeconfig: str) -> None:
        configuration = load_configuration(kubeconfig)
        self._upstream_host = configuration.host.rstrip("/")
        self._upstream: urllib3.PoolManager = k8s_client.rest.RESTClientObject(
            configuration
        ).pool_manager
        self._lock = threading.Lock()
        self._faults: dict[str, list[_Fault]] = {}
        self.seen: Counter[tuple[str, str]] = Counter()
        self._ending_watches = False
        self.watches_ended = 0
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """Where a client reaches the proxy."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def lose_responses(self, method: str, times: int = 1) -> None:
        """Forward the next ``times`` requests of ``method``, then drop their answers."""
        self._queue(method, [_Fault(lose=True)] * times)

    def answer(self, method: str, status: int, retry_after: str | None, times: int = 1) -> None:
        """Answer the next ``times`` requests of ``method`` with ``status``, unforwarded."""
        self._queue(method, [_Fault(False, status, retry_after)] * times)

    def end_watches(self) -> None:
        """End every later WATCH at once, cleanly and without an event (module doc)."""
        with self._lock:
            self._ending_watches = True

    def _ends_watch(self, method: str, path: str) -> bool:
        """True (and counted) if this request is a WATCH the proxy is to end at once."""
        query = path.partition("?")[2].split("&")
        with self._lock:
            ends = self._ending_watches and method == "GET" and "watch=true" in query
            self.watches_ended += ends
            return ends

    def count(self, method: str, path: str) -> int:
        """How many requests of ``method`` on ``path`` (query excluded) the proxy saw."""
        with self._lock:
            return self.seen[(method, path)]

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)
        self._upstream.clear()

    def _queue(self, method: str, faults: list[_Fault]) -> None:
        with self._lock:
            self._faults.setdefault(method, []).extend(faults)

    def _next(self, method: str, path: str) -> _Fault | None:
        with self._lock:
            self.seen[(method, path.partition("?")[0])] += 1
            queued = self._faults.get(method)
            return queued.pop(0) if queued else None

    def _forward(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Any:
        return self._upstream.request(
            method,
            self._upstream_host + path,
            body=body or None,
            headers=headers,
            retries=False,
            timeout=urllib3.Timeout(connect=5.0, read=30.0),
        )

    def _handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: the test reads the counts, not a log."""

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                fault = proxy._next(self.command, self.path)
                if proxy._ends_watch(self.command, self.path):
                    self._reply(200, {"Content-Type": "application/json"}, b"")
                    return
                if fault is not None and not fault.lose:
                    self._reply(fault.status, {"Retry-After": fault.retry_after}, b"{}")
                    return
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
                upstream = proxy._forward(self.command, self.path, headers, body)
                if fault is not None:  # the server did it; the client never hears
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                kept = {"Content-Type": upstream.headers.get("Content-Type")}
                self._reply(upstream.status, kept, upstream.data)

            def _reply(self, status: int, headers: dict[str, str | None], body: bytes) -> None:
                self.send_response(status)
                for name, value in headers.items():
                    if value is not None:
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve  # noqa: N815

        return Handler
