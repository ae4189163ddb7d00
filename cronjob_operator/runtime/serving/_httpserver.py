"""The one HTTP/1.1 server behind probes, metrics and webhooks, hardened against bad clients.

The standard library's ``ThreadingHTTPServer`` starts a thread per connection and reads
as long as a client keeps sending: a client trickling a header one byte a second, or
opening thousands of connections, or announcing a 10 GiB body, ties up threads and
memory. ``HardenedServer`` and ``HardenedHandler`` bound all of it, as Go's
``http.Server`` fields do (``Limits`` names the Go field each one mirrors):

- ``max_connections``: connections served at once. At the cap, a new connection evicts
  the one that has waited longest for its request headers or its body (an idle
  keep-alive, a slow or a stalled client); only when every connection is busy in a
  handler is it closed at accept;
- ``max_connections_per_source``: connections from one IP address at once. At this cap
  a new connection from that address evicts that address's own longest-waiting one (or
  is closed): one client cannot take the slots, nor evict the connections, of others;
- ``idle_timeout``: how long a kept-alive connection may wait for its next request;
- ``read_header_timeout``: from the first byte of a request to the end of its headers,
  for the whole header, not per byte (a one-byte-at-a-time client is cut off on time);
  it also bounds the TLS handshake;
- ``max_header_bytes``: request line plus headers (431 beyond; 414 for a long line),
  exact to within the 1 KiB read-ahead;
- ``read_timeout``: reading the body; ``max_body_bytes``: its size (413 beyond, before
  reading it; 411 without a Content-Length: chunked bodies are not accepted);
- ``body_budget_bytes``: what the bodies being read and decoded may cost at once. A body
  reserves its length before it is read, and a handler may reserve what decoding it will
  cost (``HardenedHandler.reserve``); one address may hold at most half the budget, which
  is also the most one request may reserve (413 beyond). A request that finds the budget
  spent evicts a connection whose body stalls while holding some (of the address holding
  the most), waits ``budget_wait`` seconds, then gets 503 with ``Retry-After``;
- ``write_timeout``: writing the answer, so a client that never reads cannot park a
  thread on a full socket buffer.

Time limits are deadlines on the whole phase: before every ``recv`` the socket timeout
is set to what is left. With a TLS ``context`` the handshake runs in the connection's
thread, under ``read_header_timeout``, so a silent client never blocks accepting others.
"""

from __future__ import annotations

import collections
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

from cronjob_operator.runtime.serving._echo import clipped

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
    body_budget_bytes: int = 1024 * 1024  # every body at once (and what decoding costs)
    budget_wait: float = 2.0  # seconds a request waits for the budget before a 503

    @property
    def max_connections_per_source(self) -> int:
        """The most connections one address may hold: half the slots, so it never takes
        them all."""
        return self.max_connections // 2

    @property
    def max_reservation(self) -> int:
        """The most one request (and one address) may reserve: half the budget."""
        return self.body_budget_bytes // 2


