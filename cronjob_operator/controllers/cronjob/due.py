"""What the scheduled times come to at one reconcile, computed: pure, nothing recorded.

``decide.py`` records what these return (the buffered time, the skip accounting, the
Job to create); keeping the computation apart lets the decision read as the rules:
:func:`timing_of` asks the schedule where it stands now (its spec, the stagger, the
walk from the earliest time that may still run), :func:`due_runs_of` what those times
come to (the run to start under concurrencyPolicy, the times skipped, when to look
again). Each reads the view and the status the decision has built so far.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, Final, NamedTuple

from cronjob_operator import schedule as schedules
from cronjob_operator.api import cronjob_rules as rules
from cronjob_operator.api.batch_v1 import MAX_NAME_LENGTH, SkipReason, Unusable
from cronjob_operator.controllers.cronjob import concurrency, conditions, policies, runs
from cronjob_operator.controllers.cronjob.plan import Problem
from cronjob_operator.controllers.cronjob.status import SkippedRuns
from cronjob_operator.controllers.cronjob.view import CronJobView, time_at

__all__ = [
    "SOON",
    "DueRuns",
    "Timing",
    "Unschedulable",
    "Walks",
    "due_runs_of",
    "refusal",
    "timing_of",
]

SOON: Final = timedelta(seconds=1)
"""How soon to look again when catch-up All has more times to run or the accounting more
times to walk."""


class Walks:
    """The schedule walks of one reconcile's decisions, by their arguments.

    The decisions of one reconcile ask the schedule about the same ``now``: a reconcile
    that writes status decides again from the written status (whether its watch echo
    brings anything new, ``reconciler._echo_brings_nothing``), from the same
    ``lastScheduleTime`` as a rule. A walk (the newest due time, the misses, the next
    time: most of a decision's CPU at a due time) is a function of its arguments, so the
    reconcile passes one ``Walks`` to each of its decisions and a walk asked twice is
    done once.
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


class Timing(NamedTuple):
    """Where the schedule stands now: its times walked from the earliest that may run."""

    schedule: schedules.AnySchedule
    offset: timedelta
    """The stagger: a nominal time t is due at t + offset."""
    shifted: datetime
    """Now, less the offset: the moment the schedule is asked about."""
    due: schedules.Due
    queue: tuple[datetime, ...]
    """The unmet times the catch-up policy still runs, oldest first."""
    reach: datetime | None
    """The oldest time the deadline still starts (None: no deadline)."""
    window: schedules.Window | None
    """Which times may run (``limits.bounds``: the run window, run limit and exclusions;
    None: every time)."""


class Unschedulable(NamedTuple):
    """Why the spec cannot be scheduled: the Warning event's reason, and the problem."""

    event_reason: str
    """The Warning event's reason (NameTooLong is reported as FailedCreate)."""
    problem: Problem
    """Degraded's reason and message; not reported while the CronJob is suspended or
    paused (the event is: a stagger the schedule cannot take)."""


class DueRuns(NamedTuple):
    """What the due times come to, before it is recorded."""

    buffering: concurrency.Buffering
    """The run to start now, and the buffered time to keep (BufferOne)."""
    accounting: policies.Accounting
    """The times skipped, reported with the status write that records them."""
    skipped_runs: SkippedRuns | None
    """``status.skippedRuns`` to record (None: unchanged)."""
    requeue: timedelta | None
    """When to look again (None: only when something changes)."""


def timing_of(
    view: CronJobView,
    status: Mapping[str, Any],
    *,
    now: datetime,
    since: datetime,
    holding: bool,
    walks: Walks,
    window: schedules.Window | None,
) -> Timing | Unschedulable | None:
    """Where the schedule stands at ``now`` (``since``: the schedule's last edit) for the
    times ``window`` lets run; or why the spec cannot be scheduled (None: a schedule
    error of a CronJob ``holding``, which is reported once it runs again)."""
    spec = view.spec
    try:
        schedule = rules.schedule_of(spec)
    except schedules.ScheduleError as exc:
        return refusal(exc, holding)
    if len(view.name) > MAX_NAME_LENGTH and not holding:  # stored past validation
        message = (
            f"metadata.name: {len(view.name)} characters, at most {MAX_NAME_LENGTH} leave "
            "room for the Job name suffix (Job names must fit 63); recreate with a shorter name"
        )
        return Unschedulable("FailedCreate", Problem("NameTooLong", message))
    offset = _stagger_of(view, schedule)
    if isinstance(offset, Unschedulable):
        return offset
    # Stagger: a nominal time t is due at t + offset, so the schedule is asked about
    # now - offset; the deadline then counts from the staggered time. Never a run due
    # before the last edit of the schedule or time zone (observedSchedule.since), nor
    # one the skip accounting has counted (skippedRuns.accountedThrough).
    shifted = now - offset
    earliest = max(time_at(status, "lastScheduleTime") or view.created or now, since) - offset
    accounted = time_at(status.get("skippedRuns"), "accountedThrough")
    if accounted is not None and accounted > earliest:
        earliest = accounted
    deadline = spec.starting_deadline_seconds
    if deadline is not None and deadline < 0:  # stored past validation (minimum 0)
        message = (
            f"spec.startingDeadlineSeconds: {deadline} is negative, so no time could ever "
            "start; set 0 or more, or remove the field (no deadline)"
        )
        return Unschedulable("InvalidDeadline", Problem("InvalidDeadline", message))
    due = walks.most_recent_due(
        schedule, earliest=earliest, now=shifted, starting_deadline_seconds=deadline
    )
    queue = policies.due_queue(
        spec.catch_up_policy,
        schedule,
        due,
        earliest=earliest,
        now=shifted,
        starting_deadline_seconds=deadline,
        window=window,
    )
    reach = schedules.reach_of(shifted, deadline)
    return Timing(schedule, offset, shifted, due, queue, reach, window)


def refusal(
    error: schedules.ScheduleError | rules.WindowError, holding: bool
) -> Unschedulable | None:
    """Why a spec whose schedule, window or exclusions cannot be read is not scheduled
    (None while the CronJob is ``holding``: reported once it runs again)."""
    return None if holding else Unschedulable(error.reason, Problem(error.reason, str(error)))


def _stagger_of(view: CronJobView, schedule: schedules.AnySchedule) -> timedelta | Unschedulable:
    """The CronJob's stagger offset, or why its stored staggerSeconds cannot be used."""
    seconds = view.spec.stagger_seconds
    if seconds == 0:
        return timedelta(0)
    if isinstance(seconds, Unusable):
        return _stagger_refused(seconds.value, "must be a whole number of seconds")
    detail = rules.stagger_problem(schedule, seconds)
    if detail is not None:
        return _stagger_refused(seconds, detail)
    return rules.stagger_offset(view.namespace, view.name, seconds)


def _stagger_refused(stored: object, detail: str) -> Unschedulable:
    message = f"{rules.STAGGER_FIELD}: {stored!r}: {detail}"
    return Unschedulable("InvalidStagger", Problem("InvalidStagger", message))


def due_runs_of(
    view: CronJobView,
    status: Mapping[str, Any],
    timing: Timing,
    *,
    now: datetime,
    since: datetime,
    holding: bool,
) -> DueRuns:
    """What the due times of ``timing`` come to: the run to start, the buffered time, the
    skip accounting and when to look again."""
    spec = view.spec
    # The stored lastScheduleTime ran too: its Job may be gone and this reconcile's
    # lastScheduleTime moved past it (a time must not be counted skipped after it ran).
    ran = runs.ran(view.name, view.jobs, status)
    stored_last = time_at(view.stored, "lastScheduleTime")
    if stored_last is not None:
        ran.add(stored_last)
    buffering = concurrency.buffer(
        spec.concurrency_policy,
        time_at(status, "bufferedRun"),
        running=bool(status.get("active")),
        queue=timing.queue,
        ran=ran,
        reach=timing.reach,
        holding=holding,
    )
    block = policies.blocked_by(
        suspended=spec.suspend,
        paused=conditions.paused(spec, status),
        active_since=runs.active_since(view.name, status, view.job_created),
        policy=spec.concurrency_policy,
    )
    recorded = None  # status.skippedRuns as this decision leaves it (None: unchanged)
    if buffering.dropped is not None:
        recorded = policies.skip_counted(status.get("skippedRuns"), SkipReason.DEADLINE_PASSED)
    stored_last = time_at(view.stored, "lastScheduleTime")
    accounting = policies.account(
        status.get("skippedRuns") if recorded is None else recorded,
        timing.schedule,
        # No watermark yet (an older operator's CronJob): nothing before the stored
        # lastScheduleTime counts (a run whose Job is gone cannot be told from a skip).
        initial=max(stored_last or view.created or now, since) - timing.offset,
        floor=since - timing.offset,
        now=timing.shifted,
        latest=timing.due.latest,
        reach=timing.reach,
        ran=ran if buffering.buffered is None else {*ran, buffering.buffered},
        pending=buffering.may_run,
        block=block,
        window=timing.window,
    )
    if accounting.skipped_runs is not None:
        recorded = accounting.skipped_runs
    if buffering.dropped is not None:  # reported with the rest
        accounting = policies.with_skip(accounting, SkipReason.DEADLINE_PASSED, buffering.dropped)
    requeue = schedules.requeue_after(timing.due, timing.shifted)
    if accounting.more or (len(timing.queue) > 1 and block is None):
        # More times to account for, or catch-up All has more to run and nothing
        # stops them (an active run under Forbid reconciles again when it finishes).
        requeue = SOON
    return DueRuns(buffering, accounting, recorded, requeue)
