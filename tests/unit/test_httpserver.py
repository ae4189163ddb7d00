"""The hardened HTTP server: limits on size, time and connections hold against bad clients.

Servers bind 127.0.0.1 on a free port and are stopped by their fixture. Time bounds in
these tests are generous ceilings on a deadline that is itself the behaviour under test
(a trickling client is cut off at ``read_header_timeout``), never a sleep that hopes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import http.client
import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from cronjob_operator.runtime.serving import (
    HardenedHandler,
    HardenedServer,
    HttpServer,
    Limits,
    Refused,
)

LIMITS = Limits(
    max_connections=8,
    idle_timeout=5.0,
    read_header_timeout=1.0,
    max_header_bytes=4096,
    read_timeout=1.0,
    max_body_bytes=1024,
    write_timeout=5.0,
)


class Echo(HardenedHandler):
    """Answers GET with "ok" and POST with its body."""

    def do_GET(self) -> None:
        self._reply(200, b"ok")

    def do_POST(self) -> None:
        body = self._body_or_refusal()
        if body is not None:
            self._reply(200, body)

    def _body_or_refusal(self) -> bytes | None:
        """The body, or None once a refusal has been answered."""
        try:
            return self.read_body()
        except Refused as refusal:
            self.close_connection = True
            self._reply(int(refusal.code), str(refusal).encode())
            return None

    def _reply(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


class Holding(Echo):
    """Answers GET, and POST once its body is read, only when ``release`` is set: a
    connection busy in its handler (a POST holding its body's share of the budget)."""

    release = threading.Event()

    def do_GET(self) -> None:
        self.release.wait(30)
        self._reply(200, b"ok")

    def do_POST(self) -> None:
        body = self._body_or_refusal()
        if body is not None:
            self.release.wait(30)
            self._reply(200, body)


@contextlib.contextmanager
def serving(limits: Limits, handler: type[Echo] = Echo) -> Iterator[HardenedServer]:
    srv = HardenedServer(("127.0.0.1", 0), handler, limits=limits)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(5)


@pytest.fixture
def server() -> Iterator[HardenedServer]:
    with serving(LIMITS) as srv:
        yield srv


def status_of(port: int, raw: bytes) -> int:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(raw)
        head = sock.recv(200)
    return int(head.split(b" ")[1])


def get_ok(port: int, timeout: float = 10) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request("GET", "/")
        return connection.getresponse().status
    finally:
        connection.close()


def test_headers_over_the_limit_get_431(server: HardenedServer) -> None:
    big = b"X-Big: " + b"a" * 3000 + b"\r\n"
    assert status_of(server.port, b"GET / HTTP/1.1\r\n" + big * 4 + b"\r\n") == 431
    assert get_ok(server.port) == 200


def test_a_long_request_line_gets_414(server: HardenedServer) -> None:
    assert status_of(server.port, b"GET /" + b"a" * 5000 + b" HTTP/1.1\r\n\r\n") == 414


def test_a_body_over_the_limit_gets_413_before_it_is_read(server: HardenedServer) -> None:
    request = b"POST / HTTP/1.1\r\nContent-Length: 10000000000\r\n\r\n"
    assert status_of(server.port, request) == 413


def test_a_body_without_length_gets_411_and_a_truncated_one_400(server: HardenedServer) -> None:
    assert status_of(server.port, b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n") == 411
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(b"POST / HTTP/1.1\r\nContent-Length: 100\r\n\r\nshort")
        sock.shutdown(socket.SHUT_WR)
        assert sock.recv(200).split(b" ")[1] == b"400"


def test_a_body_that_never_arrives_is_cut_off_at_the_read_timeout(server: HardenedServer) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(b"POST / HTTP/1.1\r\nContent-Length: 100\r\n\r\nsome")
        started = time.monotonic()
        assert sock.recv(200) == b""  # closed, without an answer
        assert time.monotonic() - started < LIMITS.read_timeout + 5


def test_a_trickling_client_is_cut_off_once_at_the_header_deadline() -> None:
    """Cut off after one header deadline from its first byte, not a second one later."""
    limits = dataclasses.replace(LIMITS, read_header_timeout=2.0)
    server = HardenedServer(("127.0.0.1", 0), Echo, limits=limits)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        closed_after = trickle_until_closed(server.port, b"GET / HTTP/1.1\r\nX-Slow: " + b"a" * 400)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
    assert 2.0 <= closed_after < 2 * 2.0  # a second deadline would take it past 4 s


def trickle_until_closed(port: int, data: bytes) -> float:
    """Send ``data`` a byte every 50 ms; seconds until the server closed the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        started = time.monotonic()
        for byte in data:
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                break
            time.sleep(0.05)  # the client's trickle rate, not a wait for the server
        else:
            pytest.fail("the server let the whole trickle through")
        return time.monotonic() - started


def test_at_the_cap_the_longest_waiting_connection_makes_room(server: HardenedServer) -> None:
    idle = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(8)]
    try:
        assert get_ok(server.port) == 200  # the 9th evicts an idle one instead of failing
        assert idle[0].recv(100) == b""  # the one that waited longest was closed
    finally:
        for sock in idle:
            sock.close()


def connect(port: int, source: str = "127.0.0.1") -> socket.socket:
    """A connection to the server from the loopback address ``source``."""
    return socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.01)


def served(port: int) -> bool:
    """Whether a GET is answered 200 now (False when refused or cut off: a retry may pass
    once the slots of closed connections are free)."""
    with contextlib.suppress(OSError, http.client.HTTPException):
        return get_ok(port) == 200
    return False


def hold_in_handler(port: int, source: str = "127.0.0.1") -> socket.socket:
    """A connection whose request is being handled (``Holding`` blocks until released)."""
    sock = connect(port, source)
    sock.sendall(b"GET / HTTP/1.1\r\n\r\n")
    return sock


def refused_at_once(port: int, source: str = "127.0.0.1") -> bool:
    """True when the server closes a new connection without answering it."""
    with connect(port, source) as extra:
        with contextlib.suppress(OSError):
            extra.sendall(b"GET / HTTP/1.1\r\n\r\n")
        with contextlib.suppress(ConnectionResetError):
            return extra.recv(100) == b""
    return True


@pytest.fixture
def holding_server() -> Iterator[HardenedServer]:
    Holding.release.clear()
    with serving(LIMITS, Holding) as srv:
        try:
            yield srv
        finally:
            Holding.release.set()


def test_at_the_cap_with_every_connection_in_a_handler_a_new_one_is_closed(
    holding_server: HardenedServer,
) -> None:
    server = holding_server
    busy = [hold_in_handler(server.port, f"127.0.0.{1 + n % 2}") for n in range(8)]
    try:
        wait_until(lambda: server.open_connections() == (8, 0), "8 connections in handlers")
        assert refused_at_once(server.port)
    finally:
        Holding.release.set()
        for sock in busy:
            sock.close()
    wait_until(lambda: served(server.port), "served again after the handlers ended")


@pytest.fixture
def patient_server() -> Iterator[HardenedServer]:
    """LIMITS with a read timeout no loaded machine reaches: a stalled body keeps its slot
    unless it is evicted (with 1 s, a stalled scheduler freed one and the test passed
    for the wrong reason)."""
    with serving(dataclasses.replace(LIMITS, read_timeout=120.0)) as srv:
        yield srv


def bodies_waiting(server: HardenedServer, count: int) -> bool:
    """Whether exactly ``count`` connections, each holding a 100-byte body's reservation,
    wait for their clients (a connection reserves before it waits: both must show)."""
    return server.budget.held() == 100 * count and server.open_connections() == (count, count)


def test_at_the_cap_a_connection_stalled_in_its_body_is_evicted(
    patient_server: HardenedServer,
) -> None:
    """Issue 35: 128 connections that sent headers and stalled held every slot of the
    webhook server; a stalled body now waits for its client like a header does."""
    server = patient_server
    stalled: list[socket.socket] = []
    try:
        # One at a time, so that the first waited longest: a connection's wait for its
        # body starts when its own thread gets there, and under load threads run late.
        for n in range(8):
            stalled.append(connect(server.port, f"127.0.0.{1 + n % 2}"))
            stalled[-1].sendall(b"POST / HTTP/1.1\r\nContent-Length: 100\r\n\r\npartial")
            wait_until(functools.partial(bodies_waiting, server, n + 1), f"body {n} waiting")
        assert get_ok(server.port) == 200
        assert stalled[0].recv(100) == b""  # the one that waited longest was closed
    finally:
        for sock in stalled:
            sock.close()


def test_one_address_cannot_take_every_slot(holding_server: HardenedServer) -> None:
    """At its own cap (4 of 8 here), an address's new connection is closed while another
    address is still served."""
    server = holding_server
    assert server.limits.max_connections_per_source == server.limits.max_connections // 2 == 4
    busy = [hold_in_handler(server.port, "127.0.0.2") for _ in range(4)]
    try:
        wait_until(lambda: server.open_connections() == (4, 0), "4 connections in handlers")
        assert refused_at_once(server.port, "127.0.0.2")
        other = hold_in_handler(server.port, "127.0.0.3")
        wait_until(lambda: server.open_connections() == (5, 0), "the other address served")
        Holding.release.set()
        assert other.recv(100).startswith(b"HTTP/1.1 200")
        other.close()
    finally:
        Holding.release.set()
        for sock in busy:
            sock.close()


def test_at_its_cap_an_address_evicts_its_own_connection_not_another_one(
    server: HardenedServer,
) -> None:
    """A flood from one address churns among itself: another address's idle keep-alive
    (the API server's, say) stays open even though it has waited longest."""
    bystander = connect(server.port, "127.0.0.3")
    wait_until(lambda: server.open_connections() == (1, 1), "the bystander waiting")
    flood = [connect(server.port, "127.0.0.2") for _ in range(4)]
    try:
        wait_until(lambda: server.open_connections() == (5, 5), "the flood waiting")
        flood.append(connect(server.port, "127.0.0.2"))  # over its cap of 4
        assert flood[0].recv(100) == b""  # its own longest-waiting one was closed
        bystander.sendall(b"GET / HTTP/1.1\r\n\r\n")
        assert bystander.recv(100).startswith(b"HTTP/1.1 200")
    finally:
        bystander.close()
        for sock in flood:
            sock.close()


def test_a_request_over_its_share_of_the_body_budget_gets_413(server: HardenedServer) -> None:
    limits = dataclasses.replace(LIMITS, max_body_bytes=4096, body_budget_bytes=4096)
    with serving(limits) as srv:
        request = b"POST / HTTP/1.1\r\nContent-Length: 3000\r\n\r\n"
        assert status_of(srv.port, request) == 413  # over half the budget: never read


BUDGET_LIMITS = dataclasses.replace(
    LIMITS, read_timeout=120.0, body_budget_bytes=2000, budget_wait=0.5
)
"""Two addresses' 1000-byte bodies spend the budget (each its half)."""

SMALL_POST = b"POST / HTTP/1.1\r\nContent-Length: 2\r\n\r\nok"


def test_with_the_budget_held_by_handlers_a_request_waits_then_gets_503() -> None:
    """Two addresses' bodies, read and being handled, hold the whole budget: a third
    address's request waits ``budget_wait``, then gets 503 instead of growing the heap."""
    Holding.release.clear()
    with serving(BUDGET_LIMITS, Holding) as srv:
        holders = [connect(srv.port, source) for source in ("127.0.0.2", "127.0.0.3")]
        try:
            for sock in holders:
                sock.sendall(b"POST / HTTP/1.1\r\nContent-Length: 1000\r\n\r\n" + b"x" * 1000)
            wait_until(lambda: srv.budget.held() == 2000, "the budget held")
            assert status_of(srv.port, SMALL_POST) == 503
        finally:
            Holding.release.set()
            for sock in holders:
                sock.close()
        wait_until(lambda: srv.budget.held() == 0, "the budget given back")
        assert status_of(srv.port, SMALL_POST) == 200


def test_a_stalled_body_holding_the_budget_is_evicted_for_a_request_that_needs_it() -> None:
    """Issue 35: stalled bodies must not hold the budget until their deadline (each
    would refuse every review for 10 s): the address holding the most loses its
    longest stalled one."""
    with serving(BUDGET_LIMITS) as srv:
        stalled = [connect(srv.port, source) for source in ("127.0.0.2", "127.0.0.3")]
        try:
            for sock in stalled:
                sock.sendall(b"POST / HTTP/1.1\r\nContent-Length: 1000\r\n\r\nx")
            wait_until(lambda: srv.budget.held() == 2000, "the budget held")
            assert status_of(srv.port, SMALL_POST) == 200
            closed = 0
            for sock in stalled:
                sock.settimeout(1)  # the other one stays open for its 120 s read timeout
                with contextlib.suppress(TimeoutError):
                    closed += sock.recv(100) == b""  # shut down: no answer
            assert closed == 1
        finally:
            for sock in stalled:
                sock.close()


@pytest.mark.parametrize("clients", [60, 150])
def test_many_slow_clients_do_not_stop_a_normal_request(clients: int) -> None:
    """Connections sending headers a byte at a time, below and above the connection cap
    (64): a probe is still answered within a few seconds."""
    server = HttpServer(("127.0.0.1", 0), health={"ping": lambda: None})
    server.start()
    slow = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(clients)]
    stop = threading.Event()

    def trickle() -> None:
        for byte in b"GET /healthz HTTP/1.1\r\nX-Slow: " + b"a" * 1000:
            if stop.is_set():
                return
            for sock in slow:
                with contextlib.suppress(OSError):
                    sock.sendall(bytes([byte]))
            time.sleep(0.05)

    trickler = threading.Thread(target=trickle, daemon=True)
    trickler.start()
    try:
        time.sleep(0.5)  # let the trickle start on every connection (the attack under way)
        started = time.monotonic()
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        connection.request("GET", "/healthz")
        assert connection.getresponse().status == 200
        connection.close()
        assert time.monotonic() - started < 3.0
    finally:
        stop.set()
        trickler.join(10)
        for sock in slow:
            sock.close()
        server.stop()


def test_a_draining_server_closes_each_connection_after_its_answer(
    server: HardenedServer,
) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        connection.request("GET", "/")
        kept = connection.getresponse()
        kept.read()
        assert kept.getheader("Connection") is None
        assert not kept.will_close
        server.draining.set()
        connection.request("GET", "/")
        closing = connection.getresponse()
        assert closing.read() == b"ok"
        assert closing.getheader("Connection") == "close"
        assert closing.will_close
    finally:
        connection.close()


@pytest.mark.parametrize(
    ("tls", "scheme"),
    [(None, "http"), (lambda: ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER), "https")],
)
def test_metrics_server_logs_its_scheme(
    caplog: pytest.LogCaptureFixture, tls: Any, scheme: str
) -> None:
    server = HttpServer(("127.0.0.1", 0), serve_metrics=True, tls=tls)
    stop = threading.Event()
    stop.set()
    with caplog.at_level(logging.INFO, logger="cronjob_operator.runtime.serving._probes"):
        server.run(stop)
    assert [record.getMessage() for record in caplog.records] == [f"serving {scheme}"]
