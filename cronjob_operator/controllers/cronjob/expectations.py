"""The Jobs a reconciler created that its cache has not shown yet: expectations.

Why it exists: a reconcile that creates a Job does not write status (Jobs first,
docs/cronjob-semantics.md), so until the watch brings that Job to the cache, the Job
itself is the only evidence of its run, and the next reconcile (a follow-up, a catch-up
step, a backfill step) must see it. Under load the watch may lag several reconciles: a
catch-up of four missed times created all four while the cache showed none, and the
reconcile that wrote status then counted the first three skipped (``CatchUpBound``) as
well as run. So an expectation is kept until the cache shows its Job, not for one
reconcile: kube-controller-manager's ControllerExpectations, which a controller keeps
per owner until the informer observes each create.

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

__all__ = ["CreatedJobs"]

Key = tuple[str, str]
"""A CronJob's (namespace, name)."""


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
        is added as created the first time; after that ``read_live`` reads it (None: it
        is gone, and its expectation ends)."""
        listed = list(listed)
        expected = self._expected.get(key)
        if not expected:
            return listed
        seen = {job_uid(job) for job in listed}
        unlisted: list[objects.Obj] = []
        for uid, entry in list(expected.items()):
            if uid in seen:
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
