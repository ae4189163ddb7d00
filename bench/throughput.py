"""Reconcile throughput: per worker, and with max_concurrent_reconciles 1, 2, 4 and 8.

On one cluster of N CronJobs x M Jobs (bench/_cluster.py; Job controller off), for each
worker count the operator (bench/_runner.py) is started with
``--max-concurrent-reconciles=K`` after every CronJob's status was emptied, so:

* write-bound: the first reconcile of each CronJob writes its status (one PUT each); timed
  from the cache sync until every CronJob was reconciled once;
* cache-bound: then every CronJob is enqueued at once (a resync); each reconcile reads the
  cache and changes nothing; timed until the queue drains.

Reported: reconciles per second, and per worker.

    python -m bench.throughput [--cronjobs 1000] [--jobs-per-cronjob 10] [--workers 1,2,4,8]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import _cluster, _common
from bench._runner import ManagerProcess


def measure(count: int, workers: Sequence[int], *, jobs_per_cronjob: int = 10) -> list[list[str]]:
    """One row per worker count (see the module docstring)."""
    rows: list[list[str]] = []
    log_dir = Path(tempfile.mkdtemp(prefix="bench-throughput-"))
    with _cluster.bench_plane() as plane:
        rest = _cluster.rest_client(plane)
        population = _cluster.populate(rest, count, jobs_per_cronjob=jobs_per_cronjob)
        for k in workers:
            _cluster.clear_statuses(rest, population.cronjobs)
            time.sleep(2.0)  # let the watch events of the clearing settle before starting
            with ManagerProcess(plane, workers=k, log=log_dir / f"operator-{k}.log") as op:
                first = op.wait_first_reconciles(count, 900)
                write_rate = count / max(first["first_last"] - first["synced_at"], 1e-9)
                op.wait_quiet()
                op.stats(reset=True)
                began = time.time()
                op.kick("indexed", count)
                kicked = op.wait_quiet()
                noop_rate = kicked["reconciles"] / max(kicked["last_done"] - began, 1e-9)
                p50 = 1000 * _cluster.percentile(kicked["durations"], 0.5)
                p99 = 1000 * _cluster.percentile(kicked["durations"], 0.99)
            rows.append(
                [
                    str(k),
                    f"{write_rate:,.0f}",
                    f"{write_rate / k:,.0f}",
                    f"{noop_rate:,.0f}",
                    f"{noop_rate / k:,.0f}",
                    f"{p50:.2f}",
                    f"{p99:.2f}",
                ]
            )
    return rows


HEADERS = [
    "workers",
    "status-writing reconciles/s",
    "per worker",
    "no-op reconciles/s",
    "per worker",
    "no-op p50 ms",
    "no-op p99 ms",
]


def notes(count: int, jobs_per_cronjob: int) -> list[str]:
    return [
        f"N={count:,} CronJobs x {jobs_per_cronjob} Jobs; Job controller off (Jobs never run).",
        "status-writing: each CronJob's first reconcile after its status was emptied (one "
        "PUT of the status each), from cache sync to the last first reconcile.",
        "no-op: every CronJob enqueued at once afterwards; latency is reconcile() wall time.",
        "one Python process: reconciles share the GIL, so extra workers help only while "
        "others wait for the API server.",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cronjobs", type=int, default=1000, help="N (1000)")
    parser.add_argument("--jobs-per-cronjob", type=int, default=10, help="M (10)")
    parser.add_argument("--workers", default="1,2,4,8", help="worker counts (1,2,4,8)")
    args = parser.parse_args(argv)
    workers = [int(w) for w in args.workers.split(",")]
    rows = measure(args.cronjobs, workers, jobs_per_cronjob=args.jobs_per_cronjob)
    _common.print_report(
        "Reconcile throughput",
        [("Throughput by max_concurrent_reconciles:", _common.markdown_table(HEADERS, rows))],
        notes(args.cronjobs, args.jobs_per_cronjob),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
