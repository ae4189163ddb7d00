"""The CronJob reconciler: create Jobs on schedule, keep status true, prune history.

This is the kubebuilder tutorial's controller with the built-in controller's semantics
(docs/cronjob-semantics.md, "Reconcile, in order"). Child Jobs are found through the
informer cache's ``.metadata.controller`` field index, never by listing all Jobs; only
Jobs whose controller owner uid is this CronJob's count. The pure rules live in
``cronjob_state`` (status, pruning, Job construction), ``schedule`` (time) and
``cronjob_features`` (docs/beyond-builtin.md); this module does the reads, writes and
events around them.

Beyond the built-in, in reconcile order: failed Jobs are counted (and a failure pause
lifted by a new generation) before pruning, which keeps failed Jobs the stored status has
not counted; a run request (the run-now annotation) is handled before the suspend and
pause checks, so it works while suspended or paused; scheduling asks the schedule about
``now - stagger offset`` and records ``nextScheduleTime``.

Each run once: ``lastScheduleTime`` moves forward to the newest scheduled Job that exists,
and pruning deletes only Jobs the stored (read) status has recorded, so a Job is deleted
only after the write that records its run, and a recorded time is never due again.
Jobs first: a reconcile that created a Job returns ``follow_up`` without writing status
(unless it recorded a schedule edit), so under a burst every due Job is created before
any status write; the follow-up, finding the Job and the same stored status, records
the run and reports what this one saw. Notices (``SawCompletedJob``, ``MissingJob``,
``Resumed`` and the runs-finished counter) are reported only by the reconcile whose
status write records them, so each is reported once. docs/cronjob-semantics.md, "Each
run once", has the reasoning.

Errors: a bad schedule or time zone is reported (Warning event, ``Degraded``) and not
retried until the spec changes; a Job the API server rejects as invalid is reported and
retried at the next scheduled time; a create refused because the namespace is being
deleted (the ``NamespaceTerminating`` cause) records no Warning, as the built-in's, and
is not retried (Available=False, reason ``NamespaceTerminating``); other API failures
raise, so the controller retries with backoff. With ``Replace``, a failed delete of an
active Job raises before the new Job is created: two runs are never active because a
delete failed; a reconcile that fails writes what it learned first. Status is written
once, only when it changed, retrying conflicts against a fresh read so it is never
dropped.

RBAC this code needs (mirrored in config/rbac/role.yaml, checked by an e2e test):
cronjobs get/list/watch, cronjobs/status get/update; jobs get/list/watch/create/delete;
events create/patch.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final
from zoneinfo import ZoneInfo

from prometheus_client import Histogram

from cronjob_operator import schedule as schedules
from cronjob_operator.api.batch_v1 import (
    BACKFILL_ANNOTATION,
    CRONJOB,
    MAX_NAME_LENGTH,
    BackfillState,
    ConcurrencyPolicy,
    SkipReason,
)
from cronjob_operator.controllers import cronjob_backfill as backfills
from cronjob_operator.controllers import cronjob_features as features
from cronjob_operator.controllers import cronjob_policies as policies
from cronjob_operator.controllers import cronjob_state as state
from cronjob_operator.controllers.metrics import CronJobMetrics
from cronjob_operator.runtime import errors, objects
from cronjob_operator.runtime.cache import strip_managed_fields
from cronjob_operator.runtime.client import ClientInterface, Propagation
from cronjob_operator.runtime.clock import Clock, utc_now
from cronjob_operator.runtime.controller import Controller, Request, Result
from cronjob_operator.runtime.controllerutil import (
    condition_setter,
    find_condition,
    parse_time,
    rfc3339,
    write_status,
)
from cronjob_operator.runtime.events import Recorder
from cronjob_operator.runtime.kinds import JOB
from cronjob_operator.runtime.manager import Manager
from cronjob_operator.runtime.sharding import Shard, inherited_labels

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

    A Job's spec (its whole pod template) is most of its size and is never read here;
    nor are its labels and annotations (Jobs are found by the owner index).
    """
    job = strip_managed_fields(job)
    job.pop("spec", None)
    metadata = job.get("metadata") or {}
    metadata.pop("labels", None)
    metadata.pop("annotations", None)
    status = job.get("status") or {}
    job["status"] = {
        key: status[key]
        for key in ("conditions", "startTime", "completionTime", "active", "succeeded", "failed")
        if key in status
    }
    return job


