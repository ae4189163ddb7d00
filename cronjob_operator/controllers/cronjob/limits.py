"""Run window, run limit and exclusions: which due times the decision may run.

Pure rules over the spec, the status the decision builds and the Jobs (no I/O, no
clock); ``decide.py`` asks them in its scheduling step, and does nothing new when none of
``spec.window``, ``spec.maxScheduledRuns`` and ``spec.exclusions`` is set.

* ``count_runs``: the run limit's count, ``status.scheduledRuns``. Until the limit is
  used up, every scheduled time after ``countedThrough`` whose Job exists (or that is
  ``lastScheduleTime``) is counted and the watermark moves to the newest, in the same
  status object, so the same status write records both: a time is counted once
  whatever the number of reconciles, restarts or replicas that see its Job. A Job is
  named by its scheduled time, so a create retried after a crash (between the create and
  the status write) is the same Job, found by the next reconcile and counted then: no
  run is lost and none is counted twice.
* ``bounds``: counts the runs, then returns the spec's ``schedule.Window``, closed right
  after the last counted run once the limit is reached (no later time is a run: none
  starts, none is counted as skipped, and nextScheduleTime is unset), and drops a
  BufferOne time waiting in ``status.bufferedRun`` that it no longer lets run (the limit
  was lowered, an exclusion added); ``next_run`` is the next time it lets run.
* ``stopped``: why scheduling stopped for good (``RunLimitReached``, ``WindowEnded``), for
  the Available condition.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from cronjob_operator import schedule as schedules
from cronjob_operator.api import cronjob_rules as rules
from cronjob_operator.api.batch_v1 import CronJobSettings
from cronjob_operator.controllers.cronjob import runs
from cronjob_operator.controllers.cronjob.jobs import JobSets, scheduled_time
from cronjob_operator.controllers.cronjob.status import CronJobStatus, ScheduledRuns
from cronjob_operator.controllers.cronjob.view import CronJobView, created_at, stamp, time_at
from cronjob_operator.runtime import objects
from cronjob_operator.runtime.controllerutil import rfc3339

__all__ = [
    "NEXT_RUN_MEMO_SIZE",
    "RUN_LIMIT_REACHED",
    "WINDOW_ENDED",
    "bounds",
    "count_runs",
    "next_run",
    "stopped",
]

NEXT_RUN_MEMO_SIZE: Final = 256
"""How many next-time walks past excluded times are remembered. An entry keeps its
window: up to about 44 KiB with 366 excluded dates, so at most about 11 MiB in all
(bench/exclusion_walk.py)."""
RUN_LIMIT_REACHED: Final = "RunLimitReached"
WINDOW_ENDED: Final = "WindowEnded"


def _limit(spec: CronJobSettings) -> int | None:
    """``spec.maxScheduledRuns`` when it is usable (one stored past validation is no
    limit: ``bounds`` reports it and nothing is scheduled)."""
    value = spec.max_scheduled_runs
    return value if isinstance(value, int) and value >= 1 else None


def count_runs(
    status: CronJobStatus,
    spec: CronJobSettings,
    cronjob_name: str,
    jobs: JobSets,
    *,
    stored_last: datetime | None,
) -> None:
    """Count the scheduled runs not counted yet into ``status.scheduledRuns`` (removed
    when ``spec.maxScheduledRuns`` is unset). A limit set on a CronJob that ran already
    counts from its stored ``lastScheduleTime`` on (``stored_last``). Once the limit is
    used up the count stands: a later backfill run is not counted, so ``countedThrough``,
    where the schedule ends, stays where the limit was used up (raising the limit counts
    it then)."""
    limit = _limit(spec)
    if limit is None:
        status.pop("scheduledRuns", None)
        return
    recorded = status.get("scheduledRuns")
    counted: ScheduledRuns = recorded.copy() if recorded else {}
    if not recorded and stored_last is not None:
        counted["countedThrough"] = stored_last
    through = time_at(counted, "countedThrough")
    count = int(counted.get("count") or 0)
    times = runs.ran(cronjob_name, jobs, status) if count < limit else ()
    new = sorted(moment for moment in times if through is None or moment > through)
    if len(new) > limit - count:
        # More uncounted runs than the limit has room for (a status write that would
        # have counted one failed): it is used up in the order they were created.
        created = _creation_order(cronjob_name, jobs, status)
        new = sorted(sorted(new, key=created)[: limit - count])
    count += len(new)
    if new:
        counted["countedThrough"] = stamp(new[-1])
    elif through is None:
        counted.pop("countedThrough", None)
    counted["count"] = count
    counted["remaining"] = max(0, limit - count)
    status["scheduledRuns"] = counted


def _creation_order(
    cronjob_name: str, jobs: JobSets, status: Mapping[str, Any]
) -> Callable[[datetime], tuple[datetime, datetime]]:
    """A sort key of scheduled times by when their runs were created: a time whose Job
    the cache holds, by its ``creationTimestamp``; one only ``status.active`` lists (this
    reconcile created it), last; one recorded without a Job (``lastScheduleTime``),
    first; equal ones by the time."""
    first, last = datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC)
    created: dict[datetime, datetime] = {}
    for ref in status.get("active") or ():
        if (moment := scheduled_time(cronjob_name, str(ref.get("name")))) is not None:
            created[moment] = last
    for job in jobs.owned():
        if (moment := scheduled_time(cronjob_name, objects.name_of(job))) is not None:
            created[moment] = created_at(job) or last
    return lambda moment: (created.get(moment, first), moment)


def _limit_reached(spec: CronJobSettings, status: Mapping[str, Any]) -> bool:
    """Whether ``spec.maxScheduledRuns`` runs have been counted."""
    limit = _limit(spec)
    counted = status.get("scheduledRuns") or {}
    return limit is not None and int(counted.get("count") or 0) >= limit


def bounds(status: CronJobStatus, view: CronJobView) -> schedules.Window | None:
    """Count the runs (``count_runs``), then which times may run: the spec's window and
    exclusions, closed after the last counted run once the limit is reached; None when
    nothing bounds them. Raises ``WindowError`` for a window or exclusions stored past
    validation."""
    spec = view.spec
    stored_last = time_at(view.stored, "lastScheduleTime")
    count_runs(status, spec, view.name, view.jobs, stored_last=stored_last)
    window = view.window
    if isinstance(window, Exception):
        raise window
    if _limit_reached(spec, status):
        if window is None:
            zone = schedules.parse_schedule("@daily", spec.time_zone).zone
            window = schedules.Window(zone)
        last = time_at(status.get("scheduledRuns"), "countedThrough")
        window = window.ending_at(last or datetime.min.replace(tzinfo=window.zone))
    buffered = time_at(status, "bufferedRun")
    if window is not None and buffered is not None and not window.runs(buffered):
        status.pop("bufferedRun")  # the spec changed while it waited: it is no run now
    return window


def next_run(
    window: schedules.Window | None,
    schedule: schedules.AnySchedule,
    due: schedules.Due,
    offset: timedelta,
) -> datetime | None:
    """When the next run that the window lets run is due (``offset``: the stagger),
    from the schedule's next time on; None when none will."""
    moment = due.next_time
    if window is not None and moment is not None and not window.runs(moment):
        moment = _first_run_after(window, schedule, moment)
    return None if moment is None else moment + offset


