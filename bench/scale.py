"""Scale: N CronJobs x M Jobs in the local cluster, the operator started from cold.

For each N the benchmark starts a control plane without the Job controller (Jobs are
stored, never run: bench/_cluster.py), creates N CronJobs and M Jobs owned by each, and
starts the operator (the real CLI, instrumented: bench/_runner.py) as a subprocess. Then,
one phase after another on that process (``run_size``):

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
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import _cluster, _common
from bench._runner import VARIANTS, ManagerProcess
from cronjob_operator.api.batch_v1 import CRONJOB
from cronjob_operator.runtime.client import RestClient

DEFAULT_SIZES = "100,1000,5000"
WRITE_VERBS = ("POST", "PUT", "PATCH", "DELETE", "APPLY")
READ_VERBS = ("GET", "LIST")


@dataclass
class Phase:
    """One phase on the operator process: its stats, API requests and CPU."""

    name: str
    seconds: float
    stats: dict[str, Any]
    api: _cluster.ApiCounts
    cpu_seconds: float

    @property
    def reconciles(self) -> int:
        return int(self.stats["reconciles"])

    def client(self, verbs: Sequence[str]) -> int:
        """This process's requests with one of ``verbs`` (client-side count)."""
        return sum(n for key, n in self.stats["requests"].items() if key.split()[0] in verbs)

    def server(self, verbs: Sequence[str]) -> int:
        """The API server's count of ``verbs`` on the resources the operator touches."""
        return self.api.count_of(verbs, _cluster.OWNED_RESOURCES)

    def latency_ms(self, fraction: float) -> float:
        return 1000 * _cluster.percentile(self.stats["durations"], fraction)

    def cpu_ms(self) -> float:
        return 1000 * self.cpu_seconds / max(self.reconciles, 1)


@dataclass
class SizeResult:
    """Everything measured at one N."""

    cronjobs: int
    jobs: int
    populate_seconds: float
    sync_seconds: float
    reconciled_seconds: float
    correct: int
    rss_kb: int
    peak_rss_kb: int
    baseline_rss_kb: int
    startup: Phase
    phases: dict[str, Phase] = field(default_factory=dict)

    @property
    def objects(self) -> int:
        return self.cronjobs + self.jobs


def check_statuses(rest: RestClient, jobs_per_cronjob: int) -> int:
    """How many CronJobs have the status a first reconcile must write."""
    correct = 0
    params: dict[str, Any] = {"limit": 500}
    while True:
        page = rest.request("GET", CRONJOB.collection_path(None), params=params)
        for item in page.get("items") or ():
            status = item.get("status") or {}
            available = [c for c in status.get("conditions") or () if c.get("type") == "Available"]
            if (
                status.get("observedGeneration") == item["metadata"].get("generation")
                and len(status.get("active") or ()) == jobs_per_cronjob
                and available
                and available[0].get("status") == "True"
            ):
                correct += 1
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            return correct
        params = {"limit": 500, "continue": token}


def _phase(
    name: str, plane: Any, operator: ManagerProcess, action: Any, *, quiet: float = 2.0
) -> Phase:
    """Run ``action`` (kick or sleep) as a fresh phase and measure it until the queue drains."""
    operator.stats(reset=True)
    api_before = _cluster.ApiCounts.read(plane)
    cpu_before = operator.cpu_seconds()
    began = time.time()
    action()
    stats = operator.wait_quiet(quiet)
    end = stats["last_done"] or time.time()
    cpu = operator.cpu_seconds() - cpu_before
    return Phase(name, end - began, stats, _cluster.ApiCounts.read(plane).since(api_before), cpu)


def _kick(operator: ManagerProcess, variant: str, limit: int, rounds: int) -> None:
    """Enqueue ``limit`` CronJobs at once, ``rounds`` times, each after the last drained."""
    for done in range(1, rounds + 1):
        operator.kick(variant, limit)
        wanted = done * limit

        def drained(stats: dict[str, Any], wanted: int = wanted) -> bool:
            return int(stats["reconciles"]) >= wanted

        operator.wait_stats(drained, 900, "a kick")


def run_size(
    count: int,
    *,
    jobs_per_cronjob: int = 10,
    kicks: Sequence[str] = ("indexed",),
    sample: int = 1000,
    steady_seconds: float = 0.0,
    consistent_list: bool = False,
    watch_list: bool = True,
    log_dir: Path | None = None,
) -> SizeResult:
    """Create the cluster for N=``count`` and measure the requested phases on one operator.

    ``watch_list=False`` runs kube-apiserver with the WatchList gate off, so the
    informers fall back to a LIST.
    """
    log_dir = log_dir or Path(tempfile.mkdtemp(prefix="bench-scale-"))
    gates = None if watch_list else {"WatchList": False}
    with _cluster.bench_plane(feature_gates=gates) as plane:
        rest = _cluster.rest_client(plane)
        population = _cluster.populate(rest, count, jobs_per_cronjob=jobs_per_cronjob)
        api_before = _cluster.ApiCounts.read(plane)
        with ManagerProcess(
            plane, consistent_list=consistent_list, log=log_dir / f"operator-{count}.log"
        ) as operator:
            stats = operator.wait_stats(
                lambda s: s["first_count"] >= count, 900, "every CronJob reconciled once"
            )
            rss = operator.rss_kb()
            peak = operator.peak_rss_kb()
            cpu = operator.cpu_seconds()
            stats = operator.wait_quiet()
            startup = Phase(
                "startup",
                stats["first_last"] - operator.started,
                stats,
                _cluster.ApiCounts.read(plane).since(api_before),
                cpu,
            )
            result = SizeResult(
                cronjobs=count,
                jobs=population.jobs,
                populate_seconds=population.seconds,
                sync_seconds=stats["synced_at"] - operator.started,
                reconciled_seconds=stats["first_last"] - operator.started,
                correct=check_statuses(rest, jobs_per_cronjob),
                rss_kb=rss,
                peak_rss_kb=peak,
                baseline_rss_kb=stats["baseline_rss_kb"],
                startup=startup,
            )
            if steady_seconds:
                result.phases["steady"] = _phase(
                    "steady", plane, operator, lambda: time.sleep(steady_seconds), quiet=0.0
                )
            for variant in kicks:
                limit = count if variant == "indexed" else min(count, sample)
                rounds = max(1, math.ceil(sample / limit))
                result.phases[variant] = _phase(
                    variant,
                    plane,
                    operator,
                    lambda v=variant, n=limit, r=rounds: _kick(operator, v, n, r),
                )
    return result


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
    from bench import api_load, naive_vs_indexed

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
