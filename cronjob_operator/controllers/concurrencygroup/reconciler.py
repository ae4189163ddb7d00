"""The ConcurrencyGroup reconciler: reclaim the slots and lapsed places of one group.

Observe the group (the informer cache), the states of its holders' Jobs
(``group_slots.holder_states``: the cache, and the API server only for a Job that may
free its slot) and, for the waiting runs next in line for a free slot only, whether
their CronJob still shows them waiting here. Decide with ``groups.tidy``. Act: write the
group's status once when it changed, with the resourceVersion read (a 409 is retried
with backoff), and ask to be reconciled again when a claim grace, a waiter's grace or a
deadline ends. That write is a group event: the CronJob controller's watch on groups
(``group_slots.waiters_to_wake``) enqueues the CronJobs next in line, so a waiting run
never polls.

Watches: the groups; the Jobs holding a slot, when one finishes or is deleted (mapped by
the holders this controller last saw, ``Holders``); and the CronJobs, when one that
waits for a group is deleted or stops waiting.

RBAC this code needs (mirrored in config/rbac/role.yaml): concurrencygroups get/list/
watch, concurrencygroups/status update, jobs get/list/watch, cronjobs get/list/watch.
"""

from __future__ import annotations

import threading
from datetime import datetime
from typing import Any

from cronjob_operator.api.batch_v1 import CRONJOB
from cronjob_operator.api.concurrencygroup_v1 import (
    CONCURRENCY_GROUP,
    CONCURRENCY_GROUP_RESOURCE,
)
from cronjob_operator.controllers import stored
from cronjob_operator.controllers.cronjob import groups, jobs
from cronjob_operator.controllers.cronjob.group_slots import (
    comparable_status,
    group_limit,
    holder_states,
)
from cronjob_operator.controllers.cronjob.view import group_status_of
from cronjob_operator.runtime import errors, objects
from cronjob_operator.runtime.client import ClientInterface
from cronjob_operator.runtime.clock import Clock, utc_now
from cronjob_operator.runtime.controller import Controller, Predicate, Request, Result
from cronjob_operator.runtime.kinds import JOB
from cronjob_operator.runtime.manager import Manager

__all__ = ["ConcurrencyGroupReconciler", "Holders", "setup"]


class Holders:
    """By Job (namespace, name): the group whose slot it held when its group was last
    reconciled, so a Job's event reaches its group (a Job does not name it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._group_of: dict[tuple[str, str], str] = {}
        self._jobs_of: dict[tuple[str, str], set[str]] = {}

    def record(self, namespace: str, group: str, jobs_held: set[str]) -> None:
        """``group``'s holders are now ``jobs_held`` (empty: forget the group)."""
        with self._lock:
            for job in self._jobs_of.pop((namespace, group), set()) - jobs_held:
                self._group_of.pop((namespace, job), None)
            if jobs_held:
                self._jobs_of[(namespace, group)] = set(jobs_held)
            for job in jobs_held:
                self._group_of[(namespace, job)] = group

    def requests(self, job: objects.Obj) -> list[Request]:
        """The group whose slot ``job`` holds, if any (a watch's map function)."""
        namespace = objects.namespace_of(job)
        with self._lock:
            group = self._group_of.get((namespace, objects.name_of(job)))
        return [] if group is None else [Request(namespace, group)]


class ConcurrencyGroupReconciler:
    """Reconciles one ConcurrencyGroup per call; see the module docstring."""

    def __init__(self, client: ClientInterface, *, clock: Clock = utc_now) -> None:
        self._client = client
        self._clock = clock
        self._checks = stored.Checks(CONCURRENCY_GROUP_RESOURCE)
        self.holders = Holders()

    def reconcile(self, request: Request) -> Result:
        try:
            group = self._client.get(CONCURRENCY_GROUP, request.name, request.namespace)
        except errors.NotFound:
            self.holders.record(request.namespace, request.name, set())
            return Result()
        if self._checks.misfit(group) is not None:
            return Result()  # its CronJobs report it (GroupUnusable); an edit brings it back
        now = self._clock()
        status = group_status_of(group.get("status") or {})
        if not status.get("holders") and not status.get("waiting"):
            self.holders.record(request.namespace, request.name, set())
            return Result()  # nothing held, no one waits: nothing to free or wake
        held = status.get("holders") or []
        self.holders.record(request.namespace, request.name, {str(h.get("job")) for h in held})
        tidied = groups.tidy(
            status,
            group_limit(group),
            holder_states(self._client, request.namespace, held, now),
            lambda cron_job: self._waits_here(request.namespace, request.name, cron_job),
            now,
        )
        if tidied.status != comparable_status(group.get("status")):
            self._client.update_status(CONCURRENCY_GROUP, {**group, "status": tidied.status})
        return _again_at(tidied.again, now)

    def _waits_here(self, namespace: str, group: str, cron_job: str) -> bool | None:
        """Whether the CronJob ``cron_job`` shows a run waiting for ``group`` (None: it is
        gone). The cache first; the API server when the cache lacks it (another shard's)."""
        try:
            obj = self._client.get(CRONJOB, cron_job, namespace)
        except errors.NotFound:
            try:
                obj = self._client.live.get(CRONJOB, cron_job, namespace)
            except errors.NotFound:
                return None
        return waited_group(obj) == group and _named_group(obj) == group


def waited_group(cron_job: objects.Obj) -> str | None:
    """The group a CronJob's run waits for (``status.waitingForGroup``), or None."""
    waiting = (cron_job.get("status") or {}).get("waitingForGroup") or {}
    group = waiting.get("group")
    return str(group) if group else None


def _named_group(cron_job: objects.Obj) -> str | None:
    group = ((cron_job.get("spec") or {}).get("concurrencyGroup") or {}).get("name")
    return str(group) if group else None


def _again_at(when: datetime | None, now: datetime) -> Result:
    if when is None:
        return Result()
    return Result(requeue_after=max((when - now).total_seconds(), 0.0) + 1.0)


def _waiting_group_requests(cron_job: objects.Obj) -> list[Request]:
    """The group a CronJob waits for (a watch's map function)."""
    group = waited_group(cron_job)
    return [] if group is None else [Request(objects.namespace_of(cron_job), group)]


def _finished(job: Any) -> bool:
    return jobs.finished_state(job) is not None


JOB_FREES_SLOT = Predicate(
    create=lambda _job: False, update=lambda old, new: _finished(new) and not _finished(old)
)
"""A Job's events that may free its slot: it finished, or it was deleted."""

STOPPED_WAITING = Predicate(
    create=lambda _cron_job: False,
    update=lambda old, new: (
        waited_group(old) is not None and waited_group(new) != waited_group(old)
    ),
)
"""A CronJob's events that may lapse its place: it stopped waiting, or it was deleted."""


def setup(manager: Manager, *, clock: Clock = utc_now) -> Controller:
    """Register the ConcurrencyGroup controller (one per manager: the leader's)."""
    reconciler = ConcurrencyGroupReconciler(manager.client, clock=clock)
    return (
        manager.builder("concurrencygroup")
        .for_(CONCURRENCY_GROUP)
        .watches(JOB, reconciler.holders.requests, JOB_FREES_SLOT)
        .watches(CRONJOB, _waiting_group_requests, STOPPED_WAITING)
        .complete(reconciler)
    )
