"""Run cost: the CronJob reconciler's CPU per scheduled run, in process, on the fake client.

``bench.fire`` measures the whole operator at a burst of due runs on a real control
plane, where HTTP, the cache and the machine's load move each figure; this one times only
the reconciles a run takes, so a change to the reconcile shows with little noise: N
CronJobs (``--cronjobs``) due in the same minute on ``runtime.fake``, their statuses
written at startup, then at the due time the reconcile that creates each Job, and after
all of them each follow-up that writes the run's status (the work queue's order at a
burst). Per run: process CPU (the median of ``--rounds`` rounds, each on a fresh world),
the decisions (``decide``) and the schedule walks (``schedule.most_recent_due``).

``--baseline DIR`` measures a second source tree too (an older commit unpacked with
``git archive COMMIT | tar -x -C DIR``), in child processes alternating with this tree's,
``--pairs`` of each, so both columns see the same load and their ratio is what holds:

    python -m bench.run_cost [--cronjobs 300] [--rounds 5] [--baseline DIR] [--pairs 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import _common
from cronjob_operator import schedule as schedules
from cronjob_operator.api.batch_v1 import CRONJOB
from cronjob_operator.controllers.cronjob import (
    CronJobReconciler,
    reconciler,
)
from cronjob_operator.runtime.clock import FakeClock
from cronjob_operator.runtime.controller import Request
from cronjob_operator.runtime.controllerutil import rfc3339
from cronjob_operator.runtime.fake import FakeRecorder

START = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
DUE = START + timedelta(hours=1, minutes=30)
"""Every CronJob runs once a day at this minute (``bench.fire``'s schedule)."""


def _cronjob(index: int) -> dict[str, Any]:
    """The CronJob of ``bench.fire`` (``_cluster.cronjob_manifest``), due at ``DUE``."""
    name = f"cronjob-{index}"
    template = {
        "restartPolicy": "Never",
        "containers": [{"name": "main", "image": "busybox", "command": ["true"]}],
    }
    return {
        "apiVersion": CRONJOB.api_version,
        "kind": "CronJob",
        "metadata": {
            "name": name,
            "namespace": "bench",
            "uid": f"uid-{index}",
            "creationTimestamp": rfc3339(START),
        },
        "spec": {
            "schedule": f"{DUE.minute} {DUE.hour} * * *",
            "jobTemplate": {
                "metadata": {"labels": {"owner": name}},
                "spec": {"suspend": True, "template": {"spec": template}},
            },
        },
    }


def _started(cronjobs: int) -> tuple[CronJobReconciler, list[Request], FakeClock]:
    """A reconciler whose CronJobs have their status written, the clock just past DUE."""
    clock = FakeClock(START)
    client = _common.fake_cronjob_client(clock, *(_cronjob(index) for index in range(cronjobs)))
    reconciles = CronJobReconciler(client, FakeRecorder(), clock=clock)
    requests = [Request("bench", f"cronjob-{index}") for index in range(cronjobs)]
    for request in requests:
        reconciles.reconcile(request)
    clock.set(DUE + timedelta(seconds=1))
    return reconciles, requests, clock


def _fire(reconciles: CronJobReconciler, requests: list[Request]) -> float:
    """Every create reconcile, then every follow-up; process CPU seconds."""
    began = time.process_time()
    for request in requests:
        if not reconciles.reconcile(request).follow_up:
            raise SystemExit(f"{request.name}: no Job created at {DUE}")
    for request in requests:
        reconciles.reconcile(request)
    return time.process_time() - began


@contextmanager
def _counted(counted: Counter[str], key: str, module: Any, name: str) -> Iterator[None]:
    """Count the calls to ``module.name`` under ``key`` while the context lasts."""
    original = getattr(module, name)

    def count(*args: Any, **kwargs: Any) -> Any:
        counted[key] += 1
        return original(*args, **kwargs)

    setattr(module, name, count)
    try:
        yield
    finally:
        setattr(module, name, original)


def measure(cronjobs: int, rounds: int) -> dict[str, float]:
    """µs CPU per run (median of ``rounds``), then decisions and schedule walks per run
    (counted in one more round, outside the timing)."""
    cpu = []
    for _ in range(rounds):
        reconciles, requests, _ = _started(cronjobs)
        cpu.append(_fire(reconciles, requests))
    counted: Counter[str] = Counter()
    reconciles, requests, _ = _started(cronjobs)
    with (
        _counted(counted, "decisions", reconciler, "decide"),
        _counted(counted, "walks", schedules, "most_recent_due"),
    ):
        _fire(reconciles, requests)
    return {
        "us_per_run": statistics.median(cpu) / cronjobs * 1e6,
        "decisions": counted["decisions"] / cronjobs,
        "walks": counted["walks"] / cronjobs,
    }


_CHILD = (
    "import runpy, sys; source = sys.argv.pop(1); import bench; sys.path.insert(0, source); "
    "runpy.run_module('bench.run_cost', run_name='__main__', alter_sys=True)"
)
"""Runs this module (``bench`` imported from this tree first) with the operator imported
from the source tree given first."""
ROOT = Path(__file__).resolve().parents[1]


def _child(source: Path, cronjobs: int, rounds: int) -> dict[str, float]:
    """``measure`` in a child process importing the operator from ``source``."""
    argv = ["--cronjobs", str(cronjobs), "--rounds", str(rounds), "--json"]
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(source.resolve()), *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    figures: dict[str, float] = json.loads(done.stdout)
    return figures


def _row(label: str, runs: list[dict[str, float]]) -> list[str]:
    cpu = [run["us_per_run"] for run in runs]
    return [
        label,
        ", ".join(f"{value:,.0f}" for value in cpu),
        f"{statistics.median(cpu):,.0f}",
        f"{runs[0]['decisions']:.2f}",
        f"{runs[0]['walks']:.2f}",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cronjobs", type=int, default=300, help="due in the same minute (300)")
    parser.add_argument("--rounds", type=int, default=5, help="timed per process (5)")
    parser.add_argument("--baseline", type=Path, help="another source tree to measure too")
    parser.add_argument("--pairs", type=int, default=3, help="processes of each, alternating (3)")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.json:
        print(json.dumps(measure(args.cronjobs, args.rounds)))
        return 0
    if args.baseline is None:
        rows = [_row("this tree", [measure(args.cronjobs, args.rounds)])]
    else:
        before: list[dict[str, float]] = []
        after: list[dict[str, float]] = []
        for _ in range(args.pairs):
            before.append(_child(args.baseline, args.cronjobs, args.rounds))
            after.append(_child(ROOT, args.cronjobs, args.rounds))
        rows = [_row(f"baseline {args.baseline}", before), _row("this tree", after)]
        ratio = statistics.median(r["us_per_run"] for r in after) / statistics.median(
            r["us_per_run"] for r in before
        )
        rows.append(["this tree / baseline", "", f"{ratio:.2f}x", "", ""])
    headers = [
        "code",
        "µs CPU per run, each process",
        "median",
        "decisions per run",
        "schedule walks per run",
    ]
    _common.print_report(
        "Run cost",
        [
            (
                f"{args.cronjobs:,} CronJobs due in one minute: the create reconcile and the "
                "follow-up of each run, on the runtime's fake client:",
                _common.markdown_table(headers, rows),
            )
        ],
        [
            f"Each process: the median of {args.rounds} rounds, each on a fresh world; "
            "decisions and walks counted in one more round."
        ],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
