"""Reconcile requests under a flood of random bearer tokens on /metrics, on the real API server.

A manager's secure metrics server (HTTPS, TokenReview + SubjectAccessReview) runs against
a local control plane. Its controllers' client has a client-side limit (``--qps``/``--burst``,
kube-controller-manager's 20 and 30 by default) on a bucket that counts every token
taken. ``--threads`` clients send ``--tokens`` requests, each with a token of its own
that the API server does not know; meanwhile a reconcile thread sends GETs through the
controllers' client (the path of every reconcile's request) at half its rate, so any
wait for a token is the flood's doing, and a
scraper whose token was reviewed before the flood scrapes once. It reports:

* the flood's answers by status, its rate, and the TokenReviews the API server
  received (``apiserver_request_total``);
* the tokens of the controllers' bucket that went to reviews (taken minus the reconcile
  thread's own);
* the reconcile requests' latency and the time they waited for their token.

Check out the commit before this one and run it again to compare.

    python -m bench.metrics_flood [--tokens 400] [--threads 16] [--reconciles 40]
                                  [--qps 20] [--burst 30]
"""

from __future__ import annotations

import argparse
import collections
import http.client
import secrets
import ssl
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import _cluster, _common
from cronjob_operator.envtest import ControlPlane
from cronjob_operator.runtime import context
from cronjob_operator.runtime.client import RestClient, TokenBucket, load_configuration
from cronjob_operator.runtime.manager import Manager, Options

CONTROLLERS_QPS = 20.0
CONTROLLERS_BURST = 30
"""kube-controller-manager's ``--kube-api-qps`` / ``--kube-api-burst``: the default limit
of the controllers' client."""
RECONCILE_THREAD = "reconcile"
RECONCILE_SHARE = 0.5
"""The reconcile thread asks for half the controllers' rate: alone, it never waits."""
SCRAPER = "flood-scraper"


class CountingBucket(TokenBucket):
    """A ``TokenBucket`` that records, per thread name, how long each acquire waited."""

    def __init__(self, qps: float, burst: int) -> None:
        super().__init__(qps, burst)
        self._count_lock = threading.Lock()
        self.waits: dict[str, list[float]] = collections.defaultdict(list)

    def acquire(self, ctx: context.Context = context.BACKGROUND) -> float:
        waited = super().acquire(ctx)
        with self._count_lock:
            self.waits[threading.current_thread().name].append(waited)
        return waited

    def taken(self) -> int:
        """Tokens taken so far, by every thread."""
        with self._count_lock:
            return sum(len(waits) for waits in self.waits.values())


@dataclass
class FloodResult:
    """What one flood did (see the module doc)."""

    statuses: collections.Counter[int]
    flood_seconds: float
    reviews_at_server: int
    controllers_tokens_to_reviews: int
    reconcile_latencies: list[float]
    reconcile_waits: list[float]
    scraper_before: int
    scraper_during: int


def metrics_status(port: int, token: str) -> int:
    """The status of one GET /metrics with ``token`` (TLS unverified, as a scraper's)."""
    tls = ssl.create_default_context()
    tls.check_hostname = False
    tls.verify_mode = ssl.CERT_NONE
    connection = http.client.HTTPSConnection("127.0.0.1", port, timeout=30, context=tls)
    try:
        connection.request("GET", "/metrics", headers={"Authorization": f"Bearer {token}"})
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def scraper_token(plane: ControlPlane, namespace: str = "default") -> str:
    """A token of a ServiceAccount allowed to get /metrics (made once per control plane)."""
    for args in (
        ("create", "serviceaccount", SCRAPER, "-n", namespace),
        ("create", "clusterrole", SCRAPER, "--verb=get", "--non-resource-url=/metrics"),
        ("create", "clusterrolebinding", SCRAPER, f"--clusterrole={SCRAPER}",
         f"--serviceaccount={namespace}:{SCRAPER}"),
    ):  # fmt: skip
        made = plane.kubectl(*args)
        if made.returncode != 0 and "already exists" not in made.stderr:
            raise RuntimeError(f"kubectl {' '.join(args)}: {made.stderr.strip()}")
    return plane.kubectl("create", "token", SCRAPER, "-n", namespace, check=True).stdout.strip()