@functools.lru_cache(maxsize=NEXT_RUN_MEMO_SIZE)
def _first_run_after(
    window: schedules.Window, schedule: schedules.AnySchedule, moment: datetime
) -> datetime | None:
    """``window.next_after``, remembered: every reconcile between two times asks the same."""
    return window.next_after(schedule, moment)


def stopped(view: CronJobView, status: Mapping[str, Any], now: datetime) -> tuple[str, str] | None:
    """Why no scheduled run will ever start again (reason, message), or None."""
    spec, window = view.spec, view.window
    if _limit_reached(spec, status):
        counted = status.get("scheduledRuns") or {}
        last = time_at(counted, "countedThrough")
        return (
            RUN_LIMIT_REACHED,
            f"{rules.LIMIT_FIELD}={_limit(spec)} reached ({counted.get('count')} scheduled runs, "
            f"the last at {'<none>' if last is None else rfc3339(last)}): no scheduled run "
            f"starts; raise or remove {rules.LIMIT_FIELD} to resume",
        )
    if not isinstance(window, schedules.Window):
        return None  # none, or one the scheduling step reports
    if window.end is None or not window.ended(now):
        return None
    if status.get("nextScheduleTime"):  # a staggered run of its last time is still due
        return None
    return (
        WINDOW_ENDED,
        f"{rules.WINDOW_FIELD}.end {rfc3339(window.end)} has passed: no scheduled run "
        f"starts; move or remove {rules.WINDOW_FIELD}.end to resume",
    )
