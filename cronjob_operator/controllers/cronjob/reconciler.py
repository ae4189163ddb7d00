"""The CronJob reconciler: observe, decide, act.

Observe: read the CronJob (the object our last status write returned, while the cache
still holds the copy that write was decided from: ``_written``) and, through the
informer cache's ``.metadata.controller`` field index (never by listing all Jobs), the
Jobs whose controller owner uid is this CronJob's, and the Jobs it created that the
cache does not list yet (``expectations.py``: the follow-ups of creates may run before
the watch brings their Jobs, and would create them again or count their runs skipped);
ask the API server about each ``status.active`` entry the cache lacks (the cache may lag
a Job created earlier), read live the Pods of each run past its start timeout
(``start_timeout.py``), and build the view (``view.py``). Decide: ``decide``
(``decide.py``) returns the Plan. Act: apply its steps in order (events, prunes, Replace
deletes, creates); a step whose outcome the decision needs is performed when the
decision comes to it, which goes on with its outcome (``plan.Perform``: one decision per
reconcile). Then write the status (once, only when it changed, retrying conflicts
against a fresh read; ``controllerutil.write_status``; the watch echo of that write is
not reconciled again when deciding from the written status changes nothing:
``StatusEchoes``), report the notices and skipped runs with that write, set the active
gauge, and raise the Plan's API error if it has one.

Errors: a failed prune is reported (``FailedDelete``) and retried by the next reconcile;
any other API failure raises after the write of what was learned, so the controller
retries with backoff.

RBAC this code needs (mirrored in config/rbac/role.yaml, checked by an e2e test):
cronjobs get/list/watch, cronjobs/status get/update, cronjobs/finalizers update (a Job
names its CronJob with blockOwnerDeletion; docs/security.md); jobs get/list/watch/create/delete;
pods list (only the Pods of a run past spec.runStartTimeoutSeconds, by label, for the
cause its event names; docs/security.md); events create/patch; concurrencygroups
get/list/watch (the slots, ``group_slots.py``, and the watch that wakes a waiting run),
concurrencygroups/status update.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from prometheus_client import Histogram

from cronjob_operator.api.batch_v1 import CRONJOB, CRONJOB_RESOURCE
from cronjob_operator.api.concurrencygroup_v1 import CONCURRENCY_GROUP
from cronjob_operator.controllers import stored
from cronjob_operator.controllers.cronjob import history, jobs, policies, start_timeout
from cronjob_operator.controllers.cronjob.decide import decide
from cronjob_operator.controllers.cronjob.due import Walks
from cronjob_operator.controllers.cronjob.expectations import CreatedJobs, StatusWrites
from cronjob_operator.controllers.cronjob.group_slots import (
    GroupSlots,
    waiters_to_wake,
    with_unqueued_retry,
)
from cronjob_operator.controllers.cronjob.jobs import JOB_OWNER_INDEX
from cronjob_operator.controllers.cronjob.plan import (
    Create,
    Created,
    Delete,
    Deleted,
    Event,
    Foreign,
    Outcome,
    Plan,
    Rejected,
    Step,
    Unknown,
)
from cronjob_operator.controllers.cronjob.view import (
    CronJobView,
    StartReport,
    created_at,
    stored_status,
    view_of,
)
from cronjob_operator.controllers.metrics import CronJobMetrics
from cronjob_operator.runtime import errors, objects
from cronjob_operator.runtime.client import ClientInterface, Propagation
from cronjob_operator.runtime.clock import Clock, utc_now
from cronjob_operator.runtime.controller import (
    Controller,
    Predicate,
    Request,
    Result,
    resource_version_changed,
)
from cronjob_operator.runtime.controllerutil import StatusEchoes, write_status
from cronjob_operator.runtime.events import Recorder
from cronjob_operator.runtime.kinds import JOB, POD
from cronjob_operator.runtime.manager import Manager
from cronjob_operator.runtime.sharding import Shard

__all__ = ["CronJobReconciler", "observe_skew", "setup", "skip_status_echoes"]

log = logging.getLogger("cronjob_operator.controllers.cronjob")


class CronJobReconciler:
    """Reconciles one CronJob per call; see the module docstring."""

    def __init__(
        self,
        client: ClientInterface,
        recorder: Recorder,
        *,
        clock: Clock = utc_now,
        metrics: CronJobMetrics | None = None,
    ) -> None:
        self._client = client
        self._recorder = recorder
        self._clock = clock
        self._checks = stored.Checks(CRONJOB_RESOURCE)
        self._metrics = metrics if metrics is not None else CronJobMetrics(None)
        self._slots = GroupSlots(client, clock, self._metrics)
        self.echoes = StatusEchoes()
        """This reconciler's status writes; ``setup`` skips their watch echoes."""
        self._started_runs: dict[tuple[str, str], frozenset[str]] = {}
        """By CronJob (namespace, name): the uids of its overdue runs whose Pods showed a
        start (a Running Pod not ready yet), so their Pods are not listed again: a run,
        once started, stays started. Only the CronJobs with such a run, only their
        overdue runs (replaced by each reconcile, dropped when the CronJob is gone)."""
        self._written = StatusWrites()
        """By CronJob: our last status write while its echo is on its way; a reconcile
        whose cache still holds the copy it was decided from decides from the written
        object (``expectations.py``)."""
        self._created = CreatedJobs()
        """The Jobs this reconciler created that its cache has not listed yet, taken into
        the view until it does (``expectations.py``: the follow-ups of creates may run
        before the watch brings their Jobs, and would count those runs skipped)."""

    def reconcile(self, request: Request) -> Result:
        # Before the read: a cache that lacks our last write is read with its echo still due.
        self.echoes.forget(request.namespace, request.name)
        key = (request.namespace, request.name)
        try:
            cached = self._client.get(CRONJOB, request.name, request.namespace)
        except errors.NotFound:
            self._metrics.forget_cronjob(request.namespace, request.name)
            self._started_runs.pop(key, None)
            self._created.forget(key)
            self._written.forget(key)
            return Result()  # deleted: garbage collection removes its Jobs
        cronjob = self._written.latest(cached)
        fitting = self._checks.fitting(cronjob, self._recorder)
        if fitting is None:
            return Result()  # reported; its next edit reconciles it again
        cronjob = fitting
        now = self._clock()
        view = self._observe(cronjob, now)
        walks = Walks()  # every decision of this reconcile asks the schedule about ``now``
        plan = self._act(view, now, walks)
        if plan.status is not None:
            self._record(view, plan, now, walks, cached=cached)
        self._slots.release(view)  # the slots of this CronJob's finished Jobs
        if plan.error is not None:
            raise plan.error
        if plan.active is not None:
            self._metrics.active_jobs.labels(request.namespace, request.name).set(plan.active)
        return plan.result

    # --- observe --------------------------------------------------------------------

    def cache_moved(self, obj: objects.Obj) -> None:
        """The cache now holds ``obj`` (from the informer's thread): our last write of it
        is no longer expected unless the cache still holds the copy it was decided from."""
        self._written.observed(obj)

    def _observe(self, cronjob: objects.Obj, now: datetime) -> CronJobView:
        owned = self._owned_jobs(cronjob)
        missing: list[Any] = [  # an entry stored without a uid is matched as None
            ref.get("uid")
            for ref in history.unconfirmed_active(cronjob.get("status") or {}, owned.owned())
            if not self._exists_live(ref)
        ]
        view = view_of(cronjob, owned, missing=missing)
        reports = self._start_reports(view, start_timeout.overdue(view.spec, owned.active, now))
        return dataclasses.replace(view, start_reports=reports) if reports else view

    def _owned_jobs(self, cronjob: objects.Obj) -> jobs.JobSets:
        metadata = cronjob["metadata"]
        listed = self._client.list(
            JOB,
            namespace=metadata["namespace"],
            matching_fields={JOB_OWNER_INDEX: metadata["name"]},
        )
        key = (metadata["namespace"], metadata["name"])
        known = self._created.with_unlisted(key, listed, self._read_job_live)
        uid = metadata.get("uid")
        ours = [job for job in known if (objects.controller_ref(job) or {}).get("uid") == uid]
        return jobs.classify(ours)

    def _start_reports(
        self, view: CronJobView, overdue: list[objects.Obj]
    ) -> dict[str, StartReport]:
        """What the Pods of each run past its start timeout say, by Job uid (none for a
        Job gone or going); a run found started by an earlier reconcile is not read
        again (``_started_runs``)."""
        key = (view.namespace, view.name)
        known = self._started_runs.pop(key, frozenset())
        reports: dict[str, StartReport] = {}
        for job in overdue:
            uid = jobs.job_uid(job)
            report = StartReport(started=True) if uid in known else self._start_report(job)
            if report is not None:
                reports[uid] = report
        started = frozenset(uid for uid, report in reports.items() if report.started)
        if started:
            self._started_runs[key] = started
        return reports

    def _start_report(self, job: objects.Obj) -> StartReport | None:
        """What the Pods of a run past its start timeout say, read live (the cached Job may
        lag: one that started, or that an earlier reconcile deleted); None when the Job
        is gone or going. One small page per LIST (``start_timeout`` module doc)."""
        metadata = job["metadata"]
        try:
            live = self._client.live.get(JOB, metadata["name"], metadata["namespace"])
        except errors.NotFound:
            return None
        if jobs.job_uid(live) != jobs.job_uid(job) or live["metadata"].get("deletionTimestamp"):
            return None
        if start_timeout.started_by_status(live):
            return StartReport(started=True)
        own_pods = {start_timeout.CONTROLLER_UID_LABEL: jobs.job_uid(job)}
        started = self._client.live.list_page(
            POD,
            limit=1,
            namespace=metadata["namespace"],
            label_selector=own_pods,
            field_selector=start_timeout.STARTED_PODS,
            metadata_only=True,
        )
        if started:
            return StartReport(started=True)
        pods = self._client.live.list_page(
            POD,
            limit=start_timeout.PODS_READ,
            namespace=metadata["namespace"],
            label_selector=own_pods,
        )
        return start_timeout.report_of(pods)

    def _read_job_live(self, job: objects.Obj) -> objects.Obj | None:
        """The Job as the API server has it now, in the shape the cache holds it (None:
        gone, or another Job of that name; a Job whose create had no clear answer has no
        uid yet, so any Job of its name, which the owner check then sorts)."""
        metadata = job["metadata"]
        try:
            live = self._client.live.get(JOB, metadata["name"], metadata["namespace"])
        except errors.NotFound:
            return None
        if jobs.job_uid(job) and jobs.job_uid(live) != jobs.job_uid(job):
            return None
        slim: objects.Obj = objects.freeze(jobs.slim_job(objects.thaw(live)))
        return slim

    def _exists_live(self, ref: dict[str, Any]) -> bool:
        # The cache may lag a Job we just created: ask the server before calling it missing.
        name, namespace = ref.get("name"), ref.get("namespace")
        if not (isinstance(name, str) and name and isinstance(namespace, str) and namespace):
            return False  # an entry stored without its Job's name names no Job: gone
        try:
            job = self._client.live.get(JOB, name, namespace)
        except errors.NotFound:
            return False
        return (job.get("metadata") or {}).get("uid") == ref.get("uid")

    # --- act ------------------------------------------------------------------------

    def _act(self, view: CronJobView, now: datetime, walks: Walks) -> Plan:
        """Decide, applying each step whose outcome the decision needs when it comes to
        it (after the steps recorded before it, in order), then the steps after the last
        one; the Plan."""
        applied = 0  # how many of the decision's steps are applied
        outcomes: list[Outcome] = []

        def perform(earlier: Sequence[Step], step: Create | Delete) -> Outcome:
            nonlocal applied
            for unapplied in earlier[applied:]:
                self._apply(view, unapplied)
            outcome = self._outcome_of(view, step)
            applied = len(earlier) + 1
            outcomes.append(outcome)
            return outcome

        plan = decide(view, now, walks=walks, perform=perform)
        for step in plan.steps[applied:]:
            self._apply(view, step)
        return with_unqueued_retry(plan, outcomes)

    def _apply(self, view: CronJobView, step: Step) -> None:
        """Apply a step whose outcome the decision does not need: an event, or a prune (a
        failed one is reported and retried by the next reconcile)."""
        if isinstance(step, Event):
            self._recorder.event(view.obj, step.type, step.reason, step.message)
        elif isinstance(step, Delete) and not step.replace:
            self._delete_job(view, step.name, uid=step.uid)
        else:  # a create or a Replace delete: performed when decided (``perform``)
            raise AssertionError(f"{step!r} was not performed when it was decided")

    def _outcome_of(self, view: CronJobView, step: Create | Delete) -> Outcome:
        """Perform a create, or a delete that Replace makes room with: its outcome."""
        if isinstance(step, Delete):
            error = self._delete_job(view, step.name, uid=step.uid)
            return Deleted() if error is None else Rejected(error)
        return self._create(view, step)

    def _delete_job(
        self, view: CronJobView, name: str, *, uid: str | None
    ) -> errors.ApiError | None:
        """Delete one Job (only if it still has ``uid``); the error, None when it is gone
        (and then no longer expected: ``_created``)."""
        try:
            self._client.delete(
                JOB, name, namespace=view.namespace, propagation=Propagation.BACKGROUND, uid=uid
            )
        except errors.NotFound:
            self._created.deleted((view.namespace, view.name), name)
            return None
        except errors.ApiError as exc:
            log.warning("deleting job %s failed: %s", name, exc)
            self._recorder.event(view.obj, "Warning", "FailedDelete", f"Deleted job {name}: {exc}")
            return exc
        self._created.deleted((view.namespace, view.name), name)
        self._recorder.event(view.obj, "Normal", "SuccessfulDelete", f"Deleted job {name}")
        return None

    def _create(self, view: CronJobView, step: Create) -> Outcome:
        """Create the Job; an existing one of the same name is ours (``Created``, not new)
        or another owner's (``Foreign``)."""
        job = step.job
        try:
            full = self._slots.claim(view, step)  # the slot first, then the Job
        except errors.ApiError as exc:
            return Unknown(exc)
        if full is not None:
            return full
        try:
            created: objects.Obj = self._client.create(JOB, job)
        except errors.AlreadyExists:
            try:
                existing = self._client.live.get(JOB, job["metadata"]["name"], view.namespace)
            except errors.ApiError as exc:
                return Unknown(exc)
            if (objects.controller_ref(existing) or {}).get("uid") != view.obj["metadata"]["uid"]:
                return Foreign()
            self._expect(view, existing)
            return Created(existing, new=False)
        except errors.ApiError as exc:
            if isinstance(exc, errors.ServerError):
                self._created.maybe_created((view.namespace, view.name), job)
            return Rejected(exc)
        except errors.TransportError as exc:
            if not isinstance(exc, errors.NotLeader):
                self._created.maybe_created((view.namespace, view.name), job)
            raise
        self._expect(view, created)
        if step.due is not None:
            observe_skew(self._metrics.job_creation_skew, created, step.due)
        self._metrics.jobs_created.labels(view.namespace, view.name).inc()
        return Created(created)

    def _expect(self, view: CronJobView, job: objects.Obj) -> None:
        """Expect ``job``, just created or found ours, in the cache (``_created``), in the
        shape the cache holds it."""
        slim = objects.freeze(jobs.slim_job(objects.thaw(job)))
        self._created.expect((view.namespace, view.name), slim)

    def _record(
        self, view: CronJobView, plan: Plan, now: datetime, walks: Walks, *, cached: objects.Obj
    ) -> None:
        """Write the Plan's status, then report its notices and skipped runs: each is
        reported once, by the reconcile whose write records it (none when the server had
        it). The watch echo of the write is skipped only when it brings nothing new
        (``_echo_brings_nothing``; ``walks``: the schedule walks of the decision)."""
        assert plan.status is not None
        echoes = self.echoes if _echo_brings_nothing(view, plan, now, walks) else None
        written = write_status(self._client, CRONJOB, view.obj, plan.status, echoes=echoes)
        if written is None:
            return
        self._written.expect((view.namespace, view.name), cached, objects.freeze(written))
        if plan.accounting is not None and plan.accounting.skipped:
            self._report_skips(view, plan.accounting)
        for notice in plan.notices:
            self._recorder.event(view.obj, notice.type, notice.reason, notice.message)
            if notice.finished is not None:
                self._metrics.jobs_finished.labels(view.namespace, view.name, notice.finished).inc()

    def _report_skips(self, view: CronJobView, accounting: policies.Accounting) -> None:
        """The Warning event (the recorder aggregates repeats) and the skipped counter."""
        for reason, count in accounting.skipped.items():
            self._metrics.runs_skipped.labels(view.namespace, view.name, reason).inc(count)
        message = policies.skipped_message(accounting)
        self._recorder.event(view.obj, "Warning", "RunsSkipped", message)


