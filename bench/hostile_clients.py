"""Hostile clients: how fast a normal request is served while slow clients attack.

Probes. Starts the probe server (``runtime.serving.HttpServer`` on the hardened
``runtime.serving.HardenedServer``) on 127.0.0.1, opens N connections that send a request header one
byte every 50 ms (a slowloris), and times normal ``GET /healthz`` requests meanwhile:
median and worst latency, and how many were refused. Also times how long the server
lets one trickling client live (its ``read_header_timeout`` deadline, 10 s by default).
N above the server's connection cap (64) shows eviction at work: each new connection
frees the slot of the one that has waited longest for its headers.

Webhooks (issue 35). Starts the webhook server in a child process (so that its peak RSS
is its own) with a 50 ms ticker thread, and under each attack (the largest body of
``[{},...]`` the server accepts, one and four at once; 128 connections stalled in their
bodies; 300 connections from one address; a review nested 900 deep; a 6 MB apiVersion;
all at once), sends real AdmissionReviews from another address and the readiness
handshake: how many are answered within the API server's 10 s, how fast, the peak RSS
against the manifest's 256 MiB, and how late the ticker woke (a decode holding the GIL).

    python -m bench.hostile_clients [--clients 0,30,60,120] [--requests 20]
        [--section probes|webhooks|all] [--reviews 10] [--attacks "none,all"]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import functools
import http.client
import json
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import _common
from cronjob_operator.api import batch_v1
from cronjob_operator.runtime.serving import HttpServer, Limits
from cronjob_operator.webhooks.cronjob import VALIDATE_PATH

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


# --- The webhook server under attack (issue 35) -------------------------------------

ATTACKER_SOURCES = ("127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5")
"""Loopback addresses the attackers connect from (a review comes from 127.0.0.1)."""

REVIEW_TIMEOUT = 10.0
"""The API server's default timeoutSeconds: a review answered later is a failed one."""

TICK = 0.05
"""The serving process's ticker period: a Lease-renew-like thread that notes how late it
wakes (a decode that holds the GIL delays it)."""

MANIFEST_LIMIT_MIB = 256
"""config/manager's memory limit: the process is OOM-killed above it."""

CRONJOB_V1 = batch_v1.CRONJOB.api_version


def serve_webhooks(cert_dir: Path) -> int:
    """The child: a WebhookServer on a free port and a ticker; prints the port, then,
    when stdin closes, the ticker's worst lateness in ms."""
    from cronjob_operator.runtime.webhook import WebhookServer
    from cronjob_operator.webhooks import manifests

    with contextlib.suppress(ImportError):  # absent on commits before issue 35
        from cronjob_operator.runtime.serving import release_large_allocations

        release_large_allocations()  # as `cronjob-operator run` does
    server = WebhookServer(("127.0.0.1", 0), cert_dir, manifests.routes())
    server.start()
    worst = [0.0]
    done = threading.Event()

    def tick() -> None:
        due = time.monotonic() + TICK
        while not done.wait(max(0.0, due - time.monotonic())):
            worst[0] = max(worst[0], time.monotonic() - due)
            due = time.monotonic() + TICK

    threading.Thread(target=tick, daemon=True).start()
    print(server.port, flush=True)
    sys.stdin.read()
    done.set()
    print(f"{worst[0] * 1000:.0f}", flush=True)
    server.stop()
    return 0


