"""concurrencyPolicy: making room for a new run (Allow, Forbid, Replace, BufferOne).

``make_room`` is asked before every new run (scheduled, requested, backfilled): Forbid
and BufferOne say wait while a run is active; Replace deletes every active Job first. A
delete that fails (a 500, a 409 because the name now has another uid) raises before
anything is created, so Replace never leaves two runs active; the controller retries
with backoff, and the next reconcile confirms against the API server whether an entry's
Job is really gone. ``buffer`` is BufferOne's waiting time (``status.bufferedRun``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from cronjob_operator.api.batch_v1 import ConcurrencyPolicy, CronJobSettings, SkipReason
from cronjob_operator.controllers.cronjob import policies
from cronjob_operator.controllers.cronjob.plan import Delete, Rejected, Steps
from cronjob_operator.controllers.cronjob.view import stamp, time_at
from cronjob_operator.runtime.controllerutil import rfc3339

__all__ = ["buffer", "make_room"]


def make_room(spec: CronJobSettings, status: dict[str, Any], steps: Steps) -> bool:
    """Apply concurrencyPolicy before a new run: False if Forbid (or BufferOne) says wait."""
    active = status.get("active") or []
    policy = spec.concurrency_policy
    if policy in (ConcurrencyPolicy.FORBID, ConcurrencyPolicy.BUFFER_ONE) and active:
        return False
    if policy is ConcurrencyPolicy.REPLACE:
        _replace_active(status, steps)
    return True


def _replace_active(status: dict[str, Any], steps: Steps) -> None:
    """Delete every active Job before the new run is created; a failed delete raises
    (the reconcile writes what it learned, then fails)."""
    active = status.get("active") or []
    for ref in list(active):
        outcome = steps.perform(Delete(ref["name"], ref.get("uid"), replace=True))
        if isinstance(outcome, Rejected):
            raise outcome.error
        active.remove(ref)


def buffer(
    spec: CronJobSettings,
    status: dict[str, Any],
    queue: tuple[datetime, ...],
    ran: set[datetime],
    reach: datetime | None,
    holding: bool,
    steps: Steps,
) -> tuple[datetime | None, tuple[datetime, ...], datetime | None]:
    """concurrencyPolicy BufferOne: (the time to run now, the times that may still run,
    a buffered time dropped because its deadline passed). Other policies: the oldest of
    ``queue`` runs now and all of it may still run."""
    buffered = time_at(status, "bufferedRun")
    if buffered is not None and buffered in ran:  # its Job exists: it started
        status.pop("bufferedRun", None)
        buffered = None
    if spec.concurrency_policy is not ConcurrencyPolicy.BUFFER_ONE:
        return (queue[0] if queue else None), queue, None
    if holding:
        return None, queue, None
    if status.get("active"):
        fresh = [moment for moment in queue if moment not in ran]
        if buffered is None and fresh:
            status["bufferedRun"] = stamp(fresh[0])
            steps.event(
                "Normal",
                "RunBuffered",
                f"the run scheduled at {rfc3339(fresh[0])} waits: a job is active and "
                "concurrencyPolicy is BufferOne; it starts when no job is active",
            )
        return None, (), None  # while a run is active, nothing else waits
    if buffered is None:
        return (queue[0] if queue else None), queue, None
    if reach is not None and buffered <= reach:
        status.pop("bufferedRun", None)
        policies.count_skip(status, SkipReason.DEADLINE_PASSED)
        return (queue[0] if queue else None), queue, buffered
    return buffered, queue, None
