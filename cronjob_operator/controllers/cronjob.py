"""The CronJob reconciler: create Jobs on schedule, keep status true, prune history.

This is the kubebuilder tutorial's controller with the built-in controller's semantics
(docs/cronjob-semantics, "Reconcile, in order"). Child Jobs are found through the
informer cache's ``.metadata.controller`` field index, never by listing all Jobs; only
Jobs whose controller owner uid is this CronJob's count. The pure rules live in
``cronjob_state`` (status, pruning, Job construction) and ``schedule`` (time); this
module does the reads, writes and events around them.

Errors: a bad schedule or time zone is reported (Warning event, ``Degraded``) and not
retried until the spec changes; a Job the API server rejects as invalid is reported and
retried at the next scheduled time; other API failures raise, so the controller retries
with backoff. Status is written once, only when it changed, retrying conflicts against a
fresh read so it is never dropped.

RBAC this code needs (mirrored in config/rbac/role.yaml, checked by an e2e test):
cronjobs get/list/watch, cronjobs/status get/update; jobs get/list/watch/create/delete;
events create/patch.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from cronjob_operator import schedule as schedules
from cronjob_operator.api.batch_v1 import CRONJOB, MAX_NAME_LENGTH
from cronjob_operator.controllers import cronjob_state as state
from cronjob_operator.controllers import metrics
from cronjob_operator.controllers.conditions import condition_setter, parse_time, rfc3339
from cronjob_operator.controllers.status import Clock, utc_now, write_status
from cronjob_operator.runtime import errors, objects
from cronjob_operator.runtime.client import Client, Propagation
from cronjob_operator.runtime.controller import Controller
from cronjob_operator.runtime.events import EventRecorder
from cronjob_operator.runtime.kinds import JOB
from cronjob_operator.runtime.manager import Manager
from cronjob_operator.runtime.reconcile import Request, Result
from cronjob_operator.runtime.reflector import strip_managed_fields

__all__ = ["JOB_OWNER_INDEX", "CronJobReconciler", "job_owner_index", "setup", "slim_job"]

log = logging.getLogger(__name__)

JOB_OWNER_INDEX = ".metadata.controller"


def job_owner_index(job: objects.Obj) -> list[str]:
    """The ``.metadata.controller`` index: the owning CronJob's name, if a CronJob owns it."""
    ref = objects.controller_ref(job)
    if ref is None or ref.get("apiVersion") != CRONJOB.api_version or ref.get("kind") != "CronJob":
        return []
    return [str(ref.get("name"))]


def slim_job(job: dict[str, Any]) -> dict[str, Any]:
    """Cache transform: keep only the parts of a Job this controller reads.

    A Job's spec (its whole pod template) is most of its size and is never read here.
    """
    job = strip_managed_fields(job)
    job.pop("spec", None)
    status = job.get("status") or {}
    job["status"] = {
        key: status[key]
        for key in ("conditions", "startTime", "completionTime", "active", "succeeded", "failed")
        if key in status
    }
    return job


@dataclass(frozen=True, slots=True)
class _Problem:
    """Why the CronJob cannot be scheduled as written: Degraded's reason and message."""

    reason: str
    message: str