class WebhookProcess:
    """A child process serving the webhooks; ``peak_rss_mib`` and ``ticker_ms`` at the end."""

    def __init__(self, cert_dir: Path) -> None:
        argv = [sys.executable, "-m", "bench.hostile_clients", "--serve-webhook", str(cert_dir)]
        self.process = subprocess.Popen(
            argv, cwd=_common.REPO, env=_common.subprocess_env(),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self.process.stdout is not None
        self.port = int(self.process.stdout.readline())

    def finish(self) -> tuple[float, float]:
        """(peak RSS in MiB, worst ticker lateness in ms); stops the child."""
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        peak_kib = next(int(line.split()[1]) for line in status.splitlines() if "VmHWM" in line)
        stdout, _ = self.process.communicate("", timeout=60)
        return peak_kib / 1024, float(stdout.split()[-1])


def tls_client() -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def tls_connect(port: int, source: str, timeout: float = 10.0) -> ssl.SSLSocket:
    raw = socket.create_connection(("127.0.0.1", port), timeout=timeout, source_address=(source, 0))
    try:
        return tls_client().wrap_socket(raw)
    except OSError:
        raw.close()
        raise


def post_status(port: int, path: str, body: bytes, source: str) -> tuple[int, int]:
    """(HTTP status or 0 when dropped, answer size) of one POST from ``source``."""
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    head += f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    try:
        with tls_connect(port, source, REVIEW_TIMEOUT) as sock:
            sock.sendall(head.encode() + body)
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
        return int(answer.split(b" ", 2)[1]), len(answer)
    except (OSError, ValueError, IndexError):
        return 0, 0


def a_review() -> bytes:
    """A real AdmissionReview of a valid CronJob (the API server's shape)."""
    template = {"spec": {"template": {"spec": {
        "containers": [{"name": "c", "image": "busybox"}], "restartPolicy": "OnFailure",
    }}}}  # fmt: skip
    obj = {
        "apiVersion": CRONJOB_V1, "kind": "CronJob",
        "metadata": {"name": "backup", "namespace": "default"},
        "spec": {"schedule": "*/5 * * * *", "jobTemplate": template},
    }  # fmt: skip
    review = {
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "00000000-0000-4000-8000-000000000001",
            "kind": {"group": "batch.tutorial.kubebuilder.io", "version": "v1", "kind": "CronJob"},
            "operation": "CREATE", "name": "backup", "namespace": "default", "object": obj,
        },
    }  # fmt: skip
    return json.dumps(review).encode()


def conversion_review(objects: str) -> bytes:
    return (
        '{"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "request": '
        '{"uid": "u", "desiredAPIVersion": "batch.tutorial.kubebuilder.io/v2", "objects": '
        f"{objects}}}}}"
    ).encode()


def big_body() -> bytes:
    """The largest ConversionReview the server accepts, of ``[{},{},...]`` (issue 35)."""
    from cronjob_operator.runtime.webhook import MAX_BODY_BYTES

    envelope = len(conversion_review("[]"))
    count = (MAX_BODY_BYTES - envelope - 1) // 3
    return conversion_review("[" + "{}," * count + "{}]")


def deep_body() -> bytes:
    """A ConversionReview of a CronJob nested 900 deep (RecursionError on dd218f0)."""
    deep = '{"a":' * 900 + "{}" + "}" * 900
    obj = f'{{"apiVersion": "{CRONJOB_V1}", "kind": "CronJob", "spec": {{"x": {deep}}}}}'
    return conversion_review(f"[{obj}]")


def echo_body() -> bytes:
    """A review with a 6 MB apiVersion (echoed whole on dd218f0)."""
    return json.dumps({"apiVersion": "v" * 6_000_000, "kind": "ConversionReview"}).encode()


