"""Waiters behind one holder: what waiting costs, and how soon a freed slot is used.

``--waiters`` CronJobs (1,000) wait for the one slot of a ConcurrencyGroup held by a
long Job. The benchmark plays the manager on ``runtime.fake``, in simulated time that
advances by each reconcile's measured CPU (one worker, as a saturated manager would
run them): a reconcile's ``requeue_after`` is a timer, and a change of the group is an
event that reaches the watches this codebase has (the CronJob controller's wake-up map,
``group_slots.waiters_to_wake``, and the ConcurrencyGroup controller, when they exist:
run on main's code, neither does, and the waiters poll). It reports, over ``--window``
simulated seconds of waiting, the process CPU per second and the group writes per
second, then finishes the holder ``--releases`` times (each time the Job that took the
slot) and reports the simulated time from the holder's finish to the next Job's create
(median, p99, max).

    python -m bench.group_waiters [--waiters 1000] [--window 60] [--releases 20]
"""

from __future__ import annotations

import argparse
import heapq
import importlib
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import _common
from cronjob_operator.api.batch_v1 import CRONJOB
from cronjob_operator.api.concurrencygroup_v1 import CONCURRENCY_GROUP
from cronjob_operator.controllers.cronjob import JOB_OWNER_INDEX, CronJobReconciler, job_owner_index
from cronjob_operator.runtime import objects
from cronjob_operator.runtime.clock import FakeClock
from cronjob_operator.runtime.controller import Request, Result
from cronjob_operator.runtime.controllerutil import rfc3339
from cronjob_operator.runtime.fake import FakeClient, FakeClientBuilder, FakeRecorder
from cronjob_operator.runtime.kinds import JOB

NAMESPACE = "bench"
T0 = datetime(2026, 3, 2, 12, tzinfo=UTC)
"""The scheduled time of every run; the simulation starts a second after it."""
GROUP = Request(NAMESPACE, "g")

Reconcile = Callable[[Request], Result]


def cronjob(name: str) -> dict[str, Any]:
    """An hourly CronJob of group ``g`` (whenFull Wait), created an hour before T0."""
    return {
        "apiVersion": CRONJOB.api_version,
        "kind": "CronJob",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "uid": f"{name}-uid",
            "creationTimestamp": rfc3339(T0 - timedelta(hours=1)),
        },
        "spec": {
            "schedule": "0 * * * *",
            "concurrencyGroup": {"name": "g"},
            "jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}},
        },
    }


class Simulation:
    """The CronJobs, the group and the controllers on one fake API server, driven by a
    work queue of timers and events in simulated seconds since T0 (``now``)."""

    def __init__(self, waiters: int) -> None:
        self.clock = FakeClock(T0)
        group = {
            "apiVersion": CONCURRENCY_GROUP.api_version,
            "kind": CONCURRENCY_GROUP.kind,
            "metadata": {"name": "g", "namespace": NAMESPACE},
            "spec": {"limit": 1},
        }
        self.names = ["holder", *(f"w{i:04d}" for i in range(waiters))]
        self.client: FakeClient = (
            FakeClientBuilder()
            .with_kinds(CRONJOB, CONCURRENCY_GROUP)
            .with_index(JOB, JOB_OWNER_INDEX, job_owner_index)
            .with_clock(self.clock)
            .with_objects(group, *(cronjob(name) for name in self.names))
            .build()
        )
        self.cronjobs: Reconcile = CronJobReconciler(
            self.client, FakeRecorder(), clock=self.clock
        ).reconcile
        self.groups, self.wake = self._group_watches()
        self.now = 0.0
        self.queue: list[tuple[float, int, str, Request]] = []
        self.due: dict[tuple[str, Request], float] = {}
        self.seq = 0
        self.version = self._group_version()

    def _group_watches(self) -> tuple[Reconcile | None, Callable[[objects.Obj], list[Request]]]:
        """The ConcurrencyGroup controller and the wake-up map, where the code has them."""
        slots = importlib.import_module("cronjob_operator.controllers.cronjob.group_slots")
        wake = getattr(slots, "waiters_to_wake", None)
        try:
            controller = importlib.import_module("cronjob_operator.controllers.concurrencygroup")
        except ImportError:
            controller = None
        groups = None
        if controller is not None:
            groups = controller.ConcurrencyGroupReconciler(self.client, clock=self.clock).reconcile
        return groups, (wake(self.clock) if wake is not None else lambda _group: [])

    def _group_version(self) -> str:
        group = self.client.get(CONCURRENCY_GROUP, "g", NAMESPACE)
        return str(group["metadata"].get("resourceVersion"))

    def add(self, controller: str, request: Request, after: float = 0.0) -> None:
        """Queue ``request`` for ``controller`` (an earlier due time wins, as a work
        queue's AddAfter)."""
        due = self.now + after
        key = (controller, request)
        if key in self.due and self.due[key] <= due:
            return
        self.due[key] = due
        self.seq += 1
        heapq.heappush(self.queue, (due, self.seq, controller, request))

    def run_until(self, stop: Callable[[], bool], limit: float) -> None:
        """Process the queue in due order until ``stop()`` or simulated ``limit``."""
        while self.queue and not stop():
            due, _, controller, request = self.queue[0]
            if due > limit:
                break
            heapq.heappop(self.queue)
            if self.due.get((controller, request)) != due:
                continue  # superseded by an earlier add
            del self.due[(controller, request)]
            self.now = max(self.now, due)
            self.reconcile(controller, request)
        if not stop():
            self.now = max(self.now, limit)

    def reconcile(self, controller: str, request: Request) -> None:
        """Reconcile ``request`` now; its CPU passes in simulated time, its requeue is a
        timer and its write of the group an event."""
        self.clock.set(T0 + timedelta(seconds=self.now))
        reconcile = self.cronjobs if controller == "cronjob" else self.groups
        if reconcile is None:
            raise RuntimeError(f"no {controller} controller in this code")
        started = time.process_time()
        result = reconcile(request)
        self.now += time.process_time() - started
        if result.requeue_after > 0:
            self.add(controller, request, result.requeue_after)
        self._group_events()

    def _group_events(self) -> None:
        """A write of the group is an event: the watches of the code under test."""
        version = self._group_version()
        if version == self.version:
            return
        self.version = version
        if self.groups is not None:
            self.add("group", GROUP)
        for request in self.wake(self.client.get(CONCURRENCY_GROUP, "g", NAMESPACE)):
            self.add("cronjob", request)

    def group_writes(self) -> int:
        return len(self.client.writes_of("update", CONCURRENCY_GROUP))

    def jobs_created(self) -> list[str]:
        return [action.name for action in self.client.writes_of("create", JOB)]

    def finish(self, job: str) -> None:
        """The Job ``job`` completes now: its owner's watch (``owns``) and the group
        controller's Job watch fire."""
        body = objects.thaw(self.client.get(JOB, job, NAMESPACE))
        stamp = rfc3339(self.clock())
        body["status"] = {
            "conditions": [{"type": "Complete", "status": "True", "lastTransitionTime": stamp}],
            "startTime": stamp,
            "completionTime": stamp,
        }
        self.client.update_status(JOB, body)
        owner = job.rsplit("-", 1)[0]
        self.add("cronjob", Request(NAMESPACE, owner))
        if self.groups is not None:
            self.add("group", GROUP)