def run_flood(
    plane: ControlPlane,
    tokens: int,
    threads: int,
    reconciles: int,
    *,
    qps: float = CONTROLLERS_QPS,
    burst: int = CONTROLLERS_BURST,
) -> FloodResult:
    """Flood a fresh manager's metrics server while the reconcile thread runs; the
    controllers' client is limited to ``qps`` and ``burst``."""
    bucket = CountingBucket(qps, burst)
    rest = RestClient(load_configuration(str(plane.kubeconfig)), rate_limiter=bucket)
    options = Options(metrics_secure=True, health_probe_bind_address="0")
    server = Manager(rest, options)._metrics_server(("127.0.0.1", 0))
    scraper = scraper_token(plane)
    server.start()
    try:
        scraper_before = metrics_status(server.port, scraper)
        taken_before = bucket.taken()
        before = _cluster.ApiCounts.read(plane)
        latencies: list[float] = []
        reconcile = threading.Thread(
            target=_reconcile_requests,
            args=(rest, reconciles, 1 / (qps * RECONCILE_SHARE), latencies),
            name=RECONCILE_THREAD,
        )
        reconcile.start()
        started = time.monotonic()
        with ThreadPoolExecutor(threads) as pool:
            flooding = pool.map(
                lambda _: metrics_status(server.port, secrets.token_urlsafe(32)), range(tokens)
            )
            scraper_during = metrics_status(server.port, scraper)
            statuses = collections.Counter(flooding)
        flood_seconds = time.monotonic() - started
        reconcile.join()
        reviews = _cluster.ApiCounts.read(plane).since(before).count_of(["POST"], ["tokenreviews"])
    finally:
        server.stop()
        rest.close()
    own = bucket.waits[RECONCILE_THREAD]
    return FloodResult(
        statuses=statuses,
        flood_seconds=flood_seconds,
        reviews_at_server=reviews,
        controllers_tokens_to_reviews=bucket.taken() - taken_before - len(own),
        reconcile_latencies=latencies,
        reconcile_waits=list(own),
        scraper_before=scraper_before,
        scraper_during=scraper_during,
    )


def _reconcile_requests(
    rest: RestClient, count: int, interval: float, latencies: list[float]
) -> None:
    """``count`` GETs, one every ``interval`` seconds; each one's latency goes to ``latencies``."""
    due = time.monotonic()
    for _ in range(count):
        time.sleep(max(0.0, due - time.monotonic()))
        start = time.monotonic()
        rest.request("GET", "/api/v1/namespaces/default/configmaps", params={"limit": 1})
        latencies.append(time.monotonic() - start)
        due = start + interval


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.1f}"


def report(result: FloodResult, args: argparse.Namespace) -> None:
    """Print the flood's figures as markdown tables."""
    answers = ", ".join(
        f"{count:,} x {status}" for status, count in sorted(result.statuses.items())
    )
    flood_rows = [
        ["answers to the flood", answers],
        ["flood rate, requests/s", f"{sum(result.statuses.values()) / result.flood_seconds:.1f}"],
        ["TokenReviews the API server received", f"{result.reviews_at_server:,}"],
        ["controllers' bucket tokens taken by reviews", str(result.controllers_tokens_to_reviews)],
        ["scraper (token cached) before / during", f"{result.scraper_before} / "
         f"{result.scraper_during}"],
    ]  # fmt: skip
    latencies, waits = result.reconcile_latencies, result.reconcile_waits
    reconcile_rows = [
        ["latency, ms", _ms(_cluster.percentile(latencies, 0.5)),
         _ms(_cluster.percentile(latencies, 0.99)), _ms(max(latencies, default=0.0))],
        ["limiter wait, ms", _ms(_cluster.percentile(waits, 0.5)),
         _ms(_cluster.percentile(waits, 0.99)), _ms(max(waits, default=0.0))],
    ]  # fmt: skip
    _common.print_report(
        "Metrics token flood",
        [
            (
                f"{args.tokens:,} requests with random tokens from {args.threads} threads:",
                _common.markdown_table(["", "figure"], flood_rows),
            ),
            (
                f"{len(latencies)} reconcile requests meanwhile (controllers' client, "
                f"{args.qps:g} qps, burst {args.burst}):",
                _common.markdown_table(["", "p50", "p99", "max"], reconcile_rows),
            ),
        ],
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=400, help="flood requests (400)")
    parser.add_argument("--threads", type=int, default=16, help="flooding clients (16)")
    parser.add_argument("--reconciles", type=int, default=40, help="reconcile requests (40)")
    parser.add_argument("--qps", type=float, default=CONTROLLERS_QPS, help="controllers' (20)")
    parser.add_argument("--burst", type=int, default=CONTROLLERS_BURST, help="controllers' (30)")
    args = parser.parse_args(argv)
    with _cluster.bench_plane() as plane:
        result = run_flood(
            plane, args.tokens, args.threads, args.reconciles, qps=args.qps, burst=args.burst
        )
    report(result, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
