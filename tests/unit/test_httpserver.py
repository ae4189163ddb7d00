"""The hardened HTTP server: limits on size, time and connections hold against bad clients.

Servers bind 127.0.0.1 on a free port and are stopped by their fixture. Time bounds in
these tests are generous ceilings on a deadline that is itself the behaviour under test
(a trickling client is cut off at ``read_header_timeout``), never a sleep that hopes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import http.client
import socket
import threading
import time
from collections.abc import Iterator

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
        try:
            body = self.read_body()
        except Refused as refusal:
            self.close_connection = True
            self._reply(int(refusal.code), str(refusal).encode())
            return
        self._reply(200, body)

    def _reply(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextlib.contextmanager
def serving(limits: Limits) -> Iterator[HardenedServer]:
    srv = HardenedServer(("127.0.0.1", 0), Echo, limits=limits)
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


@pytest.fixture
def patient_server() -> Iterator[HardenedServer]:
    """LIMITS with a read timeout no loaded machine reaches: a busy connection keeps its
    slot for the whole test (with 1 s, a stalled scheduler freed one and the extra
    connection was served)."""
    with serving(dataclasses.replace(LIMITS, read_timeout=120.0)) as srv:
        yield srv


def test_at_the_cap_with_every_connection_mid_request_a_new_one_is_closed(
    patient_server: HardenedServer,
) -> None:
    server = patient_server
    busy = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(8)]
    try:
        for sock in busy:  # headers sent, body pending: busy, not waiting
            sock.sendall(b"POST / HTTP/1.1\r\nContent-Length: 100\r\n\r\npartial")
        deadline = time.monotonic() + 10
        while server._waiting or server._slots._value:  # type: ignore[attr-defined]
            assert time.monotonic() < deadline, "the busy connections never all started"
            time.sleep(0.01)
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as extra:
            extra.sendall(b"GET / HTTP/1.1\r\n\r\n")
            with contextlib.suppress(ConnectionResetError):
                assert extra.recv(100) == b""
    finally:
        for sock in busy:
            sock.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, http.client.HTTPException):
            if get_ok(server.port) == 200:
                return
    pytest.fail("the server did not serve again after the busy connections closed")


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
