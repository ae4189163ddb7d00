"""Naive vs indexed: the same reconcile with its Job lookup done three ways, at each N.

* indexed (production): ``client.list(JOB, namespace=ns, matching_fields={
  ".metadata.controller": name})``, one lookup in the cache's field index;
* scan: every Job of the namespace from the cache, filtered by controller owner;
* live: a LIST with a label selector sent to the API server per reconcile, as many Python
  operators do.

The variants replace ``CronJobReconciler._owned_jobs`` in the benchmark's instrumented
operator (bench/_runner.py); production code is unchanged. On the cluster bench/_phases.py
builds for each N, every CronJob (indexed) or the first ``--sample`` CronJobs (naive) are
enqueued at once, again until at least ``--sample`` reconciles were timed; each reconcile
changes nothing. Reported: reconcile latency (wall, p50
and p99), the operator's CPU per reconcile and its API requests per reconcile. The indexed
path should be flat in N.

    python -m bench.naive_vs_indexed [--sizes 100,1000,5000] [--sample 1000]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import _common
from bench._phases import READ_VERBS, SizeResult, run_size
from bench._runner import VARIANTS

DEFAULT_SIZES = "100,1000,5000"


def table(results: Sequence[SizeResult]) -> str:
    rows = []
    for r in results:
        for variant in VARIANTS:
            phase = r.phases.get(variant)
            if phase is None:
                continue
            per = max(phase.reconciles, 1)
            rows.append(
                [
                    f"{r.cronjobs:,}",
                    f"{r.objects - r.cronjobs:,}",
                    variant,
                    f"{phase.reconciles:,}",
                    f"{phase.latency_ms(0.5):.2f}",
                    f"{phase.latency_ms(0.99):.2f}",
                    f"{phase.cpu_ms():.2f}",
                    f"{phase.client(READ_VERBS) / per:.2f}",
                    f"{phase.reconciles / max(phase.seconds, 1e-9):,.0f}",
                ]
            )
    return _common.markdown_table(
        [
            "N",
            "Jobs",
            "lookup",
            "reconciles",
            "p50 ms",
            "p99 ms",
            "CPU ms/reconcile",
            "GET+LIST/reconcile",
            "reconciles/s",
        ],
        rows,
    )


def notes() -> list[str]:
    return [
        "latency: wall time of reconcile() (one worker); CPU: the operator process's CPU "
        "over the phase / reconciles; GET+LIST: the operator's own requests.",
        "Jobs are spread over 10 namespaces, so a scan reads N*M/10 Jobs per reconcile and "
        "a live LIST makes the API server filter as many.",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=DEFAULT_SIZES, help=f"N values ({DEFAULT_SIZES})")
    parser.add_argument("--jobs-per-cronjob", type=int, default=10, help="M (10)")
    parser.add_argument(
        "--sample", type=int, default=1000, help="reconciles timed per lookup, at least (1000)"
    )
    args = parser.parse_args(argv)
    results = [
        run_size(n, jobs_per_cronjob=args.jobs_per_cronjob, kicks=VARIANTS, sample=args.sample)
        for n in _common.parse_sizes(args.sizes)
    ]
    _common.print_report("Naive vs indexed", [("Job lookup:", table(results))], notes())
    return 0


if __name__ == "__main__":
    sys.exit(main())
