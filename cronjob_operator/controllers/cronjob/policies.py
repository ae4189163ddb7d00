"""Which scheduled times run, wait or are skipped: catch-up, BufferOne, skip accounting.

Pure rules, no I/O and no clock (docs/beyond-builtin.md has the user's view); the
reconciler calls them in its scheduling step. Each is opt-in except the accounting, which
only records.

* Catch-up (``spec.catchUpPolicy``): ``Latest`` (unset) runs the newest missed time in
  reach, as the built-in; ``All`` runs every missed time in reach, oldest first, at most
  the newest ``MAX_CATCH_UP`` (``schedule.missed_times``). Either way a time runs at most
  once: its Job is named by it, and ``lastScheduleTime`` (which only moves forward)
  bounds what is due next.
* ``BufferOne``: a time that comes due while a run is active waits in
  ``status.bufferedRun`` (one at most) and starts as soon as no run is active, if its
  deadline has not passed; later times that come meanwhile are skipped (BufferFull).
* Skip accounting: every scheduled time up to ``status.skippedRuns.accountedThrough`` is
  accounted for exactly once: it ran (a Job of its name exists, or it is
  ``lastScheduleTime``), it waits in ``bufferedRun``, or it is counted by reason. A time is
  counted when it can no longer run, so the watermark never passes a time that still may
  (the one Forbid waits on, the ones All still has to run), and the scheduler never runs
  a time at or before the watermark. The walk is bounded (``ACCOUNT_STEP`` times per
  reconcile) and resumes where it stopped, so a long outage costs bounded steps per
  reconcile. The reason is what keeps the time from running when it is counted
  (suspended, paused, Forbid or BufferOne with a run active since before it: a
  :class:`Block`), else DeadlinePassed for a time out of reach, else CatchUpBound (a
  time the catch-up policy does not run). An excluded time (``spec.exclusions``) is
  Excluded whatever else kept it; a time outside ``spec.window`` (or after the run limit
  was reached) is no run and is not walked.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, cast

from cronjob_operator import schedule as schedules
from cronjob_operator.api.batch_v1 import (
    MAX_CATCH_UP,
    CatchUpPolicy,
    ConcurrencyPolicy,
    SkipReason,
)
from cronjob_operator.controllers.cronjob.status import SkippedRuns
from cronjob_operator.controllers.cronjob.view import stamp, time_at
from cronjob_operator.runtime.controllerutil import rfc3339

__all__ = [
    "ACCOUNT_STEP",
    "Accounting",
    "Block",
    "account",
    "blocked_by",
    "due_queue",
    "skip_counted",
    "skipped_message",
    "with_skip",
]

ACCOUNT_STEP: Final = 1000
"""The most scheduled times one reconcile accounts for; more wait for the next one."""


def due_queue(
    policy: CatchUpPolicy,
    schedule: schedules.AnySchedule,
    due: schedules.Due,
    *,
    earliest: datetime,
    now: datetime,
    starting_deadline_seconds: int | None,
    window: schedules.Window | None = None,
) -> tuple[datetime, ...]:
    """The unmet times the catch-up policy still runs, oldest first (the first is the
    one to run now): Latest, the newest in reach; All, every one in reach, bounded;
    without those ``window`` does not let run (outside it, excluded, past the run
    limit)."""
    if due.scheduled is None:
        return ()
    if policy is CatchUpPolicy.LATEST:
        queue: tuple[datetime, ...] = (due.scheduled,)
    else:
        queue = schedules.missed_times(
            schedule,
            earliest=earliest,
            now=now,
            starting_deadline_seconds=starting_deadline_seconds,
            limit=MAX_CATCH_UP,
        )
    return queue if window is None else tuple(t for t in queue if window.runs(t))


@dataclass(frozen=True)
class Block:
    """What keeps due times from starting: ``reason`` counts the times at or after
    ``since`` (None: every time). A run that is active blocks only the times after the
    run's own (a catch-up run for 03:00 does not explain why 01:00 did not run)."""

    reason: SkipReason
    since: datetime | None = None

    def applies(self, moment: datetime) -> bool:
        return self.since is None or moment >= self.since


def blocked_by(
    *, suspended: bool, paused: bool, active_since: datetime | None, policy: ConcurrencyPolicy
) -> Block | None:
    """What keeps a time that is due now from starting, most fundamental first (None:
    nothing). ``active_since``: the time of the oldest active run (None: none is
    active). BufferOne's is BufferFull: while a run is active, any time other than the
    buffered one is skipped."""
    if suspended:
        return Block(SkipReason.SUSPENDED)
    if paused:
        return Block(SkipReason.PAUSED_AFTER_FAILURES)
    if active_since is not None and policy is ConcurrencyPolicy.FORBID:
        return Block(SkipReason.FORBID_WHILE_ACTIVE, active_since)
    if active_since is not None and policy is ConcurrencyPolicy.BUFFER_ONE:
        return Block(SkipReason.BUFFER_FULL, active_since)
    return None


