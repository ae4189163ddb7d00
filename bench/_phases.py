"""The engine bench/scale.py, bench/api_load.py and bench/naive_vs_indexed.py share: one
cluster at N CronJobs x M Jobs, one operator process on it, and the phases measured on
that process (``run_size``), each phase's API requests and CPU (``Phase``) and everything
measured at one N (``SizeResult``).

It is a module of its own so that the three benchmarks import it, and not each other:
scale.py prints the others' tables with ``--all``, and they run this same engine alone.
"""

from __future__ import annotations

import math
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import _cluster
from bench._runner import ManagerProcess
from cronjob_operator.api.batch_v1 import CRONJOB
from cronjob_operator.runtime.client import RestClient

__all__ = ["READ_VERBS", "WRITE_VERBS", "Phase", "SizeResult", "run_size"]

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
