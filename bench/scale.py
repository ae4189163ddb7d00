"""Scale: N CronJobs x M Jobs in the local cluster, the operator started from cold.

For each N the benchmark starts a control plane without the Job controller (Jobs are
stored, never run: bench/_cluster.py), creates N CronJobs and M Jobs owned by each, and
starts the operator (the real CLI, instrumented: bench/_runner.py) as a subprocess. Then,
one phase after another on that process (``run_size``, bench/_phases.py):

1. startup: time until the caches synced, and until every CronJob had been reconciled
   once; then every status is checked (observedGeneration, M active Jobs, Available);
   RSS (VmRSS from /proc) and its growth over the process before the cache filled, per
   cached object; process CPU;
2. steady: a quiet period, API requests counted (bench/api_load.py);
3. kicks: every CronJob enqueued at once with the production (indexed) Job lookup, and a
   sample with each naive lookup (bench/naive_vs_indexed.py), repeated until ``--sample``
   reconciles were timed; reconcile latency, CPU and API requests per reconcile.

``--all`` prints every table those phases feed from one cluster per N (what
bench/SCALE.md was made with); the other modules print their own table.

    python -m bench.scale [--sizes 100,1000,5000] [--jobs-per-cronjob 10] [--all]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import _common, api_load, naive_vs_indexed
from bench._phases import SizeResult, run_size
from bench._runner import VARIANTS

DEFAULT_SIZES = "100,1000,5000"


def scale_table(results: Sequence[SizeResult]) -> str:
    rows = []
    for r in results:
        growth = r.rss_kb - r.baseline_rss_kb
        indexed = r.phases.get("indexed")
        rows.append(
            [
                f"{r.cronjobs:,} x {r.jobs // max(r.cronjobs, 1)}",
                f"{r.objects:,}",
                f"{r.sync_seconds:.1f}",
                f"{r.reconciled_seconds:.1f}",
                f"{r.correct:,}/{r.cronjobs:,}",
                f"{r.rss_kb / 1024:.0f}",
                f"{r.peak_rss_kb / 1024:.0f}",
                f"{r.peak_rss_kb / max(r.rss_kb, 1):.2f}",
                f"{growth / 1024:.0f}",
                f"{growth * 1024 / max(r.objects, 1):,.0f}",
                f"{r.startup.cpu_seconds:.1f}",
                f"{indexed.cpu_ms():.2f}" if indexed else "-",
                f"{1000 * statistics.median(indexed.stats['cpu']):.2f}" if indexed else "-",
            ]
        )
    return _common.markdown_table(
        [
            "CronJobs x Jobs",
            "cached objects",
            "cache sync s",
            "all reconciled s",
            "status correct",
            "RSS MiB",
            "peak RSS MiB",
            "peak / RSS",
            "RSS growth MiB",
            "bytes/object",
            "startup CPU s",
            "CPU ms/reconcile",
            "reconcile CPU ms p50",
        ],
        rows,
    )


def scale_notes() -> list[str]:
    return [
        "Job controller off (kube-controller-manager without job-controller): Jobs are "
        "stored, never run; with no status, all M Jobs of a CronJob are active.",
        "times are from the operator process's start; 'all reconciled': every CronJob "
        "reconciled once (its status written); 'status correct': observedGeneration, "
        "M active refs and Available=True, read back from the API server.",
        "RSS: VmRSS of the operator process after every first reconcile; peak: its VmHWM "
        "then (the highest RSS during the initial sync and first reconciles); growth: over "
        "its RSS after imports and setup, before the caches filled; per cached object.",
        "CPU ms/reconcile: process CPU over a kick of every CronJob (no-op reconciles) / "
        "reconciles; reconcile CPU: the worker thread's CPU inside reconcile().",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=DEFAULT_SIZES, help=f"N values ({DEFAULT_SIZES})")
    parser.add_argument("--jobs-per-cronjob", type=int, default=10, help="M (10)")
    parser.add_argument(
        "--all", action="store_true", help="also print the API-load and naive-vs-indexed tables"
    )
    parser.add_argument(
        "--sample", type=int, default=1000, help="reconciles timed per lookup, at least (1000)"
    )
    parser.add_argument("--steady-seconds", type=float, default=30.0, help="with --all (30)")
    parser.add_argument(
        "--consistent-list",
        action="store_true",
        help="experiment: first LIST with resourceVersion='' (paged) instead of '0' "
        "(only used when the initial sync falls back to a LIST: with --no-watch-list)",
    )
    parser.add_argument(
        "--no-watch-list",
        action="store_true",
        help="kube-apiserver with the WatchList feature gate off (informers LIST, not stream)",
    )
    args = parser.parse_args(argv)
    results = [
        run_size(
            n,
            jobs_per_cronjob=args.jobs_per_cronjob,
            kicks=VARIANTS if args.all else ("indexed",),
            sample=args.sample,
            steady_seconds=args.steady_seconds if args.all else 0.0,
            consistent_list=args.consistent_list,
            watch_list=not args.no_watch_list,
        )
        for n in _common.parse_sizes(args.sizes)
    ]
    tables = [("Scale (N CronJobs x M Jobs):", scale_table(results))]
    notes = scale_notes()
    if args.consistent_list:
        notes.append("EXPERIMENT: first LIST with resourceVersion='' (paged), not '0'.")
    if args.all:
        tables.append(("API load:", api_load.table(results)))
        tables.append(("Naive vs indexed Job lookup:", naive_vs_indexed.table(results)))
        notes += api_load.notes() + naive_vs_indexed.notes()
    _common.print_report("Scale", tables, notes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
