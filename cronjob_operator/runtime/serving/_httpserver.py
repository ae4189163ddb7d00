"""The one HTTP/1.1 server behind probes, metrics and webhooks, hardened against bad clients.

The standard library's ``ThreadingHTTPServer`` starts a thread per connection and reads
as long as a client keeps sending: a client trickling a header one byte a second, or
opening thousands of connections, or announcing a 10 GiB body, ties up threads and
memory. ``HardenedServer`` and ``HardenedHandler`` bound all of it, as Go's
``http.Server`` fields do (``Limits`` names the Go field each one mirrors):

- ``max_connections``: connections served at once. At the cap, a new connection evicts
  the one that has waited longest for its request headers (an idle keep-alive or a slow
  client); only when every connection is busy in a request is it closed at accept;
- ``idle_timeout``: how long a kept-alive connection may wait for its next request;
- ``read_header_timeout``: from the first byte of a request to the end of its headers,
  for the whole header, not per byte (a one-byte-at-a-time client is cut off on time);
  it also bounds the TLS handshake;
- ``max_header_bytes``: request line plus headers (431 beyond; 414 for a long line),
  exact to within the 1 KiB read-ahead;
- ``read_timeout``: reading the body; ``max_body_bytes``: its size (413 beyond, before
  reading it; 411 without a Content-Length: chunked bodies are not accepted);
- ``write_timeout``: writing the answer, so a client that never reads cannot park a
  thread on a full socket buffer.

Time limits are deadlines on the whole phase: before every ``recv`` the socket timeout
is set to what is left. With a TLS ``context`` the handshake runs in the connection's
thread, under ``read_header_timeout``, so a silent client never blocks accepting others.
"""

from __future__ import annotations

import contextlib
import io
import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast

log = logging.getLogger(__name__)

_EVICTION_WAIT = 2.0
"""Seconds the accept loop waits for an evicted connection's slot."""

_READ_BUFFER = 1024
"""Read-ahead of the request reader: the header limit is exact to within this."""

TLSContext = Callable[[], ssl.SSLContext | None]
"""Returns the context for a new connection (None: no certificate, refuse it)."""


@dataclass(frozen=True, slots=True)
class Limits:
    """What one connection may cost; the defaults suit probes and metrics."""

    max_connections: int = 64
    idle_timeout: float = 120.0  # Go: IdleTimeout
    read_header_timeout: float = 10.0  # Go: ReadHeaderTimeout
    max_header_bytes: int = 64 * 1024  # Go: MaxHeaderBytes (1 MiB there; our clients send <4 KiB)
    read_timeout: float = 30.0  # Go: ReadTimeout (for the body here)
    max_body_bytes: int = 64 * 1024
    write_timeout: float = 30.0  # Go: WriteTimeout