def _echo_brings_nothing(view: CronJobView, plan: Plan, now: datetime, walks: Walks) -> bool:
    """True when the watch echo of writing ``plan.status`` needs no reconcile of its own:
    the follow-up of a create comes anyway (it forgets the note if it starts before the
    echo), or deciding again from ``view`` with ``plan.status`` stored (what the echo
    holds) writes the same status and takes no step ``plan`` has not taken. The decision
    reads the stored status, not only the one it computes: a Job is pruned only once the
    stored status records its run (``history.prunable``), and the schedule walk starts
    at the stored ``lastScheduleTime``; the echo of a write that moves such a field is
    news, and is reconciled. ``walks``: the reconcile's own schedule walks (the echo's
    decision mostly asks the same: the walk from the same ``lastScheduleTime`` at the
    same ``now``)."""
    assert plan.status is not None
    if plan.result.follow_up:
        return True
    written = objects.freeze({**view.obj, "status": plan.status})
    echo = dataclasses.replace(view, obj=written, stored=stored_status(plan.status))
    again = decide(echo, now, walks=walks)
    return (
        not again.pending
        and again.status == plan.status
        and all(step in plan.steps for step in again.steps)
    )


def observe_skew(skew: Histogram, job: objects.Obj, scheduled: datetime) -> None:
    """Record how late a Job was created relative to its scheduled time."""
    created = created_at(job)
    if created is not None:
        skew.observe(max(0.0, (created - scheduled).total_seconds()))


