"""The reconcile's decision: ``decide(view, now, outcomes) -> Plan``, pure, no I/O (the
steps whose outcome it needs are performed by the reconciler's ``perform``, ``plan.py``).

The order of the rules is the built-in controller's (docs/cronjob-semantics.md,
"Reconcile, in order") with the additions of docs/beyond-builtin.md; each rule lives in
its concept's module and this one only sequences them:

1. history (``history.py``): bring status in line with the Jobs (``lastScheduleTime``
   first, so a run whose Job exists is recorded before anything else is decided), count
   failures, lift a failure pause on a new generation, prune what the stored status has
   recorded; then end each run none of whose Pods started in time (``start_timeout.py``),
   before anything starts, so its end makes room;
2. requests (``requests.py``, ``backfill.py``): a run request, then a backfill's next
   time (both before the suspend and pause checks);
3. due runs (``due.py`` computes them from ``runs.py``, ``policies.py``,
   ``concurrency.py``, ``limits.py`` and the stagger of ``api/cronjob_rules.py``): the
   scheduled run due now, skip accounting, BufferOne, the run window, run limit and
   exclusions;
4. conditions and next time (``conditions.py``).

Every run, whatever its source (a run request, a backfill's step, the scheduled time due
now), passes the same stages once its source has admitted it (the request is new, the
backfill's time has come, the scheduled time is inside the window and the run limit, the
CronJob neither suspended nor paused): ``_start`` asks concurrencyPolicy for room
(``_make_room``: wait, or delete what Replace replaces once status records it), then
creates the Job, claiming the group's slot with the create (``_create``). A source adds
only what is its own: its identity's Job and what it records when the run waits.

The rule modules return what they decide (named results: ``concurrency.Room``,
``concurrency.Buffering``, ``policies.Accounting``, ``due.Timing``, a backfill's new
progress); this module performs the steps and records the results in the status.

Jobs first: a decision that creates a Job returns ``follow_up`` without writing status
(unless it holds what the follow-up cannot learn again: ``_record_with_the_run``, a run
ended by its start timeout, a run whose Job its own Replace deleted), so
under a burst every due Job is created before any status write. Notices are reported
only with the write that records them. On an API error the Plan writes what was learned
(but not the skip accounting, which the retry does again) and then raises.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from enum import Enum
from typing import Any, Literal, NamedTuple, cast
from zoneinfo import ZoneInfo

from cronjob_operator import schedule as schedules
from cronjob_operator.api import cronjob_rules as rules
from cronjob_operator.api.batch_v1 import (
    BACKFILL_ANNOTATION,
    BackfillState,
    ConcurrencyPolicy,
)
from cronjob_operator.controllers.cronjob import (
    backfill,
    concurrency,
    conditions,
    due,
    groups,
    history,
    jobs,
    limits,
    policies,
    requests,
    runs,
    start_timeout,
)
from cronjob_operator.controllers.cronjob.due import SOON, Walks
from cronjob_operator.controllers.cronjob.plan import (
    Create,
    Created,
    Delete,
    Foreign,
    GroupFull,
    Outcome,
    Pending,
    Perform,
    Plan,
    Problem,
    Rejected,
    Steps,
    Unknown,
)
from cronjob_operator.controllers.cronjob.status import Backfill, CronJobStatus
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

__all__ = ["decide"]


class _Source(Enum):
    """Where a run comes from, which is what its identity is made of (docs/
    cronjob-semantics.md, "The rule"): a scheduled time, a run request's token, or a
    backfill's token and time."""

    SCHEDULED = "scheduled"
    REQUESTED = "requested"
    BACKFILL = "backfill"