class Refused(Exception):
    """A request refused with an HTTP status before any handler logic saw it."""

    def __init__(self, code: HTTPStatus, message: str, *, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.retry_after = retry_after
        """Seconds after which the client may try again (a ``Retry-After`` header)."""


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


class _Slots:
    """The open connections, by source address, and which of them may be evicted.

    A connection waiting for a request (headers or body) or for its TLS handshake is
    evictable; one in a handler is not. ``admit`` takes a slot for a new connection,
    evicting the longest-waiting connection (of the same address when that address is
    at its own cap) when there is no room.
    """

    def __init__(self, limits: Limits) -> None:
        self._limits = limits
        self._changed = threading.Condition()
        self._sources: dict[socket.socket, str] = {}
        self._per_source: collections.Counter[str] = collections.Counter()
        self._waiting: dict[socket.socket, float] = {}  # connection -> waiting since

    def open_count(self) -> int:
        """Connections holding a slot."""
        with self._changed:
            return len(self._sources)

    def waiting_count(self) -> int:
        """Connections that may be evicted."""
        with self._changed:
            return len(self._waiting)

    def admit(self, connection: socket.socket, source: str) -> bool:
        """Take a slot for ``connection``; False when none frees within ``_EVICTION_WAIT``."""
        deadline = time.monotonic() + _EVICTION_WAIT
        evicted = False
        with self._changed:
            while (crowded := self._crowded(source)) is not None:
                if not evicted:
                    victim = self._longest_waiting(crowded)
                    if victim is None:
                        return False
                    _shut_down(victim)
                    evicted = True
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._changed.wait(remaining)
            self._sources[connection] = source
            self._per_source[source] += 1
            return True

    def _crowded(self, source: str) -> str | None:
        """None when there is room for a connection from ``source``; else the address
        whose connections may make room ("" for any)."""
        if self._per_source[source] >= self._limits.max_connections_per_source:
            return source
        if len(self._sources) >= self._limits.max_connections:
            return ""
        return None

    def _longest_waiting(self, source: str) -> socket.socket | None:
        """Remove and return the evictable connection (of ``source``, unless "") that has
        waited longest."""
        candidates = [
            connection
            for connection in self._waiting
            if not source or self._sources.get(connection) == source
        ]
        if not candidates:
            return None
        oldest = min(candidates, key=self._waiting.__getitem__)
        del self._waiting[oldest]
        return oldest

    def evict_heaviest(self, holders: Holders) -> bool:
        """Evict the waiting connection among ``holders`` holding the most, from the
        address holding the most in all; False when none of them is waiting."""
        with self._changed:
            waiting = {c: h for c, h in holders.items() if c in self._waiting}
            if not waiting:
                return False
            totals: collections.Counter[str] = collections.Counter()
            for source, amount in waiting.values():
                totals[source] += amount
            heaviest = max(totals, key=totals.__getitem__)
            victim = max(
                (c for c, h in waiting.items() if h[0] == heaviest), key=lambda c: waiting[c][1]
            )
            del self._waiting[victim]
        _shut_down(victim)
        return True

    def release(self, connection: socket.socket) -> None:
        """The connection has ended: free its slot."""
        with self._changed:
            self._waiting.pop(connection, None)
            source = self._sources.pop(connection, None)
            if source is not None:
                self._per_source[source] -= 1
                if not self._per_source[source]:
                    del self._per_source[source]
            self._changed.notify_all()

    def waiting(self, connection: socket.socket, waiting: bool) -> None:
        """Note that a connection waits for a request (evictable) or is being served."""
        with self._changed:
            if not waiting:
                self._waiting.pop(connection, None)
            elif connection in self._sources:
                self._waiting[connection] = time.monotonic()


def _shut_down(connection: socket.socket) -> None:
    """End an evicted connection: its own thread, blocked in recv, sees the end of the
    stream, finishes and frees its slot (the plain socket's shutdown, not TLS's)."""
    with contextlib.suppress(OSError):
        socket.socket.shutdown(connection, socket.SHUT_RDWR)


Holders = dict[socket.socket, tuple[str, int]]
"""Connections holding some of the body budget: (source address, bytes)."""


class _Budget:
    """Bytes that bodies being read and decoded may cost at once, half at most per address.

    A request that does not fit evicts one connection that holds some of the budget while
    waiting for its client (a stalled body), from the address that holds the most (its
    own, when its own share is what is spent), then waits for the budget to free.
    """

    def __init__(self, limits: Limits, evict: Callable[[Holders], bool]) -> None:
        """``evict`` shuts down the evictable connection among ``Holders`` that holds the
        most (``_Slots.evict_heaviest``); False when none may be evicted."""
        self.limits = limits
        self._evict = evict
        self._changed = threading.Condition()
        self._holders: Holders = {}
        self._per_source: collections.Counter[str] = collections.Counter()

    def reserve(self, connection: socket.socket, source: str, amount: int) -> None:
        """Reserve ``amount`` more for the request on ``connection`` from ``source``;
        raises ``Refused`` (413 over the per-request bound, 503 when none frees in time)."""
        limit = self.limits.max_reservation
        with self._changed:
            held = self._holders.get(connection, (source, 0))[1]
            if held + amount > limit:
                raise Refused(
                    HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                    f"the request would take {_mib(held + amount)} to read and decode; "
                    f"at most {_mib(limit)} is allowed",
                )
            if not self._fits(source, amount):
                self._make_room(source, amount)
            if not self._changed.wait_for(
                lambda: self._fits(source, amount), timeout=self.limits.budget_wait
            ):
                raise Refused(
                    HTTPStatus.SERVICE_UNAVAILABLE,
                    f"busy reading and decoding other large requests "
                    f"({_mib(self.held())} in progress); retry shortly",
                    retry_after=1,
                )
            self._holders[connection] = (source, held + amount)
            self._per_source[source] += amount

    def _make_room(self, source: str, amount: int) -> None:
        """Evict a stalled holder: of ``source`` when its own share is spent, else of the
        other addresses first."""
        own = {c: h for c, h in self._holders.items() if h[0] == source}
        if self._per_source[source] + amount > self.limits.max_reservation:
            self._evict(own)
            return
        others = {c: h for c, h in self._holders.items() if h[0] != source}
        if not self._evict(others):
            self._evict(own)

    def held(self) -> int:
        """Bytes reserved now."""
        with self._changed:
            return sum(self._per_source.values())

    def _fits(self, source: str, amount: int) -> bool:
        return (
            sum(self._per_source.values()) + amount <= self.limits.body_budget_bytes
            and self._per_source[source] + amount <= self.limits.max_reservation
        )

    def release(self, connection: socket.socket) -> None:
        """Give back what the request on ``connection`` reserved."""
        with self._changed:
            holding = self._holders.pop(connection, None)
            if holding is None:
                return
            source, amount = holding
            self._per_source[source] -= amount
            if not self._per_source[source]:
                del self._per_source[source]
            self._changed.notify_all()


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MiB"


class HardenedHandler(BaseHTTPRequestHandler):
    """A request handler whose reads and writes obey the server's ``Limits``.

    Subclasses implement ``do_GET``/``do_POST`` as usual and read a body with
    ``read_body``, which raises ``Refused`` for a missing, oversized or truncated one,
    or when the server's body budget is spent; ``reserve`` takes more of the budget for
    what handling the body will cost. Reservations end with the request.
    """

    protocol_version = "HTTP/1.1"
    _reader: _GuardedReader

    @property
    def limits(self) -> Limits:
        return self._server.limits

    @property
    def _server(self) -> HardenedServer:
        return cast("HardenedServer", self.server)

    @property
    def source(self) -> str:
        """The client's address (what per-source limits count)."""
        return str(self.client_address[0])

    def setup(self) -> None:
        super().setup()
        self.rfile.close()  # replaced by a reader that enforces the limits
        self._reader = _GuardedReader(self.connection, self.limits)
        self.rfile = io.BufferedReader(self._reader, _READ_BUFFER)

    def handle(self) -> None:
        if isinstance(self.connection, ssl.SSLSocket):
            server = self._server
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
        server = self._server
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
                self.send_error(
                    HTTPStatus.NOT_IMPLEMENTED, f"method {clipped(self.command)} not served"
                )
                return
            method()
            self.wfile.flush()
        except TimeoutError:
            log.debug("closing a connection from %s: too slow", self.client_address)
            self.close_connection = True
        finally:
            server.budget.release(self.connection)

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
            raise Refused(HTTPStatus.BAD_REQUEST, f"Content-Length {clipped(header)} is not a size")
        if length > limit:
            raise Refused(
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"a body of {length} bytes is over {limit}"
            )
        self.reserve(length)
        # Reading the body, the connection waits for its client: it may be evicted.
        self._server.waiting(self.connection, True)
        try:
            body = self.rfile.read(length)
        finally:
            self._server.waiting(self.connection, False)
        if len(body) < length:
            raise Refused(HTTPStatus.BAD_REQUEST, f"body truncated at {len(body)} of {length}")
        return body

    def reserve(self, amount: int) -> None:
        """Take ``amount`` more bytes of the server's body budget for this request (what
        decoding or handling its body will cost); raises ``Refused`` (413, 503)."""
        self._server.budget.reserve(self.connection, self.source, amount)

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
        self._slots = _Slots(limits)
        self.budget = _Budget(limits, self._slots.evict_heaviest)
        self._saturated = False  # log the first refusal of a flood, not every one
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
        """Note that a connection waits for its client (evictable) or is being served."""
        self._slots.waiting(connection, waiting)

    def open_connections(self) -> tuple[int, int]:
        """(connections holding a slot, of which evictable)."""
        return self._slots.open_count(), self._slots.waiting_count()

    def verify_request(self, request: Any, client_address: Any) -> bool:
        # At a cap, the longest-waiting connection (of the same address at its own cap) is
        # evicted, so a flood of slow or stalled clients cannot lock others out.
        if self._slots.admit(request, str(client_address[0])):
            self._saturated = False
            return True
        log.log(
            logging.DEBUG if self._saturated else logging.WARNING,
            "refusing connections (from %s first): %d already open (%d per address at most)",
            client_address,
            self.limits.max_connections,
            self.limits.max_connections_per_source,
        )
        self._saturated = True
        return False  # socketserver closes it

    def process_request(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release(request)
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("connection from %s failed", client_address, exc_info=True)
