"""Hostile clients: how fast a normal request is served while slow clients attack.

Starts the probe server (``runtime.serving.HttpServer`` on the hardened
``runtime.serving.HardenedServer``) on 127.0.0.1, opens N connections that send a request header one
byte every 50 ms (a slowloris), and times normal ``GET /healthz`` requests meanwhile:
median and worst latency, and how many were refused. Also times how long the server
lets one trickling client live (its ``read_header_timeout`` deadline, 10 s by default).
N above the server's connection cap (64) shows eviction at work: each new connection
frees the slot of the one that has waited longest for its headers.

    python -m bench.hostile_clients [--clients 0,30,60,120] [--requests 20]
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import socket
import statistics
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import _common
from cronjob_operator.runtime.serving import HttpServer, Limits

TRICKLE = b"GET /healthz HTTP/1.1\r\nX-Slow: " + b"a" * 10_000
INTERVAL = 0.05


class Slowloris:
    """``count`` connections, each sent one byte of ``TRICKLE`` every ``INTERVAL``."""

    def __init__(self, port: int, count: int) -> None:
        self.sockets: list[socket.socket] = []
        for _ in range(count):
            with contextlib.suppress(OSError):
                self.sockets.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._trickle, daemon=True)

    def __enter__(self) -> Slowloris:
        self._thread.start()
        time.sleep(0.5)  # the attack is under way before any measurement
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        for sock in self.sockets:
            sock.close()

    def _trickle(self) -> None:
        for byte in TRICKLE:
            if self._stop.is_set():
                return
            for sock in self.sockets:
                with contextlib.suppress(OSError):
                    sock.sendall(bytes([byte]))
            time.sleep(INTERVAL)


def timed_get(port: int) -> float | None:
    """Seconds for one GET /healthz, or None if it was refused or failed."""
    started = time.perf_counter()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", "/healthz")
        response = connection.getresponse()
        response.read()
        return time.perf_counter() - started if response.status == 200 else None
    except (OSError, http.client.HTTPException):
        return None
    finally:
        connection.close()


def measure(clients: int, requests: int) -> list[object]:
    server = HttpServer(("127.0.0.1", 0), health={"ping": lambda: None})
    server.start()
    try:
        with Slowloris(server.port, clients):
            times = [timed_get(server.port) for _ in range(requests)]
    finally:
        server.stop()
    served = [t for t in times if t is not None]
    return [
        clients,
        len(served),
        requests - len(served),
        f"{statistics.median(served) * 1000:.1f}" if served else "-",
        f"{max(served) * 1000:.1f}" if served else "-",
    ]


def trickler_lifetime() -> float:
    """Seconds until the server closes one client that trickles its header."""
    server = HttpServer(("127.0.0.1", 0), health={"ping": lambda: None})
    server.start()
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
            started = time.perf_counter()
            for byte in TRICKLE:
                try:
                    sock.sendall(bytes([byte]))
                except OSError:
                    break
                time.sleep(INTERVAL)
            return time.perf_counter() - started
    finally:
        server.stop()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", default="0,30,60,120", help="slow clients per run")
    parser.add_argument("--requests", type=int, default=20, help="normal requests per run")
    parser.add_argument("--skip-lifetime", action="store_true", help="skip the 10 s deadline run")
    args = parser.parse_args(argv)
    rows = [measure(n, args.requests) for n in _common.parse_sizes(args.clients)]
    tables = [
        (
            f"GET /healthz while N clients trickle headers (connection cap "
            f"{Limits().max_connections}):",
            _common.markdown_table(
                ["slow clients", "served", "refused", "median ms", "worst ms"], rows
            ),
        )
    ]
    notes = []
    if not args.skip_lifetime:
        lifetime = trickler_lifetime()
        notes.append(
            f"a trickling client was cut off after {lifetime:.1f} s "
            f"(read_header_timeout {Limits().read_header_timeout:.0f} s)"
        )
    _common.print_report("Hostile clients", tables, notes)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