def skip_status_echoes(
    echoes: StatusEchoes, moved: Callable[[objects.Obj], None] | None = None
) -> Predicate:
    """Every CronJob event but the watch echoes of the reconciler's own status writes
    (``StatusEchoes``); a deletion also drops the object's note, and ``moved`` hears of
    every update (``CronJobReconciler.cache_moved``). Dict reads only, so it runs on the
    informer's thread (``inline``)."""

    def deleted(obj: objects.Obj) -> bool:
        echoes.forget(objects.namespace_of(obj), objects.name_of(obj))
        return True

    def updated(old: objects.Obj, new: objects.Obj) -> bool:
        if moved is not None:
            moved(new)
        return not echoes.is_echo(old, new)

    return Predicate(update=updated, delete=deleted, inline=True)


def setup(manager: Manager, *, clock: Clock = utc_now, shard: Shard | None = None) -> Controller:
    """Register the Job transform and owner index, and the CronJob controller: its
    CronJobs, their Jobs, and the ConcurrencyGroups, whose changes wake the CronJobs next
    in line for a free slot (``group_slots.waiters_to_wake``).

    With ``shard`` (``runtime.sharding.attach``), the controller runs on every replica
    for its share, writing through the shard's fenced client; Jobs inherit the
    CronJob's shard label at creation (``decide``).
    """
    manager.cache.set_transform(JOB, jobs.slim_job)
    manager.cache.index_field(JOB, JOB_OWNER_INDEX, jobs.job_owner_index)
    metrics = CronJobMetrics(manager.metrics.registry)
    if shard is not None:
        reconciler = CronJobReconciler(shard.client, shard.recorder, clock=clock, metrics=metrics)
        builder = shard.builder("cronjob")
    else:
        reconciler = CronJobReconciler(
            manager.client, manager.recorder, clock=clock, metrics=metrics
        )
        builder = manager.builder("cronjob")
    skip = skip_status_echoes(reconciler.echoes, reconciler.cache_moved)
    return (
        builder.for_(CRONJOB, skip)
        .owns(JOB)
        .watches(CONCURRENCY_GROUP, waiters_to_wake(clock, metrics), resource_version_changed())
        .complete(reconciler)
    )
