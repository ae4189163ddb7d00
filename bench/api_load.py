"""API load: requests the operator sends per reconcile, from the API server's own /metrics.

For each N (cluster and operator as bench/_phases.py builds them) the API server's
``apiserver_request_total`` is read before and after three phases, and the operator's own
requests are counted client-side (bench/_runner.py) to attribute them exactly:

* startup: the operator's initial LISTs (pages of 500) and WATCHes, and the first reconcile
  of every CronJob, which writes its status;
* steady: a quiet period with nothing changing (``--steady-seconds``);
* resync: every CronJob enqueued at once (what a resync does): no-op reconciles.

Targets (issue 8): zero GET and LIST per reconcile (every read from the cache) and zero
writes for a reconcile that changes nothing.

    python -m bench.api_load [--sizes 100,1000,5000] [--steady-seconds 30]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import _common
from bench._phases import READ_VERBS, WRITE_VERBS, Phase, SizeResult, run_size

DEFAULT_SIZES = "100,1000,5000"


def _row(n: int, phase: Phase, name: str) -> list[str]:
    reconciles = phase.reconciles
    reads, writes = phase.client(READ_VERBS), phase.client(WRITE_VERBS)
    per = max(reconciles, 1)
    return [
        f"{n:,}",
        name,
        f"{reconciles:,}",
        f"{phase.client(('LIST',)):,}",
        f"{phase.client(('GET',)):,}",
        f"{writes:,}",
        f"{reads / per:.3f}" if reconciles else "-",
        f"{writes / per:.3f}" if reconciles else "-",
        f"{phase.server(READ_VERBS):,}",
        f"{phase.server(WRITE_VERBS):,}",
    ]


def table(results: Sequence[SizeResult]) -> str:
    rows = []
    for r in results:
        rows.append(_row(r.cronjobs, r.startup, "startup (list + first reconciles)"))
        if "steady" in r.phases:
            steady = r.phases["steady"]
            rows.append(_row(r.cronjobs, steady, f"steady, {steady.seconds:.0f} s"))
        if "indexed" in r.phases:
            kicked = r.phases["indexed"]
            rounds = kicked.reconciles // max(r.cronjobs, 1)
            name = "resync: kick every CronJob" + (f" (x{rounds})" if rounds > 1 else "")
            rows.append(_row(r.cronjobs, kicked, name))
    return _common.markdown_table(
        [
            "N",
            "phase",
            "reconciles",
            "LIST",
            "GET",
            "writes",
            "GET+LIST/reconcile",
            "writes/reconcile",
            "server GET+LIST",
            "server writes",
        ],
        rows,
    )


def notes() -> list[str]:
    return [
        "LIST, GET, writes: the operator's own requests, counted in its REST client; writes "
        "are POST/PUT/PATCH/DELETE (status updates and Events included).",
        "server columns: the API server's apiserver_request_total delta over the phase for "
        "cronjobs, cronjobs/status, jobs and events, whoever sent them (the garbage "
        "collector also GETs owners; the benchmark's own status check is a LIST).",
        "startup LISTs are the informers' initial lists, not reconciles (resourceVersion=0: "
        "the API server answers each in one response, whatever the limit).",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=DEFAULT_SIZES, help=f"N values ({DEFAULT_SIZES})")
    parser.add_argument("--jobs-per-cronjob", type=int, default=10, help="M (10)")
    parser.add_argument("--steady-seconds", type=float, default=30.0, help="quiet period (30)")
    args = parser.parse_args(argv)
    results = [
        run_size(n, jobs_per_cronjob=args.jobs_per_cronjob, steady_seconds=args.steady_seconds)
        for n in _common.parse_sizes(args.sizes)
    ]
    _common.print_report("API load", [("Requests per phase:", table(results))], notes())
    return 0


if __name__ == "__main__":
    sys.exit(main())
