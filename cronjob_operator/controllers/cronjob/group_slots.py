"""The reconciler's I/O for spec.concurrencyGroup: take a slot before a Job, free it after.

``groups.py`` decides; this reads the ConcurrencyGroup from the API server (never the
cache: on a sharded replica the group's other CronJobs live elsewhere), looks up the
holders' Jobs when the group looks full (the cache first, ``_job_states``), and writes
the group's status with the resourceVersion it read. A 409 means another replica (or
worker) wrote first: read again and decide again. The writes go through the
reconciler's client, so on a sharded replica the shard's fence refuses them (and the
Job's create after them) once its Lease may have passed on: a replica paused past the
claim grace cannot create a Job whose slot was reclaimed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any, Final

from cronjob_operator.api.concurrencygroup_v1 import (
    CONCURRENCY_GROUP,
    CONCURRENCY_GROUP_RESOURCE,
)
from cronjob_operator.controllers import stored
from cronjob_operator.controllers.cronjob import groups, jobs
from cronjob_operator.controllers.cronjob.plan import Create, GroupFull, Outcome, Plan
from cronjob_operator.controllers.cronjob.view import CronJobView, group_status_of
from cronjob_operator.controllers.metrics import CronJobMetrics
from cronjob_operator.runtime import errors, objects
from cronjob_operator.runtime.client import ClientInterface
from cronjob_operator.runtime.clock import Clock
from cronjob_operator.runtime.controller import Request, Result
from cronjob_operator.runtime.kinds import JOB

__all__ = [
    "GroupSlots",
    "comparable_status",
    "group_limit",
    "holder_states",
    "waiters_to_wake",
    "with_unqueued_retry",
]

CONFLICT_ATTEMPTS: Final = 10
"""How many times a claim or release reads the group again after a 409 before the
reconcile fails (and is retried with backoff)."""


class GroupSlots:
    """Claims and releases the slots of the CronJobs' ConcurrencyGroups."""

    def __init__(self, client: ClientInterface, clock: Clock, metrics: CronJobMetrics) -> None:
        self._client = client
        self._clock = clock
        self._metrics = metrics
        self._checks = stored.Checks(CONCURRENCY_GROUP_RESOURCE)

    def claim(self, view: CronJobView, step: Create) -> GroupFull | None:
        """Take a slot for the Job of ``step`` before it is created: None when it has one
        (or the CronJob names no group), else why not."""
        group = view.spec.concurrency_group
        if group is None:
            return None
        job = str(step.job["metadata"]["name"])
        now = self._clock()
        scheduled = jobs.scheduled_time(view.name, job)
        deadline_seconds = view.spec.starting_deadline_seconds
        start = step.due or scheduled or now
        request = groups.Claim(
            cron_job=view.name,
            job=job,
            scheduled=scheduled or now,
            deadline=None
            if deadline_seconds is None
            else start + timedelta(seconds=deadline_seconds),
            wait=scheduled is not None and view.spec.group_waits,
        )
        for attempt in range(1, CONFLICT_ATTEMPTS + 1):
            try:
                obj = self._client.live.get(CONCURRENCY_GROUP, group, view.namespace)
            except errors.NotFound:
                self._metrics.forget_group(view.namespace, group)
                return GroupFull(group, missing=True)
            misfit = self._checks.misfit(obj)
            if misfit is not None:
                return GroupFull(group, misfit=misfit)
            limit, status = group_limit(obj), group_status_of(obj.get("status") or {})
            verdict = groups.hand_over(status, step.replaced, request, now) or groups.claim(
                status, limit, request, now, {}
            )
            if not verdict.granted and status.get("holders"):
                states = holder_states(self._client, view.namespace, status["holders"], now)
                verdict = groups.claim(status, limit, request, now, states)
            if self._write(obj, verdict.status, final=attempt == CONFLICT_ATTEMPTS):
                break
        return None if verdict.granted else GroupFull(group, queued=verdict.queued)

    def release(self, view: CronJobView) -> None:
        """Free the slots of this CronJob's Jobs that the view shows finished.

        Runs after every reconcile of a grouped CronJob, so what frees nothing costs
        little: no read without a finished Job, and no parse of the group's waiting runs
        (up to ``MAX_WAITERS``) when none of them holds a slot.
        """
        group = view.spec.concurrency_group
        finished = {objects.name_of(job) for job in (*view.jobs.successful, *view.jobs.failed)}
        if group is None or not finished:
            return
        for attempt in range(1, CONFLICT_ATTEMPTS + 1):
            try:
                obj = self._client.live.get(CONCURRENCY_GROUP, group, view.namespace)
            except errors.NotFound:
                self._metrics.forget_group(view.namespace, group)
                return  # reported by the claim of the next run
            if self._checks.misfit(obj) is not None:
                return  # reported by the claim of the next run
            holders = (obj.get("status") or {}).get("holders") or ()
            if not any(holder.get("job") in finished for holder in holders):
                self._show(obj, len(holders))
                return
            released = groups.release(group_status_of(obj.get("status") or {}), finished)
            if self._write(obj, released, final=attempt == CONFLICT_ATTEMPTS):
                return

    def _write(self, obj: objects.Obj, status: dict[str, Any], *, final: bool) -> bool:
        """Write ``status`` to the group read as ``obj`` (its resourceVersion the
        precondition) if it changed; False on a 409, which raises when ``final``."""
        if status != comparable_status(obj.get("status")):
            try:
                self._client.update_status(CONCURRENCY_GROUP, {**obj, "status": status})
            except errors.Conflict:
                if final:
                    raise
                return False
        self._show(obj, status["inUse"])
        return True

    def _show(self, obj: objects.Obj, in_use: int) -> None:
        """Set the gauge of the group read as ``obj``: ``in_use`` slots held, its limit."""
        metadata = obj["metadata"]
        self._metrics.show_group(metadata["namespace"], metadata["name"], in_use, group_limit(obj))