@dataclass(frozen=True, slots=True)
class _Problem:
    """Why the CronJob cannot be scheduled as written: Degraded's reason and message.

    ``stops_schedule`` is False for a problem that leaves scheduled runs going (a Job the
    API server rejects, a bad run request): Available stays True. ``retry`` is False when
    no later attempt can succeed (the namespace is being deleted): no requeue then."""

    reason: str
    message: str
    stops_schedule: bool = True
    retry: bool = True


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
        self._metrics = metrics if metrics is not None else CronJobMetrics(None)

    def reconcile(self, request: Request) -> Result:
        try:
            cronjob = self._client.get(CRONJOB, request.name, request.namespace)
        except errors.NotFound:
            self._metrics.forget_cronjob(request.namespace, request.name)
            return Result()  # deleted: garbage collection removes its Jobs
        now = self._clock()
        stored = cronjob.get("status") or {}
        status = objects.thaw(stored)
        jobs = self._owned_jobs(cronjob)
        notices = [*self._sync(cronjob, status, jobs), *self._count_failures(cronjob, jobs, status)]
        self._prune(cronjob, jobs, stored)
        started: list[objects.Obj] = []
        observed = status.get("observedSchedule")
        try:
            manual = self._run_requested(cronjob, status, jobs)
            filled, filling = self._backfill(cronjob, status, jobs, now, started)
            requeue, problem, accounting = self._schedule(cronjob, status, now, started, jobs)
        except errors.ApiError:
            # Keep what this reconcile learned, but not its skip accounting: the retry
            # does it again and reports it with the write that records it.
            _restore(status, stored, "skippedRuns")
            _restore(status, stored, "bufferedRun")  # a dropped one is counted again
            self._record(cronjob, status, notices)
            raise
        if problem is None:
            problem = self._stored_problem(cronjob) or manual or filled
        if filling is not None and (requeue is None or filling < requeue):
            requeue = filling
        if started:
            if _record_with_the_run(status, stored, observed):
                self._record(cronjob, status, notices, accounting)
            # Jobs first: this reconcile created a Job. Its status is written by a
            # follow-up reconcile queued behind every other due run; that one finds the
            # Job (which records the run) and the unchanged stored status (so it reports
            # the notices of this one).
            return Result(follow_up=True)
        self._set_conditions(cronjob, status, problem, now)
        self._record(cronjob, status, notices, accounting)
        self._metrics.active_jobs.labels(request.namespace, request.name).set(
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

    def _sync(
        self, cronjob: objects.Obj, status: dict[str, Any], jobs: state.JobSets
    ) -> list[state.Notice]:
        owned = [*jobs.active, *jobs.successful, *jobs.failed]
        missing = [
            ref["uid"]
            for ref in state.unconfirmed_active(status, owned)
            if not self._exists_live(ref)
        ]
        metadata = cronjob["metadata"]
        state.advance_last_schedule_time(status, metadata["name"], owned)
        return state.sync_status(status, jobs, confirmed_missing=missing)

    def _exists_live(self, ref: dict[str, Any]) -> bool:
        # The cache may lag a Job we just created: ask the server before calling it missing.
        try:
            job = self._client.live.get(JOB, ref["name"], ref["namespace"])
        except errors.NotFound:
            return False
        return (job.get("metadata") or {}).get("uid") == ref.get("uid")

    def _count_failures(
        self, cronjob: objects.Obj, jobs: state.JobSets, status: dict[str, Any]
    ) -> list[state.Notice]:
        generation = int(cronjob["metadata"].get("generation") or 0)
        resumed = features.resume_on_new_generation(status, generation)
        features.record_failures(status, jobs.failed)
        if not resumed:
            return []
        message = (
            f"spec changed (generation {generation}): scheduled runs resume and the "
            "consecutive failure count restarts at 0"
        )
        return [state.Notice("Normal", "Resumed", message)]

    def _prune(self, cronjob: objects.Obj, jobs: state.JobSets, stored: objects.Obj) -> None:
        spec = cronjob.get("spec") or {}
        name = cronjob["metadata"]["name"]
        unrecorded = features.unrecorded_manual_job(cronjob)

        def recorded(finished: list[objects.Obj]) -> list[objects.Obj]:
            # Only a run the stored status records may go: pruning one it does not would
            # make the run due again (the same Job created twice); nor one a running
            # backfill has still to reach.
            kept = state.recorded_by(stored, name, finished)
            return [
                job
                for job in kept
                if objects.name_of(job) != unrecorded and not _backfill_keeps(stored, name, job)
            ]

        # A failed Job goes only once the stored status counts it (never lose a failure).
        doomed = [
            *state.to_prune(recorded(jobs.successful), spec.get("successfulJobsHistoryLimit")),
            *state.to_prune(
                features.counted(recorded(jobs.failed), stored), spec.get("failedJobsHistoryLimit")
            ),
        ]
        for job in doomed:  # a failed prune is reported and retried on the next reconcile
            self._delete_job(cronjob, objects.name_of(job), uid=job["metadata"].get("uid"))

    def _delete_job(
        self, cronjob: objects.Obj, name: str, *, uid: str | None
    ) -> errors.ApiError | None:
        """Delete one Job (only if it still has ``uid``); the error, None when it is gone."""
        try:
            self._client.delete(
                JOB,
                name,
                namespace=cronjob["metadata"]["namespace"],
                propagation=Propagation.BACKGROUND,
                uid=uid,
            )
        except errors.NotFound:
            return None
        except errors.ApiError as exc:
            log.warning("deleting job %s failed: %s", name, exc)
            self._recorder.event(cronjob, "Warning", "FailedDelete", f"Deleted job {name}: {exc}")
            return exc
        self._recorder.event(cronjob, "Normal", "SuccessfulDelete", f"Deleted job {name}")
        return None

    def _schedule(
        self,
        cronjob: objects.Obj,
        status: dict[str, Any],
        now: datetime,
        started: list[objects.Obj],
        jobs: state.JobSets,
    ) -> tuple[timedelta | None, _Problem | None, policies.Accounting | None]:
        """Steps 5-9: maybe create a Job (appended to ``started``); returns when to look
        again, any problem, and the skipped runs this reconcile accounted for.

        Sets ``status.nextScheduleTime``, or removes it when no scheduled run will start.
        """
        features.set_next_schedule_time(status, None)
        spec = cronjob.get("spec") or {}
        created = parse_time(cronjob["metadata"].get("creationTimestamp")) or now
        since = state.observe_schedule(status, spec, created=created, now=now)
        if cronjob["metadata"].get("deletionTimestamp"):
            return None, None, None
        # Suspended or paused: nothing starts, but the times that come are accounted for.
        holding = bool(spec.get("suspend")) or features.paused(spec, status)
        try:
            schedule = features.parse_spec_schedule(spec)
        except schedules.ScheduleError as exc:
            if holding:
                return None, None, None
            self._recorder.event(cronjob, "Warning", exc.reason, str(exc))
            return None, _Problem(exc.reason, str(exc)), None
        name = cronjob["metadata"]["name"]
        if len(name) > MAX_NAME_LENGTH and not holding:  # stored past validation
            message = (
                f"metadata.name: {len(name)} characters, at most {MAX_NAME_LENGTH} leave room "
                "for the Job name suffix (Job names must fit 63); recreate with a shorter name"
            )
            self._recorder.event(cronjob, "Warning", "FailedCreate", message)
            return None, _Problem("NameTooLong", message), None
        offset = self._stagger(cronjob, schedule)
        if isinstance(offset, _Problem):
            return None, (None if holding else offset), None
        # Stagger: a nominal time t is due at t + offset, so the schedule is asked about
        # now - offset; the deadline then counts from the staggered time. Never a run due
        # before the last edit of the schedule or time zone (observedSchedule.since), nor
        # one the skip accounting has counted (skippedRuns.accountedThrough).
        shifted = now - offset
        last = parse_time(status.get("lastScheduleTime"))
        accounted = parse_time((status.get("skippedRuns") or {}).get("accountedThrough"))
        earliest = max(last or created, since) - offset
        if accounted is not None and accounted > earliest:
            earliest = accounted
        deadline = spec.get("startingDeadlineSeconds")
        due = schedules.most_recent_due(
            schedule, earliest=earliest, now=shifted, starting_deadline_seconds=deadline
        )
        queue = policies.due_queue(
            policies.catch_up_policy(spec),
            schedule,
            due,
            earliest=earliest,
            now=shifted,
            starting_deadline_seconds=deadline,
        )
        reach = schedules.reach_of(shifted, deadline)
        ran = _ran(name, jobs, status)
        target, pending, buffer_skip = self._buffer(cronjob, status, queue, ran, reach, holding)
        block = policies.blocked_by(
            suspended=bool(spec.get("suspend")),
            paused=features.paused(spec, status),
            active_since=_active_since(name, status, jobs),
            policy=spec.get("concurrencyPolicy"),
        )
        buffered = parse_time(status.get("bufferedRun"))
        stored_last = (cronjob.get("status") or {}).get("lastScheduleTime")
        accounting = policies.account(
            status,
            schedule,
            # No watermark yet (an older operator's CronJob): nothing before the stored
            # lastScheduleTime counts (a run whose Job is gone cannot be told from a skip).
            initial=max(parse_time(stored_last) or created, since) - offset,
            floor=since - offset,
            now=shifted,
            latest=due.latest,
            reach=reach,
            ran=ran if buffered is None else {*ran, buffered},
            pending=pending,
            block=block,
        )
        if buffer_skip is not None:  # counted in status by _buffer, reported with the rest
            accounting = policies.with_skip(accounting, SkipReason.DEADLINE_PASSED, buffer_skip)
        requeue = schedules.requeue_after(due, shifted)
        if accounting.more or (len(queue) > 1 and block is None):
            # More times to account for, or catch-up All has more to run and nothing
            # stops them (an active run under Forbid reconciles again when it finishes).
            requeue = _SOON
        if holding:
            return requeue, None, accounting
        features.set_next_schedule_time(
            status, None if due.next_time is None else due.next_time + offset
        )
        if target is None:
            if due.scheduled is None and due.next_time is None:
                field = "spec.schedule" if spec.get("schedule") is not None else "spec.schedules"
                message = f"{field}: {schedule.expression!r} never fires; fix the schedule"
                self._recorder.event(cronjob, "Warning", "InvalidSchedule", message)
                return None, _Problem("InvalidSchedule", message), accounting
            return requeue, None, accounting
        if due.too_many_missed and len(queue) == 1:  # Latest; All counts CatchUpBound
            self._recorder.event(
                cronjob,
                "Warning",
                "TooManyMissedTimes",
                f"too many missed start times ({due.missed}+): running only the most recent, "
                f"{rfc3339(due.scheduled or target)}; set or check spec.startingDeadlineSeconds",
            )
        late = target not in queue  # the buffered run: its lateness is no creation skew
        problem = self._run(
            cronjob, status, target, schedule.zone, None if late else offset, started
        )
        return (requeue if problem is None or problem.retry else None), problem, accounting

    def _buffer(
        self,
        cronjob: objects.Obj,
        status: dict[str, Any],
        queue: tuple[datetime, ...],
        ran: set[datetime],
        reach: datetime | None,
        holding: bool,
    ) -> tuple[datetime | None, tuple[datetime, ...], datetime | None]:
        """concurrencyPolicy BufferOne: (the time to run now, the times that may still run,
        a buffered time dropped because its deadline passed). Other policies: the oldest of
        ``queue`` runs now and all of it may still run."""
        spec = cronjob.get("spec") or {}
        buffered = parse_time(status.get("bufferedRun"))
        if buffered is not None and buffered in ran:  # its Job exists: it started
            status.pop("bufferedRun", None)
            buffered = None
        if spec.get("concurrencyPolicy") != ConcurrencyPolicy.BUFFER_ONE:
            return (queue[0] if queue else None), queue, None
        if holding:
            return None, queue, None
        if status.get("active"):
            fresh = [moment for moment in queue if moment not in ran]
            if buffered is None and fresh:
                status["bufferedRun"] = rfc3339(fresh[0])
                self._recorder.event(
                    cronjob,
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

    def _stagger(
        self, cronjob: objects.Obj, schedule: schedules.AnySchedule
    ) -> timedelta | _Problem:
        """The CronJob's stagger offset, or why its stored staggerSeconds cannot be used."""
        metadata = cronjob["metadata"]
        seconds = (cronjob.get("spec") or {}).get("staggerSeconds")
        if seconds is None or seconds == 0:
            return timedelta(0)
        if not isinstance(seconds, int) or isinstance(seconds, bool):
            detail: str | None = "must be a whole number of seconds"
        else:
            detail = features.stagger_problem(schedule, seconds)
        if detail is not None:
            message = f"{features.STAGGER_FIELD}: {seconds!r}: {detail}"
            self._recorder.event(cronjob, "Warning", "InvalidStagger", message)
            return _Problem("InvalidStagger", message)
        return features.stagger_offset(metadata["namespace"], metadata["name"], seconds)

    def _stored_problem(self, cronjob: objects.Obj) -> _Problem | None:
        """A failure policy stored past validation: reported, and scheduling goes on."""
        spec = cronjob.get("spec") or {}
        policy = spec.get("failurePolicy")
        if policy is None:
            return None
        threshold = features.pause_threshold(spec)
        raw = policy.get("pauseAfterConsecutiveFailures") if isinstance(policy, Mapping) else policy
        if raw is None or (threshold is not None and threshold >= 1):
            return None
        message = (
            f"{features.PAUSE_FIELD}: {raw!r} is not a positive whole number; set 1 or more, "
            "or remove the field (runs are not paused meanwhile)"
        )
        self._recorder.event(cronjob, "Warning", "InvalidFailurePolicy", message)
        return _Problem("InvalidFailurePolicy", message, stops_schedule=False)

    def _run_requested(
        self, cronjob: objects.Obj, status: dict[str, Any], jobs: state.JobSets
    ) -> _Problem | None:
        """Run now: create the Job an unhandled run request asks for (even if suspended)."""
        token = features.run_request(cronjob)
        if token is None or cronjob["metadata"].get("deletionTimestamp"):
            status.pop("pendingRunRequest", None)
            return None
        problem = features.token_problem(token)
        if problem is not None:
            self._recorder.event(cronjob, "Warning", "InvalidRunRequest", problem)
            return _Problem("InvalidRunRequest", problem, stops_schedule=False)
        name = features.manual_job_name(cronjob["metadata"]["name"], token)
        owned = {objects.name_of(job) for job in (*jobs.active, *jobs.successful, *jobs.failed)}
        if name not in owned:
            if not self._make_room(cronjob, status):
                if status.get("pendingRunRequest") != token:
                    self._recorder.event(
                        cronjob,
                        "Normal",
                        "RunRequestPending",
                        f"run request {token!r} waits: a job is active and concurrencyPolicy "
                        "is Forbid; it starts when the active job finishes",
                    )
                status["pendingRunRequest"] = token
                return None
            failed = self._create(cronjob, status, features.build_manual_job(cronjob, token))
            if failed is not None:
                return dataclasses.replace(failed, stops_schedule=False)
        status.pop("pendingRunRequest", None)
        status["lastHandledRunRequest"] = token
        return None

    def _backfill(
        self,
        cronjob: objects.Obj,
        status: dict[str, Any],
        jobs: state.JobSets,
        now: datetime,
        started: list[objects.Obj],
    ) -> tuple[_Problem | None, timedelta | None]:
        """Backfill: start, cancel or advance the requested backfill, and create the Job of
        its next time when it is due and concurrencyPolicy makes room (one per
        reconcile, in order). Returns any problem and when to look again."""
        metadata = cronjob["metadata"]
        raw = (metadata.get("annotations") or {}).get(BACKFILL_ANNOTATION)
        progress = status.get("backfill")
        running = (progress or {}).get("state") == BackfillState.RUNNING
        if raw is None or metadata.get("deletionTimestamp"):
            if running and raw is None:
                backfills.cancel(status["backfill"])
                self._recorder.event(
                    cronjob, "Normal", "BackfillCancelled", _backfill_message(status)
                )
            return None, None
        try:
            schedule = features.parse_spec_schedule(cronjob.get("spec") or {})
        except schedules.ScheduleError:
            return None, None  # reported by the scheduling step
        problem = backfills.request_problem(raw, schedule)
        if problem is not None:
            self._recorder.event(cronjob, "Warning", "InvalidBackfill", problem)
            return _Problem("InvalidBackfill", problem, stops_schedule=False), None
        request = backfills.parse_request(raw)
        assert isinstance(request, backfills.Request)
        times = backfills.times_of(schedule, request)
        if progress is None or progress.get("token") != request.token:
            if running:
                backfills.cancel(status["backfill"])
                self._recorder.event(
                    cronjob, "Normal", "BackfillCancelled", _backfill_message(status)
                )
            status["backfill"] = backfills.start(request, times)
            self._recorder.event(cronjob, "Normal", "BackfillStarted", _backfill_message(status))
        progress = status["backfill"]
        if progress.get("state") != BackfillState.RUNNING:
            return None, None
        backfills.advance(progress, times, _ran(metadata["name"], jobs, {}))
        upcoming = parse_time(progress.get("next"))
        if upcoming is None:
            self._recorder.event(cronjob, "Normal", "BackfillComplete", _backfill_message(status))
            return None, None
        if upcoming > now:
            return None, upcoming - now + timedelta(milliseconds=100)
        if not self._make_room(cronjob, status):
            return None, None  # the active Job's end reconciles again
        job = state.build_job(cronjob, upcoming, schedule.zone)
        job["metadata"].setdefault("annotations", {})[backfills.BACKFILL_TOKEN_ANNOTATION] = (
            request.token
        )
        failed = self._create(cronjob, status, job, started=started)
        return (None if failed is None else dataclasses.replace(failed, stops_schedule=False)), (
            _SOON
        )

    def _make_room(self, cronjob: objects.Obj, status: dict[str, Any]) -> bool:
        """Apply concurrencyPolicy before a new run: False if Forbid says wait."""
        active = status.get("active") or []
        policy = (cronjob.get("spec") or {}).get("concurrencyPolicy") or "Allow"
        if policy in (ConcurrencyPolicy.FORBID, ConcurrencyPolicy.BUFFER_ONE) and active:
            return False
        if policy == "Replace":
            self._replace_active(cronjob, status)
        return True

    def _run(
        self,
        cronjob: objects.Obj,
        status: dict[str, Any],
        scheduled: datetime,
        zone: ZoneInfo,
        offset: timedelta | None,
        started: list[objects.Obj],
    ) -> _Problem | None:
        """Create the Job of ``scheduled`` unless it exists; ``offset`` is the stagger
        (None: the run is late by design, a buffered one, and feeds no skew)."""
        name = state.job_name(cronjob["metadata"]["name"], scheduled)
        active = status.get("active") or []
        if parse_time(status.get("lastScheduleTime")) == scheduled:
            return None  # this run exists already
        if any(ref.get("name") == name for ref in active):
            status["lastScheduleTime"] = rfc3339(scheduled)  # created, never recorded (a crash)
            return None
        if not self._make_room(cronjob, status):
            self._recorder.event(
                cronjob,
                "Normal",
                "JobAlreadyActive",
                "Not starting job because prior execution is running and concurrency policy is "
                "Forbid",
            )
            return None
        job = state.build_job(cronjob, scheduled, zone)
        due = None if offset is None else scheduled + offset
        return self._create(cronjob, status, job, scheduled=scheduled, due=due, started=started)

    def _replace_active(self, cronjob: objects.Obj, status: dict[str, Any]) -> None:
        """Delete every active Job before the new run is created.

        A delete that fails (a 500, a 409 because the name now has another uid) raises
        before anything is created, so Replace never leaves two runs active; the
        controller retries with backoff. The next reconcile's sync confirms against the
        API server whether an entry's Job is really gone (a failed GET there raises too).
        """
        active = status.get("active") or []
        for ref in list(active):
            error = self._delete_job(cronjob, ref["name"], uid=ref.get("uid"))
            if error is not None:
                raise error  # the reconcile writes what it learned, then fails
            active.remove(ref)

    def _create(
        self,
        cronjob: objects.Obj,
        status: dict[str, Any],
        job: dict[str, Any],
        *,
        scheduled: datetime | None = None,
        due: datetime | None = None,
        started: list[objects.Obj] | None = None,
    ) -> _Problem | None:
        """Create ``job``; a scheduled run (``scheduled`` set, staggered to ``due``) also
        moves lastScheduleTime and feeds the skew histogram, a manual run does neither."""
        name = job["metadata"]["name"]
        job["metadata"]["labels"] = {
            **job["metadata"].get("labels", {}),
            **inherited_labels(cronjob),
        }
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
            message = (
                f"spec.jobTemplate: the API server rejected Job {name}: {exc.message}; "
                "fix the template (every run would be rejected the same way)"
            )
            self._recorder.event(cronjob, "Warning", "FailedCreate", message)
            return _Problem("InvalidJobTemplate", message)
        except errors.ApiError as exc:
            if errors.has_status_cause(exc, errors.NAMESPACE_TERMINATING_CAUSE):
                return _namespace_terminating(cronjob)
            self._recorder.event(cronjob, "Warning", "FailedCreate", f"Error creating job: {exc}")
            raise  # the reconcile writes what it learned, then fails
        else:
            self._recorder.event(cronjob, "Normal", "SuccessfulCreate", f"Created job {name}")
            if due is not None:
                observe_skew(self._metrics.job_creation_skew, created, due)
            metadata = cronjob["metadata"]
            self._metrics.jobs_created.labels(metadata["namespace"], metadata["name"]).inc()
            if started is not None:
                started.append(created)
        ref = state.job_reference(created)
        active = status.setdefault("active", [])
        running = state.finished_state(created) is None  # an existing Job may be done already
        if running and all(entry.get("uid") != ref["uid"] for entry in active):
            active.append(ref)
        last = parse_time(status.get("lastScheduleTime"))
        if scheduled is not None and (last is None or scheduled > last):  # never backwards
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
        was_paused = (find_condition(status.get("conditions") or [], "Available") or {}).get(
            "reason"
        ) == features.PAUSED_REASON
        condition = condition_setter(status, generation=generation, now=now)
        if problem is not None:
            condition("Degraded", True, problem.reason, problem.message)
        else:
            condition("Degraded", False, "AsExpected", "")
        available, reason, message = _availability(cronjob, status, problem)
        condition("Available", available, reason, message)
        if reason == features.PAUSED_REASON and not was_paused:
            self._recorder.event(cronjob, "Warning", features.PAUSED_REASON, message)
        count = len(status.get("active") or [])
        if count:
            condition("Progressing", True, "JobsActive", f"{count} active job(s)")
        else:
            condition("Progressing", False, "Idle", "no active jobs")
        status["observedGeneration"] = generation

    def _record(
        self,
        cronjob: objects.Obj,
        status: dict[str, Any],
        notices: list[state.Notice],
        accounting: policies.Accounting | None = None,
    ) -> None:
        """Write ``status``, then report its notices and skipped runs: each is reported
        once, by the reconcile whose write records it (none when the server had it)."""
        if not write_status(self._client, CRONJOB, cronjob, status):
            return
        metadata = cronjob["metadata"]
        if accounting is not None and accounting.skipped:
            self._report_skips(cronjob, accounting)
        for notice in notices:
            self._recorder.event(cronjob, notice.type, notice.reason, notice.message)
            if notice.finished is not None:
                self._metrics.jobs_finished.labels(
                    metadata["namespace"], metadata["name"], notice.finished
                ).inc()

    def _report_skips(self, cronjob: objects.Obj, accounting: policies.Accounting) -> None:
        """The Warning event (the recorder aggregates repeats) and the skipped counter."""
        metadata = cronjob["metadata"]
        for reason, count in accounting.skipped.items():
            self._metrics.runs_skipped.labels(metadata["namespace"], metadata["name"], reason).inc(
                count
            )
        message = policies.skipped_message(accounting)
        self._recorder.event(cronjob, "Warning", "RunsSkipped", message)


_SOON: Final = timedelta(seconds=1)
"""How soon to look again when catch-up All has more times to run or the accounting more
times to walk."""


def _backfill_keeps(stored: Mapping[str, Any], cronjob_name: str, job: objects.Obj) -> bool:
    moment = state.scheduled_time(cronjob_name, objects.name_of(job))
    return moment is not None and backfills.protected(stored, moment)


def _backfill_message(status: Mapping[str, Any]) -> str:
    progress = status.get("backfill") or {}
    return (
        f"backfill {progress.get('token')!r} of [{progress.get('from')}, {progress.get('to')}): "
        f"{progress.get('done')}/{progress.get('requested')} done, {progress.get('state')}"
    )


def _record_with_the_run(
    status: Mapping[str, Any], stored: Mapping[str, Any], observed: Any
) -> bool:
    """Whether a reconcile that created a Job must write status now rather than leave it
    to the follow-up: it holds what the follow-up cannot learn again. A schedule edit's
    ``since`` (this reconcile's now), a new backfill (announced by its event), a buffered
    time dropped or taken (the follow-up sees the new run active and would keep it)."""
    new_backfill = (status.get("backfill") or {}).get("token") != (
        stored.get("backfill") or {}
    ).get("token")
    return (
        status.get("observedSchedule") != observed
        or new_backfill
        or status.get("bufferedRun") != stored.get("bufferedRun")
    )


def _active_since(
    cronjob_name: str, status: Mapping[str, Any], jobs: state.JobSets
) -> datetime | None:
    """When the oldest active run began: its scheduled time (a manual run's creation);
    None when no run is active, the minimum time when one's start is unknown."""
    created = {
        objects.name_of(job): parse_time((job.get("metadata") or {}).get("creationTimestamp"))
        for job in jobs.active
    }
    starts = []
    for ref in status.get("active") or ():
        name = str(ref.get("name"))
        start = state.scheduled_time(cronjob_name, name) or created.get(name)
        starts.append(start or datetime.min.replace(tzinfo=UTC))
    return min(starts, default=None)


def _restore(status: dict[str, Any], stored: Mapping[str, Any], key: str) -> None:
    """Put ``status[key]`` back as ``stored`` has it (absent if absent)."""
    if key in stored:
        status[key] = objects.thaw(stored[key])
    else:
        status.pop(key, None)


def _ran(cronjob_name: str, jobs: state.JobSets, status: Mapping[str, Any]) -> set[datetime]:
    """The scheduled times that ran: their Jobs exist, or the latest is recorded."""
    times = {
        moment
        for job in (*jobs.active, *jobs.successful, *jobs.failed)
        if (moment := state.scheduled_time(cronjob_name, objects.name_of(job))) is not None
    }
    last = parse_time(status.get("lastScheduleTime"))
    return times if last is None else {*times, last}


def _namespace_terminating(cronjob: objects.Obj) -> _Problem:
    """A create refused because the namespace is being deleted: no Warning, as the
    built-in; unlike it, no retry either (a terminating namespace never becomes active
    again; deleting it deletes the CronJob, and that reconciles)."""
    namespace = cronjob["metadata"]["namespace"]
    message = (
        f"metadata.namespace: {namespace} is being deleted, so no Job can be created in it "
        "and no run starts; the CronJob is deleted with it (create it in another namespace "
        "to keep it running)"
    )
    return _Problem("NamespaceTerminating", message, retry=False)


def _pause_message(cronjob: objects.Obj, status: dict[str, Any]) -> str:
    threshold = features.pause_threshold(cronjob.get("spec") or {})
    return (
        f"{status.get('consecutiveFailures')} consecutive failed runs (the last at "
        f"{status.get('lastFailureTime')}) reached spec.failurePolicy."
        f"pauseAfterConsecutiveFailures={threshold}: no scheduled run starts. To resume, fix "
        "the job template and edit the spec, or start a manual run "
        f"(kubectl cjt run {cronjob['metadata']['name']}) that succeeds"
    )


def _availability(
    cronjob: objects.Obj, status: dict[str, Any], problem: _Problem | None
) -> tuple[bool, str, str]:
    """Available's (status, reason, message): True only when runs really start on schedule.

    The reason names what keeps runs from starting, most fundamental first: the CronJob
    is being deleted, suspended, has a problem that stops scheduled runs (which includes a
    Job template that the API server rejects: every run would fail to start), or is paused
    after consecutive failures (spec.failurePolicy)."""
    metadata = cronjob["metadata"]
    if metadata.get("deletionTimestamp"):
        finalizers = ", ".join(metadata.get("finalizers") or ()) or "none"
        return (
            False,
            "Terminating",
            "metadata.deletionTimestamp is set: no new runs start; the CronJob is removed "
            f"once its finalizers are gone ({finalizers})",
        )
    spec = cronjob.get("spec") or {}
    if spec.get("suspend"):
        return False, "Suspended", "spec.suspend is true: no new runs start"
    if problem is not None and problem.stops_schedule:
        return False, problem.reason, problem.message
    if features.paused(spec, status):
        return False, features.PAUSED_REASON, _pause_message(cronjob, status)
    return True, "Scheduling", "runs start on schedule"


def observe_skew(skew: Histogram, job: objects.Obj, scheduled: datetime) -> None:
    """Record how late a Job was created relative to its scheduled time."""
    created = parse_time((job.get("metadata") or {}).get("creationTimestamp"))
    if created is not None:
        skew.observe(max(0.0, (created - scheduled).total_seconds()))


def setup(manager: Manager, *, clock: Clock = utc_now, shard: Shard | None = None) -> Controller:
    """Register the Job transform and owner index, and the CronJob controller.

    With ``shard`` (``runtime.sharding.attach``), the controller runs on every replica
    for its share, writing through the shard's fenced client; Jobs inherit the
    CronJob's shard label at creation (``_create``).
    """
    manager.cache.set_transform(JOB, slim_job)
    manager.cache.index_field(JOB, JOB_OWNER_INDEX, job_owner_index)
    metrics = CronJobMetrics(manager.metrics.registry)
    if shard is not None:
        reconciler = CronJobReconciler(shard.client, shard.recorder, clock=clock, metrics=metrics)
        return shard.builder("cronjob").for_(CRONJOB).owns(JOB).complete(reconciler)
    reconciler = CronJobReconciler(manager.client, manager.recorder, clock=clock, metrics=metrics)
    return manager.builder("cronjob").for_(CRONJOB).owns(JOB).complete(reconciler)
