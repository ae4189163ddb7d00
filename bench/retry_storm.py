"""The retry rate of a storm of failures, with per-item backoff only and with the overall bucket.

N requests fail at once and keep failing (an API server answering every write with a
500, say). W workers take them from a real ``WorkQueue``; each failed reconcile takes
``--failure-ms`` and is re-added with ``add_rate_limited``, as the controller does. Time
is the runtime's ``FakeClock``, moved step by step, so the figures are exact and the run
takes a second, not the simulated minute. Two rows:

* per-item backoff only (the work queue before): 5 ms doubling to 1000 s per request;
* client-go's default controller limiter (``RetryLimits``, now the default): the larger of
  that backoff and one bucket over all requests, 10 a second after a burst of 100.

It reports the reconciles (each one API request that fails) in the first second, the
first 10 s and the whole run, and the busiest second.

    python -m bench.retry_storm [--requests 300] [--workers 4] [--failure-ms 5] [--seconds 60]
"""

from __future__ import annotations

import argparse
import collections
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import _common
from cronjob_operator.runtime.clock import FakeClock
from cronjob_operator.runtime.controller import (
    ItemExponentialFailureRateLimiter,
    RateLimiter,
    RetryLimits,
    WorkQueue,
)

LimiterFactory = Callable[[Callable[[], float]], RateLimiter]

LIMITERS: dict[str, LimiterFactory] = {
    "per-item backoff only (before)": lambda _clock: ItemExponentialFailureRateLimiter(),
    "with the overall bucket (RetryLimits)": lambda clock: RetryLimits().rate_limiter(clock),
}


def reconcile_times(
    limiter: LimiterFactory, requests: int, workers: int, failure: float, seconds: float
) -> list[float]:
    """When each failing reconcile started (seconds since the storm began)."""
    clock = FakeClock()
    start = clock.monotonic()
    queue: WorkQueue[str] = WorkQueue(
        "retry-storm", rate_limiter=limiter(clock.monotonic), clock=clock.monotonic
    )
    for n in range(requests):
        queue.add(f"request-{n}")
    started: list[float] = []
    while clock.monotonic() - start < seconds:
        taken: list[str] = []
        while len(taken) < workers and (item := queue.get(timeout=0)) is not None:
            taken.append(item)
            started.append(clock.monotonic() - start)
        clock.advance(failure)
        for item in taken:
            queue.done(item)
            queue.add_rate_limited(item)
    queue.shut_down()
    return started


def row(name: str, started: Sequence[float], requests: int) -> list[object]:
    """The counts for one limiter: retries are the reconciles after each request's first."""
    per_second = collections.Counter(int(t) for t in started)
    retries = len(started) - requests
    return [
        name,
        f"{per_second[0]:,}",
        f"{sum(1 for t in started if t < 10):,}",
        f"{len(started):,}",
        f"{retries:,}",
        f"{max(per_second.values()):,}",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300, help="requests failing (300)")
    parser.add_argument("--workers", type=int, default=4, help="reconcile workers (4)")
    parser.add_argument("--failure-ms", type=float, default=5.0, help="ms per failure (5)")
    parser.add_argument("--seconds", type=float, default=60.0, help="simulated seconds (60)")
    args = parser.parse_args(argv)
    rows = [
        row(
            name,
            reconcile_times(
                factory, args.requests, args.workers, args.failure_ms / 1000, args.seconds
            ),
            args.requests,
        )
        for name, factory in LIMITERS.items()
    ]
    headers = [
        "work queue limiter",
        "reconciles, 1st s",
        "first 10 s",
        f"{args.seconds:g} s",
        "of them retries",
        "busiest second",
    ]
    _common.print_report(
        "Retry storm",
        [
            (
                f"{args.requests:,} requests failing at once and on every retry, "
                f"{args.workers} workers, {args.failure_ms:g} ms per failed reconcile:",
                _common.markdown_table(headers, rows),
            )
        ],
        ["Simulated time (FakeClock); every reconcile is one API request that fails."],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
