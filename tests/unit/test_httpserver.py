"""The hardened HTTP server: limits on size, time and connections hold against bad clients.

Servers bind 127.0.0.1 on a free port and are stopped by their fixture. Time bounds in
these tests are generous ceilings on a deadline that is itself the behaviour under test
(a trickling client is cut off at ``read_header_timeout``), never a sleep that hopes.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from cronjob_operator.runtime.httpserver import HardenedHandler, HardenedServer, Limits, Refused
from cronjob_operator.runtime.serving import HttpServer

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


@pytest.fixture
def server() -> Iterator[HardenedServer]:
    srv = HardenedServer(("127.0.0.1", 0), Echo, limits=LIMITS)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(5)


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


def test_a_trickling_client_is_cut_off_at_the_header_deadline(server: HardenedServer) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        started = time.monotonic()
        closed_after = None
        for byte in b"GET / HTTP/1.1\r\nX-Slow: " + b"a" * 100:
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                closed_after = time.monotonic() - started
                break
            time.sleep(0.05)  # the client's trickle rate, not a wait for the server
        if closed_after is None:
            with contextlib.suppress(OSError):
                assert sock.recv(100) == b""
            closed_after = time.monotonic() - started
    assert closed_after < LIMITS.read_header_timeout + 5


def test_connections_over_the_cap_are_closed_and_the_cap_frees_up(
    server: HardenedServer,
) -> None:
    idle = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(8)]
    try:
        # Each idle connection holds a slot once its thread runs; the 9th is closed at once.
        deadline = time.monotonic() + 10
        refused = False
        while not refused and time.monotonic() < deadline:
            with socket.create_connection(("127.0.0.1", server.port), timeout=10) as extra:
                extra.sendall(b"GET / HTTP/1.1\r\n\r\n")
                with contextlib.suppress(ConnectionResetError):
                    refused = extra.recv(100) == b""
        assert refused
    finally:
        for sock in idle:
            sock.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, http.client.HTTPException):
            if get_ok(server.port) == 200:
                return
    pytest.fail("the server did not serve again after the idle connections closed")


def test_many_slow_clients_do_not_stop_a_normal_request() -> None:
    """60 connections send headers one byte at a time; a probe is still answered at once."""
    server = HttpServer(("127.0.0.1", 0), health={"ping": lambda: None})
    server.start()
    slow = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(60)]
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