class _Run(NamedTuple):
    """A run one source asks to start, past that source's admission."""

    source: _Source
    job: Callable[[], dict[str, Any]]
    """Builds its Job (built only once concurrencyPolicy lets it start)."""
    scheduled: datetime | None = None
    """A scheduled run's time, which it records as lastScheduleTime (never backwards)."""
    due_at: datetime | None = None
    """When a scheduled run was due, with its stagger (None: late by design, buffered)."""
    walk_behind: bool = False
    """The skip accounting has older times left to walk (a full group's skip waits)."""


class _Waits(NamedTuple):
    """concurrencyPolicy said wait: Forbid or BufferOne with a run active, or Replace
    waiting (``replacing``) for a status write or for the Job it replaces to end."""

    replacing: bool


class _Decided(NamedTuple):
    """What the backfill or the scheduling step decided: when to look again (None: the
    events that matter reconcile again), any problem, and the skipped runs this
    reconcile accounted for (the scheduling step's)."""

    requeue: timedelta | None = None
    problem: Problem | None = None
    accounting: policies.Accounting | None = None


def decide(
    view: CronJobView,
    now: datetime,
    outcomes: Mapping[int, Outcome] | None = None,
    walks: Walks | None = None,
    *,
    perform: Perform | None = None,
) -> Plan:
    """Everything the reconcile of ``view`` at ``now`` does, given the ``outcomes`` (by
    step index) of the creates and Replace deletes performed so far; ``perform``
    performs the others when the decision comes to them (``plan.Perform``), else a Plan
    with ``pending`` ends at the next step whose outcome is needed. ``walks``: the
    schedule walks of this reconcile's earlier decisions (same ``now``)."""
    steps = Steps(outcomes or {}, perform)
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
        self.status: CronJobStatus = objects.thaw(view.stored)
        self.started: list[objects.Obj] = []
        self.created: set[str] = set()  # the names of the Jobs this reconcile created
        self.record_first = False  # Replace or a start timeout waits for a write (rule 3)
        self.replaced: set[str] = set()  # the Jobs its Replace deleted (their group slots)
        self.group_skipped: datetime | None = None  # a scheduled run skipped, its group full

    def _plan(self, status: CronJobStatus | None = None, **fields: Any) -> Plan:
        """The Plan, its status (if any) rendered for the API."""
        rendered = None if status is None else api_status(status)
        return Plan(steps=tuple(self.steps.steps), status=rendered, **fields)

    def plan(self) -> Plan:
        status, stored = self.status, self.view.stored
        notices = [*self._sync(), *self._count_failures()]
        self._prune()
        observed = status.get("observedSchedule")
        try:
            unended = start_timeout.end_overdue(
                self.view,
                status,
                self.steps,
                self.now,
                notices,
                recorded=lambda name: self._records(stored, name),
            )
            manual = self._run_requested()
            filled = self._backfill()
            status.pop("waitingForGroup", None)  # set again while a run still waits
            scheduled = self._schedule()
            # An overdue run is ended once a write has recorded it (rule 3).
            self.record_first |= bool(unended) and all(
                self._records(status, name) for name in unended
            )
            accounting = groups.with_group_skip(scheduled.accounting, self.group_skipped)
        except errors.ApiError as exc:
            # Keep what this reconcile learned, but not its skip accounting: the retry
            # does it again and reports it with the write that records it.
            _restore(status, stored, "skippedRuns")
            _restore(status, stored, "bufferedRun")  # a dropped one is counted again
            _restore(status, stored, "waitingForGroup")
            return self._plan(status=status, notices=tuple(notices), error=exc)
        problem = scheduled.problem or self._stored_problem() or manual or filled.problem
        requeue = _sooner(
            _sooner(scheduled.requeue, filled.requeue),
            start_timeout.requeue_after(self.view.spec, self.view.jobs.active, self.now),
        )
        if self.started:
            # Jobs first: this reconcile created a Job. Its status is written by a
            # follow-up reconcile queued behind every other due run; that one finds the
            # Job (which records the run) and the unchanged stored status (so it reports
            # the notices of this one).
            write = (
                _record_with_the_run(status, stored, observed)
                or _ended_a_run(notices)
                or self.record_first
            )
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
            result=self._result(requeue),
        )

    def _result(self, requeue: timedelta | None) -> Result:
        """When to look again: at once when Replace waits for this write (the follow-up
        replaces), else at ``requeue`` (None: when an event says)."""
        if self.record_first:
            return Result(follow_up=True)
        return Result(requeue_after=requeue.total_seconds()) if requeue else Result()

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
        request = requests.run_request(view.obj)
        if request is None or view.deleting:
            status.pop("pendingRunRequest", None)
            return None
        if isinstance(request, str):
            self.steps.event("Warning", "InvalidRunRequest", request)
            return Problem("InvalidRunRequest", request, stops_schedule=False)
        token = request.token
        name = rules.manual_job_name(view.name, token)
        owned = {objects.name_of(job) for job in view.jobs.owned()}
        if name not in owned:
            started = self._start(
                _Run(_Source.REQUESTED, functools.partial(jobs.build_manual_job, view.obj, request))
            )
            if isinstance(started, _Waits):
                if started.replacing:
                    return None  # the follow-up, or the end of the Job it waits for, replaces
                if status.get("pendingRunRequest") != token:
                    self.steps.event(
                        "Normal",
                        "RunRequestPending",
                        f"run request {token!r} waits: a job is active and concurrencyPolicy "
                        "is Forbid; it starts when the active job finishes",
                    )
                status["pendingRunRequest"] = token
                return None
            if started is not None:
                return dataclasses.replace(started, stops_schedule=False)
        status.pop("pendingRunRequest", None)
        status["lastHandledRunRequest"] = token
        return None

    def _backfill(self) -> _Decided:
        """Start, cancel or advance the requested backfill, and create the Job of its
        next time when it is due and concurrencyPolicy makes room (one per reconcile, in
        order)."""
        view, status, now = self.view, self.status, self.now
        raw = view.annotations.get(BACKFILL_ANNOTATION)
        progress = status.get("backfill")
        running = (progress or {}).get("state") == BackfillState.RUNNING
        if raw is None or view.deleting:
            if running and raw is None:
                self._record_backfill(backfill.cancelled(status["backfill"]), "BackfillCancelled")
            return _Decided()
        try:
            schedule = rules.schedule_of(view.spec)
        except schedules.ScheduleError:
            return _Decided()  # reported by the scheduling step
        request = rules.parse_request(raw)
        if isinstance(request, str):
            return self._backfill_refused(f"{rules.BACKFILL_FIELD}: {request}")
        # The state first: a recorded request was checked when it started, and one that
        # is done needs no schedule times (its cost must not outlive it).
        recorded = backfill.recorded(progress, request)
        if recorded and not running:
            return _Decided()
        if recorded:
            request = backfill.as_recorded(status["backfill"], request)
        problem = None if recorded else rules.count_problem(schedule, request)
        if problem is not None:
            return self._backfill_refused(problem)
        times = rules.times_of(schedule, request)
        if not recorded:
            if running:
                self._record_backfill(backfill.cancelled(status["backfill"]), "BackfillCancelled")
            self._record_backfill(backfill.start(request, times), "BackfillStarted")
        if status["backfill"].get("state") != BackfillState.RUNNING:
            return _Decided()
        ran = runs.ran(view.name, view.jobs, {}) | runs.went_missing(
            view.name, view.stored, view.missing
        )
        progress = status["backfill"] = backfill.advanced(status["backfill"], times, ran)
        upcoming = time_at(progress, "next")
        if upcoming is None:
            self.steps.event("Normal", "BackfillComplete", _backfill_message(status))
            return _Decided()
        if upcoming > now:
            return _Decided(upcoming - now + timedelta(milliseconds=100))
        started = self._start(
            _Run(
                _Source.BACKFILL,
                functools.partial(_backfill_job, view.obj, upcoming, schedule.zone, request.token),
            )
        )
        if isinstance(started, _Waits):
            return _Decided()  # the active Job's end reconciles again
        return _Decided(
            SOON, None if started is None else dataclasses.replace(started, stops_schedule=False)
        )

    def _record_backfill(self, progress: Backfill, reason: str) -> None:
        """Record ``progress`` as ``status.backfill`` and announce it (``reason``)."""
        self.status["backfill"] = progress
        self.steps.event("Normal", reason, _backfill_message(self.status))

    def _backfill_refused(self, problem: str) -> _Decided:
        """An unusable backfill request's Warning event and problem (nothing to requeue)."""
        self.steps.event("Warning", "InvalidBackfill", problem)
        return _Decided(problem=Problem("InvalidBackfill", problem, stops_schedule=False))

    # --- due runs -------------------------------------------------------------------

    def _schedule(self) -> _Decided:
        """Steps 5-9: maybe create the due Job; when to look again, any problem, and the
        skipped runs this reconcile accounted for.

        Sets ``status.nextScheduleTime``, or removes it when no scheduled run will start.
        """
        view, status, now = self.view, self.status, self.now
        conditions.set_next_schedule_time(status, None)
        since = runs.observe_schedule(status, view.spec, created=view.created or now, now=now)
        if view.deleting:
            return _Decided()
        # Suspended or paused: nothing starts, but the times that come are accounted for.
        holding = view.spec.suspend or conditions.paused(view.spec, status)
        try:
            window = limits.bounds(status, view)  # the run limit's count, then the window
        except (schedules.ScheduleError, rules.WindowError) as exc:
            timing: due.Timing | due.Unschedulable | None = due.refusal(exc, holding)
        else:
            timing = due.timing_of(
                view, status, now=now, since=since, holding=holding, walks=self.walks, window=window
            )
        if timing is None:
            return _Decided()
        if isinstance(timing, due.Unschedulable):
            self.steps.event("Warning", timing.event_reason, timing.problem.message)
            return _Decided(problem=None if holding else timing.problem)
        due_runs = due.due_runs_of(view, status, timing, now=now, since=since, holding=holding)
        self._record_due_runs(due_runs)
        if holding:
            return _Decided(due_runs.requeue, accounting=due_runs.accounting)
        return self._start_due_run(timing, due_runs)

    def _record_due_runs(self, due_runs: due.DueRuns) -> None:
        """Record the buffered time (announcing a new one) and the skipped runs."""
        status, buffering = self.status, due_runs.buffering
        if buffering.buffered is None and time_at(status, "bufferedRun") is not None:
            status.pop("bufferedRun")
        elif buffering.buffered is not None:
            status["bufferedRun"] = stamp(buffering.buffered)
        if buffering.newly_buffered:
            assert buffering.buffered is not None
            self.steps.event(
                "Normal",
                "RunBuffered",
                f"the run scheduled at {rfc3339(buffering.buffered)} waits: a job is active "
                "and concurrencyPolicy is BufferOne; it starts when no job is active",
            )
        if due_runs.skipped_runs is not None:
            status["skippedRuns"] = due_runs.skipped_runs

    def _start_due_run(self, timing: due.Timing, due_runs: due.DueRuns) -> _Decided:
        """Record the next time and start the due run, if any."""
        walked, offset, accounting = timing.due, timing.offset, due_runs.accounting
        conditions.set_next_schedule_time(
            self.status, limits.next_run(timing.window, timing.schedule, walked, offset)
        )
        target = due_runs.buffering.run_now
        if target is None:
            if walked.scheduled is None and walked.next_time is None:
                field = "spec.schedule" if self.view.spec.schedule is not None else "spec.schedules"
                message = f"{field}: {timing.schedule.expression!r} never fires; fix the schedule"
                self.steps.event("Warning", "InvalidSchedule", message)
                return _Decided(problem=Problem("InvalidSchedule", message), accounting=accounting)
            return _Decided(due_runs.requeue, accounting=accounting)
        if walked.too_many_missed and len(timing.queue) == 1:  # Latest; All counts CatchUpBound
            self.steps.event(
                "Warning",
                "TooManyMissedTimes",
                f"too many missed start times ({walked.missed}+): running only the most recent, "
                f"{rfc3339(walked.scheduled or target)}; set or check spec.startingDeadlineSeconds",
            )
        late = target not in timing.queue  # the buffered run: its lateness is no creation skew
        walk_behind = accounting is not None and accounting.more
        problem = self._run(target, timing.schedule.zone, None if late else offset, walk_behind)
        requeue = due_runs.requeue if problem is None or problem.retry else None
        return _Decided(requeue, problem, accounting)

    def _run(
        self, scheduled: datetime, zone: ZoneInfo, offset: timedelta | None, walk_behind: bool
    ) -> Problem | None:
        """Create the Job of ``scheduled`` unless it exists; ``offset`` is the stagger
        (None: the run is late by design, a buffered one, and feeds no skew);
        ``walk_behind``: the skip accounting has older times left to walk."""
        status = self.status
        name = jobs.job_name(self.view.name, scheduled)
        active = status.get("active") or []
        if time_at(status, "lastScheduleTime") == scheduled:
            return None  # this run exists already
        if any(ref.get("name") == name for ref in active):
            status["lastScheduleTime"] = stamp(scheduled)  # created, never recorded (a crash)
            return None
        run = _Run(
            _Source.SCHEDULED,
            functools.partial(jobs.build_job, self.view.obj, scheduled, zone),
            scheduled=scheduled,
            due_at=None if offset is None else scheduled + offset,
            walk_behind=walk_behind,
        )
        started = self._start(run)
        if not isinstance(started, _Waits):
            return started
        if not started.replacing:
            self.steps.event(
                "Normal",
                "JobAlreadyActive",
                "Not starting job because prior execution is running and concurrency policy is "
                "Forbid",
            )
        return None  # under Replace, the follow-up or the end of the Job it waits for replaces

    # --- concurrency, then start: the stages every source's run passes ---------------

    def _start(self, run: _Run) -> Problem | _Waits | None:
        """Start ``run``, past its source's admission: concurrencyPolicy makes room (or
        says wait), then its Job is created (the group's slot is claimed with the create).
        The one way any run begins, whatever its source."""
        if not self._make_room():
            return _Waits(replacing=self._replacing())
        return self._create(run)

    def _make_room(self) -> bool:
        """Apply concurrencyPolicy before a new run: False if it says wait.

        Replace deletes only Jobs whose run the stored status records (docs/
        cronjob-semantics.md, "The rule", 3): a Job is the only evidence of a run its
        stored status does not record, and a retry or follow-up that no longer finds it
        would run that run again. When the status this reconcile computed records it,
        the reconcile writes that status and its follow-up replaces (``record_first``);
        when none can yet (a time a running backfill has still to reach), the new run
        waits for that Job, as under Forbid. A failed delete raises: the reconcile writes
        what it learned, then fails."""
        active = self.status.get("active") or []
        room = concurrency.room_for(self.view.spec.concurrency_policy, active)
        if not all(self._records(self.view.stored, ref["name"]) for ref in room.replace):
            self.record_first |= all(
                self._records(self.status, ref["name"]) for ref in room.replace
            )
            return False
        for ref in room.replace:
            outcome = self.steps.perform(Delete(ref["name"], ref.get("uid"), replace=True))
            if isinstance(outcome, Rejected):
                raise outcome.error
            active.remove(ref)
            self.replaced.add(ref["name"])
        return not room.wait

    def _replacing(self) -> bool:
        return self.view.spec.concurrency_policy is ConcurrencyPolicy.REPLACE

    def _records(self, status: Mapping[str, Any], job_name: str) -> bool:
        """Whether ``status`` records the run of this CronJob's Job ``job_name``: never
        the stored status for a Job this reconcile created, nor any status for a time of
        a requested backfill that status has not started (the Job may be its step, or
        one it must count done)."""
        view = self.view
        if status is view.stored and job_name in self.created:
            return False
        moment = jobs.scheduled_time(view.name, job_name)
        if moment is not None and self._unstarted_backfill_covers(status, moment):
            return False
        unhandled = requests.unrecorded_manual_job({**view.obj, "status": status})
        return history.records(status, view.name, job_name, unhandled_manual_job=unhandled)

    def _unstarted_backfill_covers(self, status: Mapping[str, Any], moment: datetime) -> bool:
        request = rules.parse_request(self.view.annotations.get(BACKFILL_ANNOTATION))
        if isinstance(request, str) or backfill.recorded(status.get("backfill"), request):
            return False
        return request.start <= moment < request.end

    def _create(self, run: _Run) -> Problem | None:
        """Create ``run``'s Job: a new one holds back the status write (Jobs first) unless
        a run request's; a scheduled run also moves lastScheduleTime."""
        job, scheduled = run.job(), run.scheduled
        name = job["metadata"]["name"]
        job["metadata"]["labels"] = owned_object_labels(
            job["metadata"].get("labels", {}), self.view.obj
        )
        outcome = self.steps.perform(Create(job, due=run.due_at, replaced=frozenset(self.replaced)))
        if isinstance(outcome, Unknown):
            raise outcome.error
        if isinstance(outcome, GroupFull):
            counted = self.status.get("skippedRuns")
            problem = groups.on_full(
                self.status,
                self.view.stored,
                outcome,
                scheduled,
                self.steps,
                walk_behind=run.walk_behind,
            )
            if self.status.get("skippedRuns") != counted:
                self.group_skipped = scheduled  # reported with the rest of the accounting
            return problem
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
            self.created.add(name)
            if run.source is not _Source.REQUESTED:  # a request's write is not held back
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
        # The conditions are the runtime's to set, in a status of any kind.
        condition = condition_setter(
            cast(dict[str, Any], status), generation=generation, now=self.now
        )
        if problem is not None:
            condition("Degraded", True, problem.reason, problem.message)
        else:
            condition("Degraded", False, "AsExpected", "")
        available = conditions.availability(self.view, status, problem)
        if available.available and (halt := limits.stopped(self.view, status, self.now)):
            available = conditions.Availability(False, *halt)
        condition("Available", *available)
        if available.reason == conditions.PAUSED_REASON and not was_paused:
            self.steps.event("Warning", conditions.PAUSED_REASON, available.message)
        count = len(status.get("active") or [])
        if count:
            condition("Progressing", True, "JobsActive", f"{count} active job(s)")
        else:
            condition("Progressing", False, "Idle", "no active jobs")
        status["observedGeneration"] = generation


def _sooner(first: timedelta | None, second: timedelta | None) -> timedelta | None:
    """The sooner of two times to look again (None: not at all)."""
    if first is None or (second is not None and second < first):
        return second
    return first


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


def _ended_a_run(notices: list[history.Notice]) -> bool:
    """Whether this reconcile ended a run by its start timeout: its Job is gone, so only
    this write can count it."""
    return any(notice.reason == start_timeout.REASON for notice in notices)


def _restore(
    status: CronJobStatus,
    stored: Mapping[str, Any],
    key: Literal["skippedRuns", "bufferedRun", "waitingForGroup"],
) -> None:
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


def _backfill_job(
    cronjob: objects.Obj, scheduled: datetime, zone: ZoneInfo, token: str
) -> dict[str, Any]:
    """The Job of a backfill's step: the scheduled time's Job, marked with its token."""
    job = jobs.build_job(cronjob, scheduled, zone)
    job["metadata"].setdefault("annotations", {})[rules.BACKFILL_TOKEN_ANNOTATION] = token
    return job
