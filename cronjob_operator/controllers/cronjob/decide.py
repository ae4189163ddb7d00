"""The reconcile's decision: ``decide(view, now, outcomes) -> Plan``, pure, no I/O.

The order of the rules is the built-in controller's (docs/cronjob-semantics.md,
"Reconcile, in order") with the additions of docs/beyond-builtin.md; each rule lives in
its concept's module and this one only sequences them:

1. history (``history.py``): bring status in line with the Jobs (``lastScheduleTime``
   first, so a run whose Job exists is recorded before anything else is decided), count
   failures, lift a failure pause on a new generation, prune what the stored status has
   recorded;
2. requests (``requests.py``, ``backfill.py``): a run request, then a backfill's next
   time (both before the suspend and pause checks);
3. due runs (``runs.py``, ``policies.py``, ``concurrency.py``, and the stagger of
   ``api/cronjob_rules.py``): the scheduled run due now, skip accounting, BufferOne;
4. conditions and next time (``conditions.py``).

Jobs first: a decision that creates a Job returns ``follow_up`` without writing status
(unless it holds what the follow-up cannot learn again: ``_record_with_the_run``), so
under a burst every due Job is created before any status write. Notices are reported
only with the write that records them. On an API error the Plan writes what was learned
(but not the skip accounting, which the retry does again) and then raises.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, Final
from zoneinfo import ZoneInfo

from cronjob_operator import schedule as schedules
from cronjob_operator.api import cronjob_rules as rules
from cronjob_operator.api.batch_v1 import (
    BACKFILL_ANNOTATION,
    MAX_NAME_LENGTH,
    BackfillState,
    SkipReason,
    Unusable,
)
from cronjob_operator.controllers.cronjob import (
    backfill,
    concurrency,
    conditions,
    history,
    jobs,
    policies,
    requests,
    runs,
)
from cronjob_operator.controllers.cronjob.plan import (
    Create,
    Created,
    Foreign,
    Outcome,
    Pending,
    Plan,
    Problem,
    Rejected,
    Steps,
    Unknown,
)
from cronjob_operator.controllers.cronjob.view import (
    CronJobView,
    api_status,
    shown,
    stamp,
    time_at,
)
from cronjob_operator.runtime import errors, objects
from cronjob_operator.runtime.controller import Result
from cronjob_operator.runtime.controllerutil import (
    condition_setter,
    find_condition,
    rfc3339,
)
from cronjob_operator.runtime.sharding import owned_object_labels

__all__ = ["Walks", "decide"]

_SOON: Final = timedelta(seconds=1)
"""How soon to look again when catch-up All has more times to run or the accounting more
times to walk."""


class Walks:
    """The schedule walks of one reconcile's decisions, by their arguments.

    A reconcile that creates a Job decides again with the step's outcome, with the same
    view and time, so its schedule walk (the newest due time, the misses, the next time:
    most of a decision's CPU at a due time) gives the same answer: the reconcile passes
    one ``Walks`` to each of its decisions and the walk is done once.
    """

    def __init__(self) -> None:
        self._due: dict[tuple[Any, ...], schedules.Due] = {}

    def most_recent_due(
        self,
        schedule: schedules.AnySchedule,
        *,
        earliest: datetime,
        now: datetime,
        starting_deadline_seconds: int | None,
    ) -> schedules.Due:
        """``schedule.most_recent_due``, walked once per set of arguments."""
        key = (schedule, earliest, now, starting_deadline_seconds)
        due = self._due.get(key)
        if due is None:
            due = self._due[key] = schedules.most_recent_due(
                schedule,
                earliest=earliest,
                now=now,
                starting_deadline_seconds=starting_deadline_seconds,
            )
        return due


def decide(
    view: CronJobView,
    now: datetime,
    outcomes: Mapping[int, Outcome] | None = None,
    walks: Walks | None = None,
) -> Plan:
    """Everything the reconcile of ``view`` at ``now`` does, given the ``outcomes`` (by
    step index) of the creates and Replace deletes performed so far; a Plan with
    ``pending`` ends at the next step whose outcome is needed. ``walks``: the schedule
    walks of this reconcile's earlier decisions (same view, same ``now``)."""
    steps = Steps(outcomes or {})
    try:
        return _Decision(view, now, steps, walks or Walks()).plan()
    except Pending:
        return Plan(steps=tuple(steps.steps), pending=True)


class _Decision:
    """One decision's working state: the status it builds, the steps it records."""

    def __init__(self, view: CronJobView, now: datetime, steps: Steps, walks: Walks) -> None:
        self.view = view
        self.now = now
        self.steps = steps
        self.walks = walks
        self.status: dict[str, Any] = objects.thaw(view.stored)
        self.started: list[objects.Obj] = []

    def _plan(self, status: dict[str, Any] | None = None, **fields: Any) -> Plan:
        """The Plan, its status (if any) rendered for the API."""
        rendered = None if status is None else api_status(status)
        return Plan(steps=tuple(self.steps.steps), status=rendered, **fields)

    def plan(self) -> Plan:
        status, stored = self.status, self.view.stored
        notices = [*self._sync(), *self._count_failures()]
        self._prune()
        observed = status.get("observedSchedule")
        try:
            manual = self._run_requested()
            filled, filling = self._backfill()
            requeue, problem, accounting = self._schedule()
        except errors.ApiError as exc:
            # Keep what this reconcile learned, but not its skip accounting: the retry
            # does it again and reports it with the write that records it.
            _restore(status, stored, "skippedRuns")
            _restore(status, stored, "bufferedRun")  # a dropped one is counted again
            return self._plan(status=status, notices=tuple(notices), error=exc)
        if problem is None:
            problem = self._stored_problem() or manual or filled
        if filling is not None and (requeue is None or filling < requeue):
            requeue = filling
        if self.started:
            # Jobs first: this reconcile created a Job. Its status is written by a
            # follow-up reconcile queued behind every other due run; that one finds the
            # Job (which records the run) and the unchanged stored status (so it reports
            # the notices of this one).
            write = _record_with_the_run(status, stored, observed)
            return self._plan(
                status=status if write else None,
                notices=tuple(notices),
                accounting=accounting,
                result=Result(follow_up=True),
            )
        self._set_conditions(problem)
        return self._plan(
            status=status,
            notices=tuple(notices),
            accounting=accounting,
            active=len(status.get("active") or ()),
            result=Result(requeue_after=requeue.total_seconds()) if requeue else Result(),
        )

    # --- history and pruning ------------------------------------------------------

    def _sync(self) -> list[history.Notice]:
        view = self.view
        history.advance_last_schedule_time(self.status, view.name, view.jobs.owned())
        return history.sync_status(
            self.status, view.jobs, view.job_times, confirmed_missing=view.missing
        )

    def _count_failures(self) -> list[history.Notice]:
        generation = self.view.generation
        resumed = conditions.resume_on_new_generation(self.status, generation)
        history.record_failures(self.status, self.view.jobs.failed, self.view.job_times)
        if not resumed:
            return []
        message = (
            f"spec changed (generation {generation}): scheduled runs resume and the "
            "consecutive failure count restarts at 0"
        )
        return [history.Notice("Normal", "Resumed", message)]

    def _prune(self) -> None:
        view = self.view
        for message in history.capped_limits(view.spec, view.jobs):
            self.steps.event("Warning", "HistoryLimitCapped", message)
        unrecorded = requests.unrecorded_manual_job(view.obj)
        for job in history.prunable(
            view.spec, view.name, view.jobs, view.stored, view.job_times, unrecorded=unrecorded
        ):  # a failed prune is reported and retried on the next reconcile
            self.steps.prune(objects.name_of(job), job["metadata"].get("uid"))

    # --- requests: run now, backfill ----------------------------------------------

    def _run_requested(self) -> Problem | None:
        """Run now: create the Job an unhandled run request asks for (even if suspended)."""
        view, status = self.view, self.status
        token = requests.run_request(view.obj)
        if token is None or view.deleting:
            status.pop("pendingRunRequest", None)
            return None
        problem = rules.token_problem(token)
        if problem is not None:
            self.steps.event("Warning", "InvalidRunRequest", problem)
            return Problem("InvalidRunRequest", problem, stops_schedule=False)
        name = rules.manual_job_name(view.name, token)
        owned = {objects.name_of(job) for job in view.jobs.owned()}
        if name not in owned:
            if not concurrency.make_room(view.spec, status, self.steps):
                if status.get("pendingRunRequest") != token:
                    self.steps.event(
                        "Normal",
                        "RunRequestPending",
                        f"run request {token!r} waits: a job is active and concurrencyPolicy "
                        "is Forbid; it starts when the active job finishes",
                    )
                status["pendingRunRequest"] = token
                return None
            failed = self._create(jobs.build_manual_job(view.obj, token), track=False)
            if failed is not None:
                return dataclasses.replace(failed, stops_schedule=False)
        status.pop("pendingRunRequest", None)
        status["lastHandledRunRequest"] = token
        return None

    def _backfill(self) -> tuple[Problem | None, timedelta | None]:
        """Start, cancel or advance the requested backfill, and create the Job of its
        next time when it is due and concurrencyPolicy makes room (one per reconcile, in
        order). Returns any problem and when to look again."""
        view, status, now = self.view, self.status, self.now
        raw = view.annotations.get(BACKFILL_ANNOTATION)
        progress = status.get("backfill")
        running = (progress or {}).get("state") == BackfillState.RUNNING
        if raw is None or view.deleting:
            if running and raw is None:
                backfill.cancel(status["backfill"])
                self.steps.event("Normal", "BackfillCancelled", _backfill_message(status))
            return None, None
        try:
            schedule = rules.schedule_of(view.spec)
        except schedules.ScheduleError:
            return None, None  # reported by the scheduling step
        request = rules.parse_request(raw)
        if isinstance(request, str):
            return self._backfill_refused(f"{rules.BACKFILL_FIELD}: {request}")
        # The state first: a recorded request was checked when it started, and one that
        # is done needs no schedule times (its cost must not outlive it).
        recorded = backfill.recorded(progress, request)
        if recorded and not running:
            return None, None
        problem = None if recorded else rules.count_problem(schedule, request)
        if problem is not None:
            return self._backfill_refused(problem)
        times = rules.times_of(schedule, request)
        if not recorded:
            if running:
                backfill.cancel(status["backfill"])
                self.steps.event("Normal", "BackfillCancelled", _backfill_message(status))
            status["backfill"] = backfill.start(request, times)
            self.steps.event("Normal", "BackfillStarted", _backfill_message(status))
        progress = status["backfill"]
        if progress.get("state") != BackfillState.RUNNING:
            return None, None
        backfill.advance(progress, times, runs.ran(view.name, view.jobs, {}))
        upcoming = time_at(progress, "next")
        if upcoming is None:
            self.steps.event("Normal", "BackfillComplete", _backfill_message(status))
            return None, None
        if upcoming > now:
            return None, upcoming - now + timedelta(milliseconds=100)
        if not concurrency.make_room(view.spec, status, self.steps):
            return None, None  # the active Job's end reconciles again
        job = jobs.build_job(view.obj, upcoming, schedule.zone)
        job["metadata"].setdefault("annotations", {})[rules.BACKFILL_TOKEN_ANNOTATION] = (
            request.token
        )
        failed = self._create(job)
        return (None if failed is None else dataclasses.replace(failed, stops_schedule=False)), (
            _SOON
        )

    def _backfill_refused(self, problem: str) -> tuple[Problem, None]:
        """An unusable backfill request's Warning event and problem (nothing to requeue)."""
        self.steps.event("Warning", "InvalidBackfill", problem)
        return Problem("InvalidBackfill", problem, stops_schedule=False), None

    # --- due runs -------------------------------------------------------------------

    def _schedule(self) -> tuple[timedelta | None, Problem | None, policies.Accounting | None]:
        """Steps 5-9: maybe create the due Job; returns when to look again, any problem,
        and the skipped runs this reconcile accounted for.

        Sets ``status.nextScheduleTime``, or removes it when no scheduled run will start.
        """
        view, status, now, spec = self.view, self.status, self.now, self.view.spec
        conditions.set_next_schedule_time(status, None)
        created = view.created or now
        since = runs.observe_schedule(status, spec, created=created, now=now)
        if view.deleting:
            return None, None, None
        # Suspended or paused: nothing starts, but the times that come are accounted for.
        holding = spec.suspend or conditions.paused(spec, status)
        try:
            schedule = rules.schedule_of(spec)
        except schedules.ScheduleError as exc:
            if holding:
                return None, None, None
            self.steps.event("Warning", exc.reason, str(exc))
            return None, Problem(exc.reason, str(exc)), None
        name = view.name
        if len(name) > MAX_NAME_LENGTH and not holding:  # stored past validation
            message = (
                f"metadata.name: {len(name)} characters, at most {MAX_NAME_LENGTH} leave room "
                "for the Job name suffix (Job names must fit 63); recreate with a shorter name"
            )
            self.steps.event("Warning", "FailedCreate", message)
            return None, Problem("NameTooLong", message), None
        offset = self._stagger(schedule)
        if isinstance(offset, Problem):
            return None, (None if holding else offset), None
        # Stagger: a nominal time t is due at t + offset, so the schedule is asked about
        # now - offset; the deadline then counts from the staggered time. Never a run due
        # before the last edit of the schedule or time zone (observedSchedule.since), nor
        # one the skip accounting has counted (skippedRuns.accountedThrough).
        shifted = now - offset
        last = time_at(status, "lastScheduleTime")
        accounted = time_at(status.get("skippedRuns"), "accountedThrough")
        earliest = max(last or created, since) - offset
        if accounted is not None and accounted > earliest:
            earliest = accounted
        deadline = spec.starting_deadline_seconds
        due = self.walks.most_recent_due(
            schedule, earliest=earliest, now=shifted, starting_deadline_seconds=deadline
        )
        queue = policies.due_queue(
            spec.catch_up_policy,
            schedule,
            due,
            earliest=earliest,
            now=shifted,
            starting_deadline_seconds=deadline,
        )
        reach = schedules.reach_of(shifted, deadline)
        ran = runs.ran(name, view.jobs, status)
        target, pending, buffer_skip = concurrency.buffer(
            spec, status, queue, ran, reach, holding, self.steps
        )
        block = policies.blocked_by(
            suspended=spec.suspend,
            paused=conditions.paused(spec, status),
            active_since=runs.active_since(name, status, view.job_created),
            policy=spec.concurrency_policy,
        )
        buffered = time_at(status, "bufferedRun")
        stored_last = time_at(view.stored, "lastScheduleTime")
        accounting = policies.account(
            status,
            schedule,
            # No watermark yet (an older operator's CronJob): nothing before the stored
            # lastScheduleTime counts (a run whose Job is gone cannot be told from a skip).
            initial=max(stored_last or created, since) - offset,
            floor=since - offset,
            now=shifted,
            latest=due.latest,
            reach=reach,
            ran=ran if buffered is None else {*ran, buffered},
            pending=pending,
            block=block,
        )
        if buffer_skip is not None:  # counted in status by buffer, reported with the rest
            accounting = policies.with_skip(accounting, SkipReason.DEADLINE_PASSED, buffer_skip)
        requeue = schedules.requeue_after(due, shifted)
        if accounting.more or (len(queue) > 1 and block is None):
            # More times to account for, or catch-up All has more to run and nothing
            # stops them (an active run under Forbid reconciles again when it finishes).
            requeue = _SOON
        if holding:
            return requeue, None, accounting
        conditions.set_next_schedule_time(
            status, None if due.next_time is None else due.next_time + offset
        )
        if target is None:
            if due.scheduled is None and due.next_time is None:
                field = "spec.schedule" if spec.schedule is not None else "spec.schedules"
                message = f"{field}: {schedule.expression!r} never fires; fix the schedule"
                self.steps.event("Warning", "InvalidSchedule", message)
                return None, Problem("InvalidSchedule", message), accounting
            return requeue, None, accounting
        if due.too_many_missed and len(queue) == 1:  # Latest; All counts CatchUpBound
            self.steps.event(
                "Warning",
                "TooManyMissedTimes",
                f"too many missed start times ({due.missed}+): running only the most recent, "
                f"{rfc3339(due.scheduled or target)}; set or check spec.startingDeadlineSeconds",
            )
        late = target not in queue  # the buffered run: its lateness is no creation skew
        problem = self._run(target, schedule.zone, None if late else offset)
        return (requeue if problem is None or problem.retry else None), problem, accounting

    def _stagger(self, schedule: schedules.AnySchedule) -> timedelta | Problem:
        """The CronJob's stagger offset, or why its stored staggerSeconds cannot be used."""
        seconds = self.view.spec.stagger_seconds
        if seconds == 0:
            return timedelta(0)
        if isinstance(seconds, Unusable):
            return self._stagger_refused(seconds.value, "must be a whole number of seconds")
        detail = rules.stagger_problem(schedule, seconds)
        if detail is not None:
            return self._stagger_refused(seconds, detail)
        return rules.stagger_offset(self.view.namespace, self.view.name, seconds)

    def _stagger_refused(self, stored: object, detail: str) -> Problem:
        """An unusable staggerSeconds' Warning event and problem."""
        message = f"{rules.STAGGER_FIELD}: {stored!r}: {detail}"
        self.steps.event("Warning", "InvalidStagger", message)
        return Problem("InvalidStagger", message)

    def _run(self, scheduled: datetime, zone: ZoneInfo, offset: timedelta | None) -> Problem | None:
        """Create the Job of ``scheduled`` unless it exists; ``offset`` is the stagger
        (None: the run is late by design, a buffered one, and feeds no skew)."""
        status = self.status
        name = jobs.job_name(self.view.name, scheduled)
        active = status.get("active") or []
        if time_at(status, "lastScheduleTime") == scheduled:
            return None  # this run exists already
        if any(ref.get("name") == name for ref in active):
            status["lastScheduleTime"] = stamp(scheduled)  # created, never recorded (a crash)
            return None
        if not concurrency.make_room(self.view.spec, status, self.steps):
            self.steps.event(
                "Normal",
                "JobAlreadyActive",
                "Not starting job because prior execution is running and concurrency policy is "
                "Forbid",
            )
            return None
        job = jobs.build_job(self.view.obj, scheduled, zone)
        due = None if offset is None else scheduled + offset
        return self._create(job, scheduled=scheduled, due=due)

    def _create(
        self,
        job: dict[str, Any],
        *,
        scheduled: datetime | None = None,
        due: datetime | None = None,
        track: bool = True,
    ) -> Problem | None:
        """Create ``job`` (``track``: a new one holds back the status write, Jobs first); a
        scheduled run (``scheduled`` set, staggered to ``due``) also moves
        lastScheduleTime, a manual run does not."""
        name = job["metadata"]["name"]
        job["metadata"]["labels"] = owned_object_labels(
            job["metadata"].get("labels", {}), self.view.obj
        )
        outcome = self.steps.perform(Create(job, due=due))
        if isinstance(outcome, Unknown):
            raise outcome.error
        if isinstance(outcome, Foreign):
            message = f"Job {name} exists and is not controlled by this CronJob; not touching it"
            self.steps.event("Warning", "UnexpectedJob", message)
            return None
        if isinstance(outcome, Rejected):
            exc = outcome.error
            if isinstance(exc, errors.Invalid):
                message = (
                    f"spec.jobTemplate: the API server rejected Job {name}: {exc.message}; "
                    "fix the template (every run would be rejected the same way)"
                )
                self.steps.event("Warning", "FailedCreate", message)
                return Problem("InvalidJobTemplate", message)
            if errors.has_status_cause(exc, errors.NAMESPACE_TERMINATING_CAUSE):
                return _namespace_terminating(self.view.namespace)
            self.steps.event("Warning", "FailedCreate", f"Error creating job: {exc}")
            raise exc  # the reconcile writes what it learned, then fails
        assert isinstance(outcome, Created)
        created = outcome.job
        if outcome.new:
            self.steps.event("Normal", "SuccessfulCreate", f"Created job {name}")
            if track:
                self.started.append(created)
        ref = jobs.job_reference(created)
        active = self.status.setdefault("active", [])
        running = jobs.finished_state(created) is None  # an existing Job may be done already
        if running and all(entry.get("uid") != ref["uid"] for entry in active):
            active.append(ref)
        last = time_at(self.status, "lastScheduleTime")
        if scheduled is not None and (last is None or scheduled > last):  # never backwards
            self.status["lastScheduleTime"] = stamp(scheduled)
        return None

    # --- conditions and next time -------------------------------------------------

    def _stored_problem(self) -> Problem | None:
        """A failure policy stored past validation: reported, and scheduling goes on."""
        unusable = self.view.spec.unusable_pause
        if unusable is None:
            return None
        message = (
            f"{rules.PAUSE_FIELD}: {unusable.value!r} is not a positive whole number; set 1 or "
            "more, or remove the field (runs are not paused meanwhile)"
        )
        self.steps.event("Warning", "InvalidFailurePolicy", message)
        return Problem("InvalidFailurePolicy", message, stops_schedule=False)

    def _set_conditions(self, problem: Problem | None) -> None:
        status, generation = self.status, self.view.generation
        was_paused = (find_condition(status.get("conditions") or [], "Available") or {}).get(
            "reason"
        ) == conditions.PAUSED_REASON
        condition = condition_setter(status, generation=generation, now=self.now)
        if problem is not None:
            condition("Degraded", True, problem.reason, problem.message)
        else:
            condition("Degraded", False, "AsExpected", "")
        available, reason, message = conditions.availability(self.view, status, problem)
        condition("Available", available, reason, message)
        if reason == conditions.PAUSED_REASON and not was_paused:
            self.steps.event("Warning", conditions.PAUSED_REASON, message)
        count = len(status.get("active") or [])
        if count:
            condition("Progressing", True, "JobsActive", f"{count} active job(s)")
        else:
            condition("Progressing", False, "Idle", "no active jobs")
        status["observedGeneration"] = generation


def _backfill_message(status: Mapping[str, Any]) -> str:
    progress = status.get("backfill") or {}
    return (
        f"backfill {progress.get('token')!r} of [{shown(progress.get('from'))}, "
        f"{shown(progress.get('to'))}): "
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


def _restore(status: dict[str, Any], stored: Mapping[str, Any], key: str) -> None:
    """Put ``status[key]`` back as ``stored`` has it (absent if absent)."""
    if key in stored:
        status[key] = objects.thaw(stored[key])
    else:
        status.pop(key, None)


def _namespace_terminating(namespace: str) -> Problem:
    """A create refused because the namespace is being deleted: no Warning, as the
    built-in; unlike it, no retry either (a terminating namespace never becomes active
    again; deleting it deletes the CronJob, and that reconciles)."""
    message = (
        f"metadata.namespace: {namespace} is being deleted, so no Job can be created in it "
        "and no run starts; the CronJob is deleted with it (create it in another namespace "
        "to keep it running)"
    )
    return Problem("NamespaceTerminating", message, retry=False)