class Attack:
    """Attacker threads that repeat one kind of hostile traffic until stopped."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []
        self.statuses: collections.Counter[int] = collections.Counter()
        self.largest_answer = 0
        self.sockets: list[socket.socket] = []

    def repeat(self, action: Callable[[], None], copies: int = 1) -> None:
        def loop() -> None:
            while not self.stop.is_set():
                action()

        for _ in range(copies):
            self.threads.append(threading.Thread(target=loop, daemon=True))

    def post(self, path: str, body: bytes, source: str) -> None:
        status, size = post_status(self.port, path, body, source)
        self.statuses[status] += 1
        self.largest_answer = max(self.largest_answer, size)

    def stalled_bodies(self, count: int) -> None:
        """``count`` connections (spread over the attacker addresses) that send a review's
        headers and a little of its body, then stall; each reopened when closed."""
        head = b"POST /convert HTTP/1.1\r\nContent-Type: application/json\r\n"
        head += b"Content-Length: 1048576\r\n\r\n{"

        def hold(source: str) -> None:
            while not self.stop.is_set():
                try:
                    with tls_connect(self.port, source) as sock:
                        sock.sendall(head)
                        self.sockets.append(sock)
                        sock.settimeout(None)
                        sock.recv(1)  # returns when the server evicts or times it out
                        self.statuses[-1] += 1  # an eviction or a timeout
                except OSError:
                    time.sleep(0.05)

        for n in range(count):
            source = ATTACKER_SOURCES[n % len(ATTACKER_SOURCES)]
            self.threads.append(threading.Thread(target=hold, args=(source,), daemon=True))

    def one_source_flood(self, count: int) -> None:
        """``count`` idle connections from one address, reopened as they are closed."""

        def hold() -> None:
            while not self.stop.is_set():
                try:
                    with socket.create_connection(
                        ("127.0.0.1", self.port),
                        timeout=None,
                        source_address=(ATTACKER_SOURCES[0], 0),
                    ) as sock:
                        sock.recv(1)
                except OSError:
                    time.sleep(0.05)

        for _ in range(count):
            self.threads.append(threading.Thread(target=hold, daemon=True))

    def __enter__(self) -> Attack:
        for thread in self.threads:
            thread.start()
        time.sleep(2.0)  # under way (connections open, first bodies sent) before measuring
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for sock in self.sockets:
            with contextlib.suppress(OSError):
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
        for thread in self.threads:
            thread.join(15)


def arm(attack: Attack, name: str, bodies: dict[str, bytes]) -> None:
    """Set up the attack ``name`` ("all" is every one at once)."""
    every = name == "all"
    if name in ("one big body", "all"):
        attack.repeat(lambda: attack.post("/convert", bodies["big"], ATTACKER_SOURCES[0]))
    if name == "four big bodies" or every:
        for source in ATTACKER_SOURCES:
            attack.repeat(functools.partial(attack.post, "/convert", bodies["big"], source))
    if name == "128 stalled bodies" or every:
        attack.stalled_bodies(128)
    if name == "300 connections from one address" or every:
        attack.one_source_flood(300)
    if name == "nested 900 deep" or every:
        attack.repeat(lambda: attack.post("/convert", bodies["deep"], ATTACKER_SOURCES[1]), 2)
    if name == "6 MB echo" or every:
        attack.repeat(lambda: attack.post("/convert", bodies["echo"], ATTACKER_SOURCES[2]))


WEBHOOK_ATTACKS = (
    "none",
    "one big body",
    "four big bodies",
    "128 stalled bodies",
    "300 connections from one address",
    "nested 900 deep",
    "6 MB echo",
    "all",
)


def ready(port: int) -> bool:
    """The manager's readiness check: a TLS handshake within 2 s."""
    try:
        with tls_connect(port, "127.0.0.1", timeout=2):
            return True
    except OSError:
        return False


def measure_webhooks(
    name: str, cert_dir: Path, reviews: int, bodies: dict[str, bytes]
) -> list[object]:
    child = WebhookProcess(cert_dir)
    attack = Attack(child.port)
    arm(attack, name, bodies)
    latencies: list[float | None] = []
    readiness = 0
    with attack:
        for _ in range(reviews):
            readiness += ready(child.port)
            started = time.perf_counter()
            status, _ = post_status(child.port, VALIDATE_PATH, bodies["review"], "127.0.0.1")
            elapsed = time.perf_counter() - started
            latencies.append(elapsed if status == 200 and elapsed <= REVIEW_TIMEOUT else None)
    peak_mib, ticker_ms = child.finish()
    answered = [t for t in latencies if t is not None]
    attack_answers = ", ".join(
        f"{'evicted/timed out' if code == -1 else 'dropped' if code == 0 else code} x{count}"
        for code, count in sorted(attack.statuses.items())
    )
    return [
        name,
        f"{len(answered)}/{reviews}",
        f"{statistics.median(answered) * 1000:.0f}" if answered else "-",
        f"{max(answered) * 1000:.0f}" if answered else "-",
        f"{readiness}/{reviews}",
        f"{peak_mib:.0f}",
        f"{ticker_ms:.0f}",
        f"{attack.largest_answer / 1024:.1f}",
        attack_answers or "-",
    ]