class CronJobReconciler:
    """Reconciles one CronJob per call; see the module docstring."""

    def __init__(self, client: Client, recorder: EventRecorder, *, clock: Clock = utc_now) -> None:
        self._client = client
        self._recorder = recorder
        self._clock = clock

    def reconcile(self, request: Request) -> Result:
        try:
            cronjob = self._client.get(CRONJOB, request.name, request.namespace)
        except errors.NotFound:
            metrics.forget_cronjob(request.namespace, request.name)
            return Result()  # deleted: garbage collection removes its Jobs
        now = self._clock()
        status = objects.thaw(cronjob.get("status") or {})
        jobs = self._owned_jobs(cronjob)
        self._sync(cronjob, status, jobs)
        self._prune(cronjob, jobs)
        requeue, problem = self._schedule(cronjob, status, now)
        self._set_conditions(cronjob, status, problem, now)
        self._write_status(cronjob, status)
        metrics.ACTIVE_JOBS.labels(request.namespace, request.name).set(
            len(status.get("active") or ())
        )
        return Result(requeue_after=requeue.total_seconds()) if requeue else Result()

    def _owned_jobs(self, cronjob: objects.Obj) -> state.JobSets:
        metadata = cronjob["metadata"]
        listed = self._client.list(
            JOB,
            namespace=metadata["namespace"],
            matching_fields={JOB_OWNER_INDEX: metadata["name"]},
        )
        uid = metadata.get("uid")
        ours = [job for job in listed if (objects.controller_ref(job) or {}).get("uid") == uid]
        return state.classify(ours)

    def _sync(self, cronjob: objects.Obj, status: dict[str, Any], jobs: state.JobSets) -> None:
        owned = [*jobs.active, *jobs.successful, *jobs.failed]
        missing = [
            ref["uid"]
            for ref in state.unconfirmed_active(status, owned)
            if not self._exists_live(ref)
        ]
        metadata = cronjob["metadata"]
        for notice in state.sync_status(status, jobs, confirmed_missing=missing):
            self._recorder.event(cronjob, notice.type, notice.reason, notice.message)
            if notice.finished is not None:
                metrics.JOBS_FINISHED.labels(
                    metadata["namespace"], metadata["name"], notice.finished
                ).inc()

    def _exists_live(self, ref: dict[str, Any]) -> bool:
        # The cache may lag a Job we just created: ask the server before calling it missing.
        try:
            job = self._client.live.get(JOB, ref["name"], ref["namespace"])
        except errors.NotFound:
            return False
        return (job.get("metadata") or {}).get("uid") == ref.get("uid")

    def _prune(self, cronjob: objects.Obj, jobs: state.JobSets) -> None:
        spec = cronjob.get("spec") or {}
        doomed = [
            *state.to_prune(jobs.successful, spec.get("successfulJobsHistoryLimit")),
            *state.to_prune(jobs.failed, spec.get("failedJobsHistoryLimit")),
        ]
        for job in doomed:
            self._delete_job(cronjob, objects.name_of(job), uid=job["metadata"].get("uid"))

    def _delete_job(self, cronjob: objects.Obj, name: str, *, uid: str | None) -> bool:
        try:
            self._client.delete(
                JOB,
                name,
                namespace=cronjob["metadata"]["namespace"],
                propagation=Propagation.BACKGROUND,
                uid=uid,
            )
        except errors.NotFound:
            return True
        except errors.ApiError as exc:
            log.warning("deleting job %s failed: %s", name, exc)
            self._recorder.event(cronjob, "Warning", "FailedDelete", f"Deleted job {name}: {exc}")
            return False
        self._recorder.event(cronjob, "Normal", "SuccessfulDelete", f"Deleted job {name}")
        return True

    def _schedule(
        self, cronjob: objects.Obj, status: dict[str, Any], now: datetime
    ) -> tuple[timedelta | None, _Problem | None]:
        """Steps 5-9: maybe create a Job; returns when to look again and any problem."""
        spec = cronjob.get("spec") or {}
        if cronjob["metadata"].get("deletionTimestamp") or spec.get("suspend"):
            return None, None
        try:
            schedule = schedules.parse_schedule(spec.get("schedule", ""), spec.get("timeZone"))
        except schedules.ScheduleError as exc:
            self._recorder.event(cronjob, "Warning", exc.reason, str(exc))
            return None, _Problem(exc.reason, str(exc))
        name = cronjob["metadata"]["name"]
        if len(name) > MAX_NAME_LENGTH:  # stored past validation: no Job name could fit
            message = (
                f"metadata.name: {len(name)} characters, at most {MAX_NAME_LENGTH} leave room "
                "for the Job name suffix (Job names must fit 63); recreate with a shorter name"
            )
            self._recorder.event(cronjob, "Warning", "FailedCreate", message)
            return None, _Problem("NameTooLong", message)
        earliest = parse_time(status.get("lastScheduleTime")) or parse_time(
            cronjob["metadata"].get("creationTimestamp")
        )
        due = schedules.most_recent_due(
            schedule,
            earliest=earliest or now,
            now=now,
            starting_deadline_seconds=spec.get("startingDeadlineSeconds"),
        )
        requeue = schedules.requeue_after(due, now)
        if due.scheduled is None:
            if due.next_time is None:
                message = f"spec.schedule: {spec.get('schedule')!r} never fires; fix the schedule"
                self._recorder.event(cronjob, "Warning", "InvalidSchedule", message)
                return None, _Problem("InvalidSchedule", message)
            return requeue, None
        if due.too_many_missed:
            self._recorder.event(
                cronjob,
                "Warning",
                "TooManyMissedTimes",
                f"too many missed start times ({due.missed}+): running only the most recent, "
                f"{rfc3339(due.scheduled)}; set or check spec.startingDeadlineSeconds",
            )
        return requeue, self._run(cronjob, status, due.scheduled, schedule.zone)

    def _run(
        self, cronjob: objects.Obj, status: dict[str, Any], scheduled: datetime, zone: ZoneInfo
    ) -> _Problem | None:
        name = state.job_name(cronjob["metadata"]["name"], scheduled)
        active = status.get("active") or []
        if parse_time(status.get("lastScheduleTime")) == scheduled:
            return None  # this run exists already
        if any(ref.get("name") == name for ref in active):
            status["lastScheduleTime"] = rfc3339(scheduled)  # created, never recorded (a crash)
            return None
        policy = (cronjob.get("spec") or {}).get("concurrencyPolicy") or "Allow"
        if policy == "Forbid" and active:
            self._recorder.event(
                cronjob,
                "Normal",
                "JobAlreadyActive",
                "Not starting job because prior execution is running and concurrency policy is "
                "Forbid",
            )
            return None
        if policy == "Replace":
            for ref in list(active):
                if self._delete_job(cronjob, ref["name"], uid=ref.get("uid")):
                    active.remove(ref)
        return self._create(cronjob, status, state.build_job(cronjob, scheduled, zone), scheduled)

    def _create(
        self,
        cronjob: objects.Obj,
        status: dict[str, Any],
        job: dict[str, Any],
        scheduled: datetime,
    ) -> _Problem | None:
        name = job["metadata"]["name"]
        try:
            created: objects.Obj = self._client.create(JOB, job)
        except errors.AlreadyExists:
            existing = self._client.live.get(JOB, name, job["metadata"]["namespace"])
            if (objects.controller_ref(existing) or {}).get("uid") != cronjob["metadata"]["uid"]:
                message = (
                    f"Job {name} exists and is not controlled by this CronJob; not touching it"
                )
                self._recorder.event(cronjob, "Warning", "UnexpectedJob", message)
                return None
            created = existing
        except errors.Invalid as exc:
            message = f"spec.jobTemplate: the API server rejected Job {name}: {exc.message}"
            self._recorder.event(cronjob, "Warning", "FailedCreate", message)
            return _Problem("InvalidJobTemplate", message)
        except errors.ApiError as exc:
            self._recorder.event(cronjob, "Warning", "FailedCreate", f"Error creating job: {exc}")
            self._write_status(cronjob, status)  # keep what this reconcile learned
            raise
        else:
            self._recorder.event(cronjob, "Normal", "SuccessfulCreate", f"Created job {name}")
            observe_skew(created, scheduled)
            metadata = cronjob["metadata"]
            metrics.JOBS_CREATED.labels(metadata["namespace"], metadata["name"]).inc()
        ref = state.job_reference(created)
        active = status.setdefault("active", [])
        running = state.finished_state(created) is None  # an existing Job may be done already
        if running and all(entry.get("uid") != ref["uid"] for entry in active):
            active.append(ref)
        status["lastScheduleTime"] = rfc3339(scheduled)
        return None

    def _set_conditions(
        self,
        cronjob: objects.Obj,
        status: dict[str, Any],
        problem: _Problem | None,
        now: datetime,
    ) -> None:
        generation = int(cronjob["metadata"].get("generation") or 0)
        condition = condition_setter(status, generation=generation, now=now)

        if problem is not None:
            condition("Degraded", True, problem.reason, problem.message)
        else:
            condition("Degraded", False, "AsExpected", "")
        if (cronjob.get("spec") or {}).get("suspend"):
            condition("Available", False, "Suspended", "spec.suspend is true: no new runs start")
        elif problem is not None and problem.reason != "InvalidJobTemplate":
            condition("Available", False, problem.reason, problem.message)
        else:
            condition("Available", True, "Scheduling", "runs start on schedule")
        count = len(status.get("active") or [])
        if count:
            condition("Progressing", True, "JobsActive", f"{count} active job(s)")
        else:
            condition("Progressing", False, "Idle", "no active jobs")
        status["observedGeneration"] = generation

    def _write_status(self, cronjob: objects.Obj, status: dict[str, Any]) -> None:
        write_status(self._client, CRONJOB, cronjob, status)


def observe_skew(job: objects.Obj, scheduled: datetime) -> None:
    """Record how late a Job was created relative to its scheduled time."""
    created = parse_time((job.get("metadata") or {}).get("creationTimestamp"))
    if created is not None:
        metrics.JOB_CREATION_SKEW.observe(max(0.0, (created - scheduled).total_seconds()))


def setup(manager: Manager, *, clock: Clock = utc_now) -> Controller:
    """Register the Job transform and owner index, and the CronJob controller."""
    manager.cache.set_transform(JOB, slim_job)
    manager.cache.index_field(JOB, JOB_OWNER_INDEX, job_owner_index)
    reconciler = CronJobReconciler(manager.client, manager.recorder, clock=clock)
    return manager.builder("cronjob").for_(CRONJOB).owns(JOB).complete(reconciler)