def measure(waiters: int, window: float, releases: int) -> dict[str, Any]:
    """Join, wait ``window`` simulated seconds, release ``releases`` times."""
    sim = Simulation(waiters)
    sim.now = 1.0
    for name in sim.names:  # each CronJob's run falls due: the holder first
        sim.reconcile("cronjob", Request(NAMESPACE, name))
    holder = sim.jobs_created()
    if len(holder) != 1:
        raise RuntimeError(f"expected one Job to hold the slot, found {holder}")
    start, writes, cpu = sim.now, sim.group_writes(), time.process_time()
    sim.run_until(lambda: False, start + window)
    waited = sim.now - start
    result: dict[str, Any] = {
        "cpu_per_s": (time.process_time() - cpu) / waited,
        "writes_per_s": (sim.group_writes() - writes) / waited,
    }
    latencies = []
    running = holder[-1]
    for _ in range(releases):
        created = len(sim.jobs_created())
        released = sim.now
        sim.finish(running)
        sim.run_until(_more_jobs_than(sim, created), sim.now + 600)
        if len(sim.jobs_created()) == created:
            raise RuntimeError("no waiting run started within 600 s of a release")
        latencies.append(sim.now - released)
        running = sim.jobs_created()[-1]
    latencies.sort()
    result["latency"] = latencies
    return result


def _more_jobs_than(sim: Simulation, count: int) -> Callable[[], bool]:
    return lambda: len(sim.jobs_created()) > count


def p99(values: Sequence[float]) -> float:
    return values[min(len(values) - 1, round(0.99 * (len(values) - 1)))]


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the arguments, run, print the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--waiters", type=int, default=1000, help="waiting CronJobs (1000)")
    parser.add_argument("--window", type=float, default=60.0, help="seconds of waiting (60)")
    parser.add_argument("--releases", type=int, default=20, help="slots freed in turn (20)")
    args = parser.parse_args(argv)
    got = measure(args.waiters, args.window, args.releases)
    latency = got["latency"]
    table = _common.markdown_table(
        ["waiters", "CPU while waiting", "group writes while waiting", "release to start"],
        [
            [
                f"{args.waiters:,}",
                f"{got['cpu_per_s'] * 1e3:.1f} ms/s",
                f"{got['writes_per_s']:.2f}/s",
                f"median {statistics.median(latency) * 1e3:.0f} ms, "
                f"p99 {p99(latency) * 1e3:.0f} ms, max {latency[-1] * 1e3:.0f} ms",
            ]
        ],
    )
    _common.print_report(
        "Waiting CronJobs behind one ConcurrencyGroup holder",
        [
            (
                f"Simulated time (reconciles cost their measured process CPU, one worker); "
                f"{args.window:.0f} s of waiting, {args.releases} releases:",
                table,
            )
        ],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
