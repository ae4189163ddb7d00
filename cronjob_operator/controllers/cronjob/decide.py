"""The reconcile's decision: ``decide(view, now, outcomes) -> Plan``, pure, no I/O (the
steps whose outcome it needs are performed by the reconciler's ``perform``, ``plan.py``).

The order of the rules is the built-in controller's (docs/cronjob-semantics.md,
"Reconcile, in order") with the additions of docs/beyond-builtin.md; each rule lives in
its concept's module and this one sequences the stages of a run:

1. history (``history.py``): bring status in line with the Jobs (``lastScheduleTime``
   first, so a run whose Job exists is recorded before anything else is decided), count
   failures, lift a failure pause on a new generation, prune what the stored status has
   recorded; then end each run none of whose Pods started in time (``start_timeout.py``),
   before anything starts, so its end makes room;
2. sources (``sources.py``), in order: a run request, a backfill's next time (both
   before the suspend and pause checks), the scheduled time due now; each admits its run
   by its own rules (the window, exclusions, run limit, suspend, failure pause and
   deadline are the schedule's) and records what is its own (a pending request, a
   backfill's progress, the buffered time and skipped runs);
3. start (``start.py``), the one way any admitted run begins: concurrencyPolicy's room
   (``concurrency.py``: wait, or delete what Replace replaces once status records it),
   then the create, the group's slot claimed with it;
4. conditions and next time (``conditions.py``).

The rule modules return what they decide (named results: ``concurrency.Room``,
``concurrency.Buffering``, ``policies.Accounting``, ``due.Timing``, a backfill's new
progress); the stages perform the steps and record the results in the status, which is
typed (``status.CronJobStatus``).

Jobs first: a decision that creates a Job returns ``follow_up`` without writing status
(unless it holds what the follow-up cannot learn again: ``_record_with_the_run``, a run
ended by its start timeout, a run whose Job its own Replace deleted), so
under a burst every due Job is created before any status write. Notices are reported
only with the write that records them. On an API error the Plan writes what was learned
(but not the skip accounting, which the retry does again) and then raises.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, Literal, cast

from cronjob_operator.api import cronjob_rules as rules
from cronjob_operator.controllers.cronjob import (
    conditions,
    groups,
    history,
    limits,
    requests,
    start_timeout,
)
from cronjob_operator.controllers.cronjob.due import Walks
from cronjob_operator.controllers.cronjob.plan import (
    Outcome,
    Pending,
    Perform,
    Plan,
    Problem,
    Steps,
)
from cronjob_operator.controllers.cronjob.sources import Sources
from cronjob_operator.controllers.cronjob.start import Starter
from cronjob_operator.controllers.cronjob.status import CronJobStatus
from cronjob_operator.controllers.cronjob.view import CronJobView, api_status
from cronjob_operator.runtime import errors, objects
from cronjob_operator.runtime.controller import Result
from cronjob_operator.runtime.controllerutil import condition_setter, find_condition

__all__ = ["decide"]


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

    __slots__ = ("now", "sources", "starter", "status", "steps", "view")

    def __init__(self, view: CronJobView, now: datetime, steps: Steps, walks: Walks) -> None:
        self.view = view
        self.now = now
        self.steps = steps
        self.status: CronJobStatus = objects.thaw(view.stored)
        self.starter = Starter(view, self.status, steps)
        self.sources = Sources(view, self.status, steps, self.starter, now, walks)

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
                recorded=lambda name: self.starter.records(stored, name),
            )
            manual = self.sources.requested()
            filled = self.sources.backfill()
            status.pop("waitingForGroup", None)  # set again while a run still waits
            scheduled = self.sources.scheduled()
            # An overdue run is ended once a write has recorded it (rule 3).
            self.starter.record_first |= bool(unended) and all(
                self.starter.records(status, name) for name in unended
            )
            accounting = groups.with_group_skip(scheduled.accounting, self.starter.group_skipped)
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
        if self.starter.started:
            # Jobs first: this reconcile created a Job. Its status is written by a
            # follow-up reconcile queued behind every other due run; that one finds the
            # Job (which records the run) and the unchanged stored status (so it reports
            # the notices of this one).
            write = (
                _record_with_the_run(status, stored, observed)
                or _ended_a_run(notices)
                or self.starter.record_first
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
        if self.starter.record_first:
            return Result(follow_up=True)
        return Result(requeue_after=requeue.total_seconds()) if requeue else Result()

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
