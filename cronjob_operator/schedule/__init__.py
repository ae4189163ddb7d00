"""Cron schedules for CronJobs: parse, validate, and decide which run is due.

This is the pure time logic of the CronJob controller: no I/O and no wall clock (every
function takes ``now``). The reconciler calls :func:`parse_schedule` and
:func:`most_recent_due` (steps 6-7 of the reconcile) and :func:`requeue_after` (step 11);
the admission webhook calls :func:`validate_schedule` and :func:`validate_time_zone`;
the conversion webhook expands macros with :data:`MACROS`.

The rules in short: ``spec.schedule`` is accepted exactly when the built-in ``batch/v1``
CronJob accepts it (robfig/cron v3's ``ParseStandard``, its quirks included), and the
messages for what it refuses name the field and the fix. Schedule times are wall-clock
times in ``spec.timeZone`` (UTC when unset); a time skipped by spring forward does not
run that day, and a time repeated by fall back runs once unless the schedule runs every
hour. ``@every <d>`` is a constant delay anchored at the last schedule time. Missed times
are counted up to ``MAX_MISSED + 1``, at a cost that does not grow with the downtime.

This module is the facade: the names below are the package's public surface (a test pins
them), and the private modules hold one concept each, with the details in their
docstrings:

* ``_errors``: the field names, :class:`ScheduleError` and the shape of every message;
* ``_duration``: Go's ``time.ParseDuration``, for ``@every``;
* ``_grammar``: the cron grammar and its accept set, the macro table, and the canonical
  expression croniter evaluates;
* ``_zones``: which time zone names are usable, and wall-clock times as instants (DST);
* ``_times``: :class:`Schedule`, the schedule times walked through DST transitions, and
  :func:`parse_schedule`;
* ``_due``: :func:`most_recent_due` (the run due now, missed times, the next time) and
  :func:`requeue_after`;
* ``_catchup``: every missed time in reach (for ``catchUpPolicy: All``) and the bounded
  walk that accounts for skipped runs;
* ``_union``: :class:`ScheduleUnion` for ``spec.schedules`` (:func:`parse_schedules`),
  and :func:`most_recent_due`, :func:`missed_times` and :func:`times_between` over one
  schedule or a union;
* ``_window``: :class:`Window`, which of a schedule's times run (``spec.window``,
  ``spec.exclusions``).

Each imports only those above it in this list; nothing here imports the rest of the
operator.
"""

from cronjob_operator.schedule._due import MAX_MISSED, Due, reach_of, requeue_after
from cronjob_operator.schedule._errors import (
    SCHEDULE_FIELD,
    TIME_ZONE_FIELD,
    Reason,
    ScheduleError,
)
from cronjob_operator.schedule._grammar import MACROS, validate_schedule
from cronjob_operator.schedule._times import Schedule, parse_schedule
from cronjob_operator.schedule._union import (
    SCHEDULES_FIELD,
    AnySchedule,
    ScheduleUnion,
    missed_times,
    most_recent_due,
    parse_schedules,
    times_between,
)
from cronjob_operator.schedule._window import Window
from cronjob_operator.schedule._zones import validate_time_zone

__all__ = [
    "MACROS",
    "MAX_MISSED",
    "SCHEDULES_FIELD",
    "SCHEDULE_FIELD",
    "TIME_ZONE_FIELD",
    "AnySchedule",
    "Due",
    "Reason",
    "Schedule",
    "ScheduleError",
    "ScheduleUnion",
    "Window",
    "missed_times",
    "most_recent_due",
    "parse_schedule",
    "parse_schedules",
    "reach_of",
    "requeue_after",
    "times_between",
    "validate_schedule",
    "validate_time_zone",
]
