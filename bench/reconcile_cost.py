"""Reconcile cost: CPU of one CronJob reconcile, in process, on the runtime's fake client.

A no-op reconcile (nothing due, status already right) is what a manager pays for every
resync, every watch echo of its own status write and every Job event: at 5,000 CronJobs
it is most of the startup CPU. This benchmark builds a CronJob with ``--jobs`` finished
Jobs on ``runtime.fake``, lets it reach its steady status, then times ``--reconciles``
no-op reconciles (process CPU per reconcile) for each schedule, twice: as shipped, and
without the schedule package's caches (croniter's parse of a schedule done once, its
steps remembered, and the pairs of schedule times around the last queries remembered per
schedule), as a reconcile was
before them. Both columns come from the same process, so their ratio holds on a noisy
machine.

A second table shows what a finished tenant request costs afterwards: the same no-op
reconcile without a backfill annotation, and with one whose backfill is Complete (the
annotation stays, ``status.backfill`` records it done, its Jobs are pruned), for the
requests of issue 35 (1,000 times of ``* * * * *``, ten every-minute schedules, ten
``0 0 29 2 *`` in America/New_York). A reconcile's cost must not grow with a request
that is done.

    python -m bench.reconcile_cost [--reconciles 3000] [--jobs 10] [--backfill-reconciles 20]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import _common
from cronjob_operator.api.batch_v1 import BACKFILL_ANNOTATION, CRONJOB
from cronjob_operator.controllers.cronjob import CronJobReconciler
from cronjob_operator.runtime import objects
from cronjob_operator.runtime.clock import FakeClock
from cronjob_operator.runtime.controller import Request
from cronjob_operator.runtime.controllerutil import rfc3339
from cronjob_operator.runtime.fake import FakeRecorder
from cronjob_operator.runtime.kinds import JOB
from cronjob_operator.schedule import _times

SCHEDULES = ("*/5 * * * *", "0 9-17 * * 1-5", "30 2 * * *")
ZONE = "Europe/Berlin"
START = datetime(2026, 3, 2, tzinfo=UTC)  # a Monday


EVERY_MINUTE = (
    "* * * * *",
    "*/1 * * * *",
    "0-59 * * * *",
    "0-59/1 * * * *",
    "* */1 * * *",
    "* 0-23 * * *",
    "* * 1-31 * *",
    "* * */1 * *",
    "* * * 1-12 *",
    "* * * * 0-6",
)
"""Ten spellings of every minute: ten schedules with the same times (none walked once)."""


@dataclass(frozen=True)
class Backfilled:
    """A row of the second table: a schedule spec and the completed request beside it."""

    label: str
    spec: dict[str, Any]
    start: datetime
    end: datetime


BACKFILLED = (
    Backfilled(
        "`* * * * *`, 1,000 times",
        {"schedule": "* * * * *", "timeZone": "UTC"},
        datetime(2026, 1, 1, tzinfo=UTC),
        datetime(2026, 1, 1, 16, 40, tzinfo=UTC),
    ),
    Backfilled(
        "ten every-minute schedules, 1,000 times",
        {"schedules": list(EVERY_MINUTE), "timeZone": "UTC"},
        datetime(2026, 1, 1, tzinfo=UTC),
        datetime(2026, 1, 1, 16, 40, tzinfo=UTC),
    ),
    Backfilled(
        "ten `0 0 29 2 *` in America/New_York, 1972-2286",
        {"schedules": ["0 0 29 2 *"] * 10, "timeZone": "America/New_York"},
        datetime(1972, 1, 1, tzinfo=UTC),
        datetime(2286, 1, 1, tzinfo=UTC),
    ),
)


def _cronjob(schedule: str | dict[str, Any]) -> dict[str, Any]:
    spec = {"schedule": schedule, "timeZone": ZONE} if isinstance(schedule, str) else schedule
    return {
        "apiVersion": CRONJOB.api_version,
        "kind": "CronJob",
        "metadata": {"name": "bench", "namespace": "ns", "creationTimestamp": rfc3339(START)},
        "spec": {
            **spec,
            "successfulJobsHistoryLimit": 100,
            "jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}},
        },
    }


def _steady_reconciler(
    schedule: str | dict[str, Any], jobs: int
) -> tuple[CronJobReconciler, Request, Any]:
    """A reconciler whose CronJob has run ``jobs`` times (each Job finished) and is idle,
    and its client."""
    clock = FakeClock(START)
    client = _common.fake_cronjob_client(clock, _cronjob(schedule))
    reconciler = CronJobReconciler(client, FakeRecorder(), clock=clock)
    request = Request("ns", "bench")
    while len(client.list(JOB, namespace="ns")) < jobs:
        reconciler.reconcile(request)
        clock.set(reconciler_next(client) + timedelta(seconds=1))
        for job in client.list(JOB, namespace="ns"):
            if not (job.get("status") or {}).get("conditions"):
                _finish(client, job, clock())
    _quiesce(reconciler, request)
    return reconciler, request, client


def _quiesce(reconciler: CronJobReconciler, request: Request) -> None:
    """The status catches up with the finished Jobs, then nothing changes."""
    for _ in range(3):
        reconciler.reconcile(request)


def _complete_backfill(client: Any, row: Backfilled) -> None:
    """The CronJob as a finished backfill leaves it: the annotation still there, and
    ``status.backfill`` Complete (its Jobs pruned since)."""
    token = "bench"
    cronjob = objects.thaw(client.get(CRONJOB, "bench", "ns"))
    annotations = cronjob["metadata"].setdefault("annotations", {})
    annotations[BACKFILL_ANNOTATION] = json.dumps(
        {"token": token, "from": rfc3339(row.start), "to": rfc3339(row.end)}
    )
    client.update(CRONJOB, cronjob)
    cronjob = objects.thaw(client.get(CRONJOB, "bench", "ns"))
    cronjob.setdefault("status", {})["backfill"] = {
        "token": token,
        "from": rfc3339(row.start),
        "to": rfc3339(row.end),
        "requested": 1,
        "done": 1,
        "state": "Complete",
    }
    client.update_status(CRONJOB, cronjob)


def reconciler_next(client: Any) -> datetime:
    status = client.get(CRONJOB, "bench", "ns").get("status") or {}
    return datetime.fromisoformat(status["nextScheduleTime"].replace("Z", "+00:00"))


def _finish(client: Any, job: Any, at: datetime) -> None:
    body = objects.thaw(job)
    body["status"] = {
        "startTime": rfc3339(at),
        "completionTime": rfc3339(at),
        "succeeded": 1,
        "conditions": [{"type": "Complete", "status": "True", "lastTransitionTime": rfc3339(at)}],
    }
    client.update_status(JOB, body)


@contextmanager
def schedule_uncached() -> Iterator[None]:
    """Bypass the schedule package's caches: every walk parses its croniter again and
    asks it for every time (what a reconcile cost before they were added)."""
    template, step, first_wall = _times._croniter_template, _times._step_wall, _times._first_wall
    _times._croniter_template = template.__wrapped__  # type: ignore[assignment]
    _times._step_wall = _times._first_wall = step.__wrapped__  # type: ignore[assignment]
    try:
        yield
    finally:
        _times._croniter_template, _times._step_wall = template, step
        _times._first_wall = first_wall


def cpu_per_reconcile(reconciler: CronJobReconciler, request: Request, count: int) -> float:
    """Process CPU microseconds per reconcile over ``count`` reconciles."""
    began = time.process_time()
    for _ in range(count):
        reconciler.reconcile(request)
    return (time.process_time() - began) / count * 1e6


def measure(reconciles: int, jobs: int) -> list[list[str]]:
    rows = []
    for schedule in SCHEDULES:
        reconciler, request, _ = _steady_reconciler(schedule, jobs)
        shipped = cpu_per_reconcile(reconciler, request, reconciles)
        with schedule_uncached():
            reparsed = cpu_per_reconcile(reconciler, request, reconciles)
        rows.append(
            [f"`{schedule}`", f"{shipped:,.0f}", f"{reparsed:,.0f}", f"{reparsed / shipped:.2f}x"]
        )
    return rows


def measure_backfilled(reconciles: int, jobs: int) -> list[list[str]]:
    """Per request of ``BACKFILLED``: µs per no-op reconcile without the annotation, with
    the completed request present, and their ratio."""
    rows = []
    for row in BACKFILLED:
        reconciler, request, client = _steady_reconciler(row.spec, jobs)
        plain = cpu_per_reconcile(reconciler, request, reconciles)
        _complete_backfill(client, row)
        _quiesce(reconciler, request)
        done = cpu_per_reconcile(reconciler, request, reconciles)
        rows.append([row.label, f"{plain:,.0f}", f"{done:,.0f}", f"{done / plain:.2f}x"])
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reconciles", type=int, default=3000, help="timed per row (3000)")
    parser.add_argument("--jobs", type=int, default=10, help="finished Jobs kept (10)")
    parser.add_argument(
        "--backfill-reconciles", type=int, default=20, help="timed per backfill row (20)"
    )
    args = parser.parse_args(argv)
    rows = measure(args.reconciles, args.jobs)
    headers = ["schedule", "µs CPU / no-op reconcile", "without the schedule caches", "ratio"]
    backfilled = measure_backfilled(args.backfill_reconciles, args.jobs)
    backfill_headers = ["request", "µs CPU, no backfill", "with it completed", "ratio"]
    _common.print_report(
        "Reconcile cost",
        [
            (
                f"No-op reconciles, {args.jobs} finished Jobs, zone {ZONE}:",
                _common.markdown_table(headers, rows),
            ),
            (
                f"No-op reconciles, {args.jobs} finished Jobs, beside a completed backfill:",
                _common.markdown_table(backfill_headers, backfilled),
            ),
        ],
        [
            f"{args.reconciles:,} reconciles per cell (first table), "
            f"{args.backfill_reconciles:,} (second), one process, on the runtime's fake client."
        ],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