def with_unqueued_retry(plan: Plan, outcomes: Iterable[Outcome]) -> Plan:
    """``plan``, asking to be reconciled again within ``groups.UNQUEUED_RETRY`` if a run
    found its group full without taking a place among the waiting runs (a requested or
    backfilled run, or a missing group): no group change wakes it. A scheduled run that
    waits is woken by the group's change (``waiters_to_wake``), never polled."""
    if not any(isinstance(o, GroupFull) and not o.queued for o in outcomes):
        return plan
    retry = groups.UNQUEUED_RETRY.total_seconds()
    if plan.result.follow_up or 0 < plan.result.requeue_after <= retry:
        return plan
    return dataclasses.replace(plan, result=Result(requeue_after=retry))


def holder_states(
    client: ClientInterface, namespace: str, holders: Iterable[Mapping[str, Any]], now: datetime
) -> dict[str, groups.JobState]:
    """What is known of each holder's Job (a holder left out counts as running).

    The informer cache answers for a Job it shows running: a finish or a delete it
    has not seen yet frees the slot when its event comes, never too early. The API server
    is asked only when a slot may be freed: the cache shows the Job finished (the
    server confirms it), or lacks it (another shard's Job, or gone) past the claim
    grace; a Job the cache lacks within the grace holds its slot whatever the server
    says. So a full group of running Jobs costs a waiting run no Job reads.
    """
    states = {}
    for holder in holders:
        name = str(holder.get("job"))
        try:
            cached: objects.Obj | None = client.get(JOB, name, namespace)
        except errors.NotFound:
            cached = None
        if cached is not None and jobs.finished_state(cached) is None:
            continue  # running
        if cached is None and not groups.reclaimable(holder, groups.JobState.ABSENT, now):
            continue  # in its claim grace
        states[name] = _live_state(client, namespace, name)
    return states


def _live_state(client: ClientInterface, namespace: str, name: str) -> groups.JobState:
    """What the API server says of the Job ``name``."""
    try:
        job = client.live.get(JOB, name, namespace)
    except errors.NotFound:
        return groups.JobState.ABSENT
    finished = jobs.finished_state(job) is not None
    return groups.JobState.FINISHED if finished else groups.JobState.RUNNING


def group_limit(obj: Mapping[str, Any]) -> int:
    """The group's ``spec.limit`` (0 if unset or not a positive integer)."""
    limit = (obj.get("spec") or {}).get("limit")
    return limit if isinstance(limit, int) and limit > 0 else 0


def comparable_status(status: Any) -> dict[str, Any]:
    """The stored status as ``groups`` renders one (so an unchanged one is not written)."""
    thawed = objects.thaw(status or {})
    return {key: thawed[key] for key in ("holders", "inUse", "waiting") if key in thawed}


def waiters_to_wake(
    clock: Clock, metrics: CronJobMetrics | None = None
) -> Callable[[objects.Obj], list[Request]]:
    """Map a ConcurrencyGroup to the CronJobs whose runs are next in line for its free
    slots (``groups.next_in_line``): the CronJob controller's watch on groups, so a
    waiting run asks again when a slot frees (a holder released, or reclaimed by the
    ConcurrencyGroup controller), never on a timer. The group's change also moves
    ``metrics``' slot gauge of a group this replica shows (``refresh_group``)."""

    checks = stored.Checks(CONCURRENCY_GROUP_RESOURCE)

    def requests(group: objects.Obj) -> list[Request]:
        if checks.misfit(group) is not None:
            return []  # its CronJobs ask again on their own (UNQUEUED_RETRY)
        status = group_status_of(group.get("status") or {})
        if metrics is not None:
            metadata = group["metadata"]
            in_use = len(status.get("holders") or ())
            metrics.refresh_group(
                metadata["namespace"], metadata["name"], in_use, group_limit(group)
            )
        names = groups.next_in_line(status, group_limit(group), clock())
        return [Request(objects.namespace_of(group), name) for name in names]

    return requests