@dataclass(frozen=True)
class Accounting:
    """What one accounting walk found: the counts it added, whether it stopped at its
    step bound with times still to account for (look again soon), and
    ``status.skippedRuns`` as it leaves it (None: unchanged)."""

    skipped: Counter[SkipReason]
    newest_skipped: datetime | None
    more: bool
    skipped_runs: SkippedRuns | None = None


def account(
    skipped_runs: SkippedRuns | None,
    schedule: schedules.AnySchedule,
    *,
    initial: datetime,
    floor: datetime,
    now: datetime,
    latest: datetime | None,
    reach: datetime | None,
    ran: Collection[datetime],
    pending: Collection[datetime],
    block: Block | None,
    window: schedules.Window | None = None,
) -> Accounting:
    """Account for the times in (accountedThrough, now] of ``status.skippedRuns``
    (``skipped_runs``), returning the counts and the field as it is to be recorded.

    Without a watermark yet the walk starts at ``initial`` (``lastScheduleTime``, else the
    creation time: a CronJob from before the accounting counts nothing older); never
    before ``floor`` (``observedSchedule.since``: times before a schedule edit belong to
    the old schedule). ``ran``: the times that ran (their Jobs exist,
    ``lastScheduleTime``) or wait in ``bufferedRun``; ``pending``: the times that may
    still run (the walk stops before the oldest); ``reach``: ``now -
    startingDeadlineSeconds`` (None: no deadline). ``latest``: the newest schedule time at
    or before ``now`` (``Due.latest``); with the watermark at or after it there is nothing
    to walk, which is every reconcile between two times (no walk, no cost). ``window``
    (``spec.window``, the run limit, ``spec.exclusions``): a time before it is passed
    uncounted (the watermark stays a schedule time: ``@every`` counts from it), none after
    it is walked; an excluded time is counted as Excluded.
    """
    if window is not None:
        now = window.through(now)
    through = time_at(skipped_runs, "accountedThrough")
    if through is not None and through >= floor and (latest is None or latest <= through):
        return Accounting(Counter(), None, more=False)
    mark = max(initial if through is None else through, floor)
    counts: Counter[SkipReason] = Counter()
    newest: datetime | None = None
    walked = 0
    stopped = False
    for moment in schedules.times_between(schedule, mark, now, limit=ACCOUNT_STEP):
        walked += 1
        if moment in pending:
            stopped = True
            break
        mark = moment
        if moment in ran or (window is not None and not window.contains(moment)):
            continue
        if window is not None and window.excludes(moment):
            reason = SkipReason.EXCLUDED
        elif block is not None and block.applies(moment):
            reason = block.reason
        elif reach is not None and moment <= reach:
            reason = SkipReason.DEADLINE_PASSED
        else:
            reason = SkipReason.CATCH_UP_BOUND
        counts[reason] += 1
        newest = moment
    moved = through is None or mark != through
    return Accounting(
        counts,
        newest,
        more=not stopped and walked == ACCOUNT_STEP,
        skipped_runs=_walked(skipped_runs, mark, counts) if moved else None,
    )


def skip_counted(skipped_runs: SkippedRuns | None, reason: SkipReason) -> SkippedRuns:
    """``status.skippedRuns`` with one more skipped time counted outside the walk (a
    buffered time whose deadline passed)."""
    counted: dict[str, Any] = dict(skipped_runs or {})
    counted[reason.status_key] = int(counted.get(reason.status_key) or 0) + 1
    return _as_skipped_runs(counted)


def _walked(
    skipped_runs: SkippedRuns | None, through: datetime, counts: Counter[SkipReason]
) -> SkippedRuns:
    """``status.skippedRuns`` accounted through ``through``, with ``counts`` added."""
    walked: dict[str, Any] = dict(skipped_runs or {})
    walked["accountedThrough"] = stamp(through)
    for reason, count in counts.items():
        walked[reason.status_key] = int(walked.get(reason.status_key) or 0) + count
    return _as_skipped_runs(walked)


def _as_skipped_runs(counts: dict[str, Any]) -> SkippedRuns:
    """``counts``, keyed by ``SkipReason.status_key`` (each a key of :class:`SkippedRuns`,
    which a unit test holds), as the typed field."""
    return cast(SkippedRuns, counts)


def with_skip(accounting: Accounting, reason: SkipReason, moment: datetime) -> Accounting:
    """``accounting`` with one more skipped time (counted in status by the caller)."""
    skipped = Counter(accounting.skipped)
    skipped[reason] += 1
    newest = accounting.newest_skipped
    return dataclasses.replace(
        accounting,
        skipped=skipped,
        newest_skipped=moment if newest is None or moment > newest else newest,
    )


def skipped_message(accounting: Accounting) -> str:
    """The Warning event's message: how many times were skipped, why, and the newest."""
    counts = accounting.skipped
    total = sum(counts.values())
    reasons = ", ".join(f"{count} {reason.value}" for reason, count in sorted(counts.items()))
    newest = (
        ""
        if accounting.newest_skipped is None
        else f", the newest at {rfc3339(accounting.newest_skipped)}"
    )
    return f"{total} scheduled run(s) skipped ({reasons}){newest}; status.skippedRuns counts them"
