"""What a reconciler wrote that its cache has not shown yet: expectations.

Two kinds, one idea (kube-controller-manager's ControllerExpectations: what a controller
did is believed until its informer observes it): the Jobs it created
(:class:`CreatedJobs`) and its last status write of each CronJob
(:class:`StatusWrites`). Each is this replica's memory, bounded by what is in flight:
an expectation ends when the cache shows the write, and goes with the CronJob.

Created Jobs: a reconcile that creates a Job does not write status (Jobs first,
docs/cronjob-semantics.md), so until the watch brings that Job to the cache, the Job
itself is the only evidence of its run, and the next reconcile (a follow-up, a catch-up
step, a backfill step) must see it. Under load the watch may lag several reconciles: a
catch-up of four missed times created all four while the cache showed none, and the
reconcile that wrote status then counted the first three skipped (``CatchUpBound``) as
well as run. So an expectation is kept until the cache shows its Job, not for one
reconcile: kube-controller-manager's ControllerExpectations, which a controller keeps
per owner until the informer observes each create.

A create with no clear answer (a timeout, a 5xx, a broken connection) may have stored
the Job: it is expected by name (``maybe_created``) and read live by the next reconcile,
so ``Forbid`` or a group does not start a second run beside it while the cache lags.

What may end an expectation besides the cache showing its Job: this reconciler deleting
the Job, the CronJob going away, or the Job being gone when asked. An expectation that
one reconcile has already relied on is checked against the API server (a GET) by the
next that still misses it, so a Job someone else deleted before the watch brought it is
not believed for ever (the built-in's expectations expire after five minutes instead;
a lagging cache here costs one GET per missing Job per reconcile, and only while it
lags).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from cronjob_operator.controllers.cronjob.jobs import job_uid
from cronjob_operator.runtime import objects

__all__ = ["CreatedJobs", "StatusWrites"]

Key = tuple[str, str]
"""A CronJob's (namespace, name)."""
_UNKNOWN = "?"
"""Keys a Job whose create may or may not have been stored by its name (it has no uid)."""


@dataclass
class _Expected:
    job: objects.Obj
    """The Job as created, or as last read live, in the shape the cache holds it."""
    relied_on: bool = False
    """A reconcile has taken it into its view already (the next one that misses it asks
    the API server)."""


class CreatedJobs:
    """Per CronJob, the Jobs this reconciler created (or found ours on AlreadyExists)
    that its cache has not listed yet."""

    def __init__(self) -> None:
        self._expected: dict[Key, dict[str, _Expected]] = {}

    def expect(self, key: Key, job: objects.Obj) -> None:
        """``job`` was just created (or found ours): expect the cache to show it."""
        self._expected.setdefault(key, {})[job_uid(job)] = _Expected(job)

    def maybe_created(self, key: Key, job: objects.Obj) -> None:
        """The create of ``job`` failed in a way that leaves it unknown whether the API
        server stored it (a timeout, a 5xx, a broken connection): the next reconcile
        asks the API server for a Job of that name before it decides."""
        self._expected.setdefault(key, {})[_UNKNOWN + objects.name_of(job)] = _Expected(
            job, relied_on=True
        )

    def deleted(self, key: Key, name: str) -> None:
        """This reconciler deleted the Job ``name`` (or found it gone)."""
        expected = self._expected.get(key)
        if expected is None:
            return
        for uid in [uid for uid, entry in expected.items() if objects.name_of(entry.job) == name]:
            del expected[uid]
        if not expected:
            del self._expected[key]

    def forget(self, key: Key) -> None:
        """The CronJob is gone."""
        self._expected.pop(key, None)

    def with_unlisted(
        self,
        key: Key,
        listed: Iterable[objects.Obj],
        read_live: Callable[[objects.Obj], objects.Obj | None],
    ) -> list[objects.Obj]:
        """``listed`` (the cache's Jobs of the CronJob) and every expected Job it lacks.

        An expected Job the cache lists is observed: its expectation ends. One it lacks
        is added as created the first time; after that (and at once for a create whose
        outcome is unknown) ``read_live`` reads it (None: it is gone, or was never
        stored, and its expectation ends)."""
        listed = list(listed)
        expected = self._expected.get(key)
        if not expected:
            return listed
        seen = {job_uid(job) for job in listed}
        seen |= {_UNKNOWN + objects.name_of(job) for job in listed}
        unlisted: list[objects.Obj] = []
        for uid, entry in list(expected.items()):
            if uid in seen or job_uid(entry.job) in seen:
                del expected[uid]
                continue
            if entry.relied_on:
                live = read_live(entry.job)
                if live is None:
                    del expected[uid]
                    continue
                entry.job = live
            entry.relied_on = True
            unlisted.append(entry.job)
        if not expected:
            del self._expected[key]
        return [*listed, *unlisted]


class StatusWrites:
    """Per CronJob, our last status write while its watch echo is on its way: the
    resourceVersion of the copy it was decided from, and the object the API server
    returned.

    A reconcile whose cache still holds that copy (a Job's event may come before the
    echo) decides from the written object instead, rather than write the same status
    again to a Conflict. The expectation ends as soon as the cache holds another version
    (:meth:`observed`, from the informer's thread), so it holds only writes whose echo
    is still on its way."""

    def __init__(self) -> None:
        self._written: dict[Key, tuple[str | None, objects.Obj]] = {}

    def expect(self, key: Key, decided_from: objects.Obj, written: objects.Obj) -> None:
        """``written`` was returned by our status write decided from the cache's
        ``decided_from``; a decision from our earlier write, while the cache still lags
        it, writes again from that same lagging copy."""
        self._written[key] = (decided_from["metadata"].get("resourceVersion"), written)

    def observed(self, obj: objects.Obj) -> None:
        """The cache now holds ``obj``: the expectation ends unless it is still the
        copy the write was decided from."""
        key = (objects.namespace_of(obj), objects.name_of(obj))
        written = self._written.get(key)
        if written is not None and written[0] != obj["metadata"].get("resourceVersion"):
            self._written.pop(key, None)

    def latest(self, cached: objects.Obj) -> objects.Obj:
        """``cached``, or the object our last write returned when the cache still holds
        the copy that write was decided from."""
        key = (objects.namespace_of(cached), objects.name_of(cached))
        written = self._written.get(key)
        if written is None or written[0] != cached["metadata"].get("resourceVersion"):
            self._written.pop(key, None)
            return cached
        return written[1]

    def forget(self, key: Key) -> None:
        """The CronJob is gone."""
        self._written.pop(key, None)

    def __contains__(self, key: object) -> bool:
        return key in self._written