class Refused(Exception):
    """A request refused with an HTTP status before any handler logic saw it."""

    def __init__(self, code: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.code = code


class _HeaderTooLarge(Exception):
    """The request line and headers exceed ``max_header_bytes``."""


class _GuardedReader(io.RawIOBase):
    """A socket reader that enforces a deadline per phase and a byte budget for headers."""

    def __init__(self, sock: socket.socket, limits: Limits) -> None:
        super().__init__()
        self._sock = sock
        self._limits = limits
        self._deadline = 0.0
        self._awaiting_first_byte = False
        self._budget: int | None = None

    def readable(self) -> bool:
        return True

    def expect_request(self) -> None:
        """Wait (at most the idle timeout) for a request line, then time the headers."""
        self._deadline = time.monotonic() + self._limits.idle_timeout
        self._awaiting_first_byte = True
        # The buffered reader may pull in up to one buffer of the body with the headers.
        self._budget = self._limits.max_header_bytes + _READ_BUFFER

    def expect_body(self) -> None:
        """Headers done: the body (if any) must arrive within the read timeout."""
        self._deadline = time.monotonic() + self._limits.read_timeout
        self._awaiting_first_byte = False
        self._budget = None

    def readinto(self, buffer: Any) -> int:
        remaining = self._deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("the client took too long")
        self._sock.settimeout(remaining)
        count = self._sock.recv_into(buffer)
        if count and self._awaiting_first_byte:
            self._awaiting_first_byte = False
            self._deadline = time.monotonic() + self._limits.read_header_timeout
        if self._budget is not None:
            self._budget -= count
            if self._budget < 0:
                raise _HeaderTooLarge
        return count


class HardenedHandler(BaseHTTPRequestHandler):
    """A request handler whose reads and writes obey the server's ``Limits``.

    Subclasses implement ``do_GET``/``do_POST`` as usual and read a body with
    ``read_body``, which raises ``Refused`` for a missing, oversized or truncated one.
    """

    protocol_version = "HTTP/1.1"
    _reader: _GuardedReader

    @property
    def limits(self) -> Limits:
        return cast("HardenedServer", self.server).limits

    def setup(self) -> None:
        super().setup()
        self.rfile.close()  # replaced by a reader that enforces the limits
        self._reader = _GuardedReader(self.connection, self.limits)
        self.rfile = io.BufferedReader(self._reader, _READ_BUFFER)

    def handle(self) -> None:
        if isinstance(self.connection, ssl.SSLSocket):
            server = cast("HardenedServer", self.server)
            self.connection.settimeout(self.limits.read_header_timeout)
            server.waiting(self.connection, True)  # a slow handshake may be evicted too
            try:
                self.connection.do_handshake()
            except (OSError, ssl.SSLError) as exc:
                log.debug("TLS handshake with %s failed: %s", self.client_address, exc)
                return
            finally:
                server.waiting(self.connection, False)
        super().handle()

    def handle_one_request(self) -> None:
        self.command, self.requestline = "", ""
        self.request_version = self.protocol_version  # so that an early error has a status line
        self.close_connection = True  # unless parse_request finds a keep-alive request
        self._reader.expect_request()
        server = cast("HardenedServer", self.server)
        server.waiting(self.connection, True)
        try:
            head = self._read_request_head()
        except TimeoutError:
            log.debug("closing a connection from %s: too slow", self.client_address)
            self.close_connection = True  # parse_request may have set it False already
            return
        finally:
            server.waiting(self.connection, False)
        try:
            if not head:
                return
            self._reader.expect_body()
            method = getattr(self, f"do_{self.command}", None)
            if method is None:
                self.send_error(HTTPStatus.NOT_IMPLEMENTED, f"method {self.command} not served")
                return
            method()
            self.wfile.flush()
        except TimeoutError:
            log.debug("closing a connection from %s: too slow", self.client_address)
            self.close_connection = True

    def _read_request_head(self) -> bool:
        """Read and parse the request line and headers; False when there is no request."""
        limit = self.limits.max_header_bytes
        try:
            self.raw_requestline = self.rfile.readline(limit + 1)
            if not self.raw_requestline:
                return False
            if len(self.raw_requestline) > limit:
                self.send_error(HTTPStatus.REQUEST_URI_TOO_LONG, f"request line over {limit} bytes")
                return False
            return self.parse_request()
        except _HeaderTooLarge:
            self.close_connection = True
            self.send_error(
                HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, f"headers over {limit} bytes"
            )
            return False

    def read_body(self) -> bytes:
        """The request body (Content-Length required, at most ``max_body_bytes``)."""
        limit = self.limits.max_body_bytes
        header = self.headers.get("Content-Length")
        if self.headers.get("Transfer-Encoding") or header is None:
            raise Refused(HTTPStatus.LENGTH_REQUIRED, "a body needs a Content-Length header")
        try:
            length = int(header)
        except ValueError:
            length = -1
        if length < 0:
            raise Refused(HTTPStatus.BAD_REQUEST, f"Content-Length {header!r} is not a size")
        if length > limit:
            raise Refused(
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"a body of {length} bytes is over {limit}"
            )
        body = self.rfile.read(length)
        if len(body) < length:
            raise Refused(HTTPStatus.BAD_REQUEST, f"body truncated at {len(body)} of {length}")
        return body

    def send_response(self, code: int, message: str | None = None) -> None:
        self.connection.settimeout(self.limits.write_timeout)
        super().send_response(code, message)
        if cast("HardenedServer", self.server).draining.is_set():
            self.send_header("Connection", "close")  # the client dials again, elsewhere
            self.close_connection = True


class HardenedServer(ThreadingHTTPServer):
    """A thread per connection, at most ``limits.max_connections`` at once; optional TLS."""

    daemon_threads = True
    block_on_close = False
    request_queue_size = socket.SOMAXCONN  # listen backlog (socketserver's default is 5)

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[HardenedHandler],
        *,
        limits: Limits,
        tls: TLSContext | None = None,
    ) -> None:
        """Binds at once (raises ``OSError`` if the port is taken)."""
        self.limits = limits
        self._tls = tls
        self._slots = threading.BoundedSemaphore(limits.max_connections)
        self._saturated = False  # log the first refusal of a flood, not every one
        self._waiting: dict[socket.socket, float] = {}  # connection -> waiting since
        self._waiting_lock = threading.Lock()
        self.draining = threading.Event()
        """Set while the process is about to stop: every answer closes its connection."""
        super().__init__(address, handler)

    @property
    def port(self) -> int:
        """The bound port (useful when the address asked for port 0)."""
        return int(self.server_address[1])

    def get_request(self) -> tuple[socket.socket, Any]:
        connection, address = self.socket.accept()
        if self._tls is None:
            return connection, address
        context = self._tls()
        if context is None:
            connection.close()
            raise OSError("no serving certificate")  # socketserver drops the connection
        return context.wrap_socket(
            connection, server_side=True, do_handshake_on_connect=False
        ), address

    def waiting(self, connection: socket.socket, waiting: bool) -> None:
        """Note that a connection waits for (or has sent) a request's headers."""
        with self._waiting_lock:
            if waiting:
                self._waiting[connection] = time.monotonic()
            else:
                self._waiting.pop(connection, None)

    def verify_request(self, request: Any, client_address: Any) -> bool:
        if self._slots.acquire(blocking=False):
            self._saturated = False
            return True
        # Every slot is held: free the one that has waited longest for its headers (an idle
        # keep-alive or a slow client), so a flood of slow clients cannot lock others out.
        if self._evict_longest_waiting() and self._slots.acquire(timeout=_EVICTION_WAIT):
            return True
        log.log(
            logging.DEBUG if self._saturated else logging.WARNING,
            "refusing connections (from %s first): %d already open",
            client_address,
            self.limits.max_connections,
        )
        self._saturated = True
        return False  # socketserver closes it

    def _evict_longest_waiting(self) -> bool:
        with self._waiting_lock:
            if not self._waiting:
                return False
            oldest = min(self._waiting, key=self._waiting.__getitem__)
            del self._waiting[oldest]
        with contextlib.suppress(OSError):
            # The plain socket's shutdown (not TLS's): the connection's own thread, blocked
            # in recv, sees the end of the stream, finishes and frees its slot.
            socket.socket.shutdown(oldest, socket.SHUT_RDWR)
        return True

    def process_request(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("connection from %s failed", client_address, exc_info=True)