def webhook_report(reviews: int, attacks: Sequence[str]) -> tuple[str, str]:
    from cronjob_operator.runtime.webhook import MAX_BODY_BYTES

    bodies = {"review": a_review(), "big": big_body(), "deep": deep_body(), "echo": echo_body()}
    with tempfile.TemporaryDirectory() as directory:
        cert_dir = Path(directory)
        generate = _common.REPO / "hack" / "gen-webhook-certs.sh"
        subprocess.run(["bash", str(generate), str(cert_dir)], check=True, capture_output=True)
        rows = [measure_webhooks(name, cert_dir, reviews, bodies) for name in attacks]
    caption = (
        f"A real AdmissionReview (from 127.0.0.1, {REVIEW_TIMEOUT:.0f} s timeout) and the "
        f"readiness handshake while attackers on 127.0.0.2-5 attack; big body = "
        f"{len(bodies['big']) / 2**20:.1f} MiB of [{{}},...] (cap {MAX_BODY_BYTES / 2**20:.0f} "
        f"MiB); peak RSS of the serving process (manifest limit {MANIFEST_LIMIT_MIB} MiB); "
        f"ticker = worst lateness of a {TICK * 1000:.0f} ms ticker thread there:"
    )
    headers = [
        "attack", "reviews answered", "median ms", "worst ms", "ready", "peak RSS MiB",
        "ticker ms", "largest attack answer KiB", "attack answers",
    ]  # fmt: skip
    return caption, _common.markdown_table(headers, rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", default="0,30,60,120", help="slow clients per run")
    parser.add_argument("--requests", type=int, default=20, help="normal requests per run")
    parser.add_argument("--skip-lifetime", action="store_true", help="skip the 10 s deadline run")
    parser.add_argument("--section", choices=["probes", "webhooks", "all"], default="all")
    parser.add_argument("--reviews", type=int, default=10, help="reviews per webhook attack")
    parser.add_argument(
        "--attacks", default=",".join(WEBHOOK_ATTACKS), help="webhook attacks to run, in order"
    )
    parser.add_argument("--serve-webhook", type=Path, help=argparse.SUPPRESS)  # the child
    args = parser.parse_args(argv)
    if args.serve_webhook:
        return serve_webhooks(args.serve_webhook)
    tables, notes = [], []
    if args.section in ("probes", "all"):
        rows = [measure(n, args.requests) for n in _common.parse_sizes(args.clients)]
        tables.append(
            (
                f"GET /healthz while N clients trickle headers (connection cap "
                f"{Limits().max_connections}):",
                _common.markdown_table(
                    ["slow clients", "served", "refused", "median ms", "worst ms"], rows
                ),
            )
        )
        if not args.skip_lifetime:
            lifetime = trickler_lifetime()
            notes.append(
                f"a trickling client was cut off after {lifetime:.1f} s "
                f"(read_header_timeout {Limits().read_header_timeout:.0f} s)"
            )
    if args.section in ("webhooks", "all"):
        attacks = [name for name in args.attacks.split(",") if name]
        unknown = set(attacks) - set(WEBHOOK_ATTACKS)
        if unknown:
            parser.error(f"unknown attacks {sorted(unknown)}; known: {', '.join(WEBHOOK_ATTACKS)}")
        tables.append(webhook_report(args.reviews, attacks))
    _common.print_report("Hostile clients", tables, notes)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
