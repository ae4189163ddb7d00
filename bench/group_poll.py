"""ConcurrencyGroup poll cost: CPU of one reconcile of a CronJob whose run waits for a slot.

A run that finds its group full asks again when the group's change wakes it (it is next
in line for a freed slot; ``bench.group_waiters`` measures that, and what waiting costs:
before the ConcurrencyGroup controller, every waiting run asked again every 5 s), and
each of those reconciles reads the whole group (``status.holders``, at most ``spec.limit`` = 100
entries, and ``status.waiting``, at most ``MAX_WAITERS`` = 1,000) and decides on it: its
cost grows with the waiting runs, and every waiting CronJob pays it every poll. This
benchmark builds, on ``runtime.fake``, a group of ``--limit`` slots held by running Jobs
and ``--waiters`` waiting runs (this CronJob's among them, seen just now, so a poll
writes nothing; its 3 earlier Jobs finished and hold no slot), then times the waiting
CronJob's reconciles (process CPU per poll, the fake client's own reads included) and
prints the group's status size.

    python -m bench.group_poll [--limit 100] [--waiters 10,100,1k]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import _common
from cronjob_operator.api.batch_v1 import CRONJOB
from cronjob_operator.api.concurrencygroup_v1 import CONCURRENCY_GROUP
from cronjob_operator.controllers.cronjob import JOB_OWNER_INDEX, CronJobReconciler, job_owner_index
from cronjob_operator.runtime.clock import FakeClock
from cronjob_operator.runtime.controller import Request
from cronjob_operator.runtime.controllerutil import rfc3339
from cronjob_operator.runtime.fake import FakeClientBuilder, FakeRecorder
from cronjob_operator.runtime.kinds import JOB

NAMESPACE = "bench"
SCHEDULED = datetime(2026, 3, 2, 12, tzinfo=UTC)
"""The waiting run's scheduled time; the polls come a minute later."""


def group(limit: int, waiters: int, now: datetime) -> dict[str, Any]:
    """Group ``g``: every slot held, ``waiters`` runs waiting (the benchmark's one too)."""
    holders = [
        {
            "job": f"h{i}-{int(SCHEDULED.timestamp())}",
            "cronJob": f"h{i}",
            "acquiredAt": rfc3339(now),
        }
        for i in range(limit)
    ]
    waiting = [
        {
            "cronJob": f"w{i:04d}",
            "scheduledTime": rfc3339(SCHEDULED - timedelta(seconds=i + 1)),
            "seenAt": rfc3339(now),
        }
        for i in range(waiters - 1)
    ]
    waiting.append(
        {"cronJob": "waiting", "scheduledTime": rfc3339(SCHEDULED), "seenAt": rfc3339(now)}
    )
    return {
        "apiVersion": CONCURRENCY_GROUP.api_version,
        "kind": CONCURRENCY_GROUP.kind,
        "metadata": {"name": "g", "namespace": NAMESPACE},
        "spec": {"limit": limit},
        "status": {"holders": holders, "inUse": limit, "waiting": waiting},
    }


def world(limit: int, waiters: int, now: datetime) -> list[dict[str, Any]]:
    """The group, its holders' running Jobs, the waiting CronJob and its 3 finished Jobs
    (the default successfulJobsHistoryLimit)."""
    cronjob = {
        "apiVersion": CRONJOB.api_version,
        "kind": "CronJob",
        "metadata": {
            "name": "waiting",
            "namespace": NAMESPACE,
            "uid": "waiting-uid",
            "creationTimestamp": rfc3339(SCHEDULED - timedelta(hours=1)),
        },
        "spec": {
            "schedule": "0 * * * *",
            "concurrencyGroup": {"name": "g"},
            "jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}},
        },
    }
    slots = group(limit, waiters, now)
    jobs = [
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": holder["job"], "namespace": NAMESPACE, "uid": holder["job"]},
            "status": {"active": 1},
        }
        for holder in slots["status"]["holders"]
    ]
    done = SCHEDULED - timedelta(hours=1)
    history = [  # the waiting CronJob's earlier runs, finished: its release looks them up
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": f"waiting-{int((done - timedelta(hours=i)).timestamp())}",
                "namespace": NAMESPACE,
                "uid": f"done-{i}",
                "ownerReferences": [
                    {
                        "apiVersion": CRONJOB.api_version,
                        "kind": "CronJob",
                        "name": "waiting",
                        "uid": "waiting-uid",
                        "controller": True,
                    }
                ],
            },
            "status": {
                "conditions": [
                    {"type": "Complete", "status": "True", "lastTransitionTime": rfc3339(done)}
                ],
                "succeeded": 1,
                "startTime": rfc3339(done),
                "completionTime": rfc3339(done),
            },
        }
        for i in range(3)
    ]
    return [slots, cronjob, *jobs, *history]


def measure(limit: int, waiters: int, timing: _common.Timing) -> list[object]:
    """One row: the waiters, the group's status size, CPU per poll."""
    now = SCHEDULED + timedelta(minutes=1)
    clock = FakeClock(now)
    objs = world(limit, waiters, now)
    client = (
        FakeClientBuilder()
        .with_kinds(CRONJOB, CONCURRENCY_GROUP)
        .with_index(JOB, JOB_OWNER_INDEX, job_owner_index)
        .with_clock(clock)
        .with_objects(*objs)
        .build()
    )
    reconciler = CronJobReconciler(client, FakeRecorder(), clock=clock)
    request = Request(NAMESPACE, "waiting")
    reconciler.reconcile(request)  # announces the wait; the polls after it write nothing
    writes = len(client.writes)
    per_poll = timing.per_call(lambda: reconciler.reconcile(request))
    if len(client.writes) != writes:
        raise RuntimeError("a poll wrote: the benchmark's group is not steady")
    size = len(json.dumps(objs[0]["status"], separators=(",", ":")))
    return [f"{waiters:,}", limit, f"{size / 1024:.0f} KiB", f"{per_poll * 1e3:.2f} ms"]


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the arguments, run, print the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=100, help="the group's slots, all held (100)")
    parser.add_argument("--waiters", default="10,100,1k", help="waiting runs (10,100,1k)")
    _common.Timing.add_arguments(parser)
    args = parser.parse_args(argv)
    timing = _common.Timing.from_arguments(args)
    rows = [measure(args.limit, w, timing) for w in _common.parse_sizes(args.waiters)]
    table = _common.markdown_table(
        ["waiting runs", "holders", "group status", "CPU per poll"], rows
    )
    _common.print_report(
        "A waiting CronJob's poll of a full ConcurrencyGroup",
        [(f"Median process CPU per reconcile over {timing.repeat} timeit samples:", table)],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
