"""The rules a CronJob must obey, beside its API types: what the webhook refuses, the
plugin checks and the controller applies, with no I/O and no clock.

One place, below all three users: the admission webhook (``webhooks/cronjob.py``) and the
kubectl plugin (``plugin.py``) import these rules without loading the controllers, the
manager, prometheus_client or pydantic (the constants they need are in
``batch_v1_constants``), and the CronJob controller (``controllers/cronjob/``)
imports the same ones. By concept:

* Job times: a scheduled Job is named by its time in Unix seconds, so only
  [``FIRST_JOB_TIME``, ``END_OF_JOB_TIMES``) can be run; a run request's Job is
  ``manual_job_name`` (one Job per token).
* Run requests: ``token_problem`` (``TOKEN_FIELD``), the token's length bound.
* Backfill requests (docs/beyond-builtin.md, 10): ``parse_request`` reads the annotation
  ``BACKFILL_ANNOTATION`` (at most ``MAX_REQUEST_LENGTH`` characters), ``times_of`` walks
  its window once and remembers it (the last ``TIMES_MEMO_SIZE`` requests),
  ``request_problem``/``count_problem`` refuse more than ``MAX_BACKFILL`` times. The
  progress of a running backfill is the controller's (``controllers/cronjob/backfill.py``).
* Stagger: ``stagger_offset``, a fixed offset in ``[0, staggerSeconds]`` from a hash of
  the CronJob's namespace and name (stable across restarts, replicas and a re-create);
  ``stagger_problem`` refuses a stagger not below the schedule's shortest gap.
* The schedule of a spec (``parse_spec_schedule``), the failure pause's field
  (``PAUSE_FIELD``) and the history limits' bound (``MAX_HISTORY_LIMIT``).
* Run window, run limit and exclusions (docs/beyond-builtin.md): ``window_problems``
  lists what is wrong with ``spec.window``, ``spec.maxScheduledRuns`` and
  ``spec.exclusions`` by field, ``parse_spec_window`` reads
  them as a ``schedule.Window`` (None when neither is set: nothing changes).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import itertools
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any, Final
from zoneinfo import ZoneInfo

from cronjob_operator import schedule as schedules
from cronjob_operator.api.batch_v1_constants import (
    BACKFILL_ANNOTATION,
    MAX_BACKFILL,
    MAX_EXCLUDED_DATES,
    MAX_RUN_START_TIMEOUT_SECONDS,
    MAX_RUN_TOKEN_LENGTH,
    MAX_SCHEDULE_LENGTH,
    MAX_SCHEDULES,
    MAX_STAGGER_SECONDS,
    MIN_RUN_START_TIMEOUT_SECONDS,
    RUN_ANNOTATION,
)
from cronjob_operator.api.batch_v1_settings import CronJobSettings, Unusable, settings_of
from cronjob_operator.runtime.controllerutil import rfc3339

__all__ = [
    "BACKFILL_FIELD",
    "BACKFILL_TOKEN_ANNOTATION",
    "END_OF_JOB_TIMES",
    "EXCLUSIONS_FIELD",
    "FIRST_JOB_TIME",
    "GAP_SCAN_LIMIT",
    "HISTORY_LIMITS",
    "INSTANTIATE_ANNOTATION",
    "JOB_TIME_DIGITS",
    "LIMIT_FIELD",
    "MAX_HISTORY_LIMIT",
    "MAX_REQUEST_LENGTH",
    "PAUSE_FIELD",
    "SCHEDULE_TOO_LONG",
    "STAGGER_FIELD",
    "START_TIMEOUT_FIELD",
    "TIMES_MEMO_SIZE",
    "TOKEN_FIELD",
    "WINDOW_FIELD",
    "Request",
    "WindowError",
    "count_problem",
    "manual_job_name",
    "parse_request",
    "parse_spec_schedule",
    "parse_spec_window",
    "request_problem",
    "schedule_of",
    "shortest_gap",
    "stagger_offset",
    "stagger_problem",
    "start_timeout_problem",
    "times_of",
    "token_problem",
    "window_of",
    "window_problems",
]

# --- Job times and names -----------------------------------------------------------

INSTANTIATE_ANNOTATION: Final = "cronjob.kubernetes.io/instantiate"
"""On a manual Job: ``manual``, as ``kubectl create job --from=cronjob/x`` sets it."""

_NAME_HASH_CHARS: Final = 9  # "-m" + 9 = 11 characters, as "-<unix seconds>"

JOB_TIME_DIGITS: Final = 10
"""The most digits of a scheduled Job name's suffix: a 52-character CronJob name, ``-``
and 10 digits fit the 63 of a Job name (whose pods' label must fit too)."""
FIRST_JOB_TIME: Final = datetime(1970, 1, 1, tzinfo=UTC)
"""The earliest scheduled time a Job name can carry (Unix second 0)."""
END_OF_JOB_TIMES: Final = FIRST_JOB_TIME + timedelta(seconds=10**JOB_TIME_DIGITS)
"""The first time a Job name cannot carry (2286-11-20T17:46:40Z)."""


def manual_job_name(cronjob_name: str, token: str) -> str:
    """``<cronjob>-m<9 base32 characters of sha256(token)>``: fits 63 as a scheduled name
    does, and never equals one (a scheduled suffix is all digits)."""
    digest = hashlib.sha256(token.encode()).digest()
    encoded = base64.b32encode(digest).decode().lower()
    return f"{cronjob_name}-m{encoded[:_NAME_HASH_CHARS]}"


# --- run requests, the pause, history limits, the schedule of a spec -----------------

TOKEN_FIELD: Final = f"metadata.annotations[{RUN_ANNOTATION}]"

PAUSE_FIELD: Final = "spec.failurePolicy.pauseAfterConsecutiveFailures"

MAX_HISTORY_LIMIT: Final = 1000
"""The most finished Jobs of each kind a CronJob keeps: each one kept is read by every
reconcile of its CronJob and held in the Job cache, so a tenant's limit must not buy an
unbounded share of both (the built-in has no bound)."""
HISTORY_LIMITS: Final = ("successfulJobsHistoryLimit", "failedJobsHistoryLimit")


def token_problem(token: str) -> str | None:
    """Why ``token`` is not an acceptable run request token (None if it is); the message
    names the annotation (the field) and the fix."""
    if len(token) > MAX_RUN_TOKEN_LENGTH:
        return (
            f"{TOKEN_FIELD}: the run request token is {len(token)} characters, at most "
            f"{MAX_RUN_TOKEN_LENGTH} are allowed; use a shorter token such as the current time"
        )
    return None


SCHEDULE_TOO_LONG: Final = (
    f"must be at most {MAX_SCHEDULE_LENGTH} characters (five short cron fields)"
)
WINDOW_FIELD: Final = "spec.window"
EXCLUSIONS_FIELD: Final = "spec.exclusions"
LIMIT_FIELD: Final = "spec.maxScheduledRuns"


_QUOTED_VALUE: Final = re.compile(r'[^"]*"(?:[^"\\]|\\.)*": (.*)', re.DOTALL)
"""A schedule message, ``<field>: "<value>": <detail>``: its detail."""


class WindowError(ValueError):
    """A stored ``spec.window`` or ``spec.exclusions`` the controller cannot use; the
    message names the field and the value."""

    reason: Final = "InvalidWindow"

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def window_problems(spec: Mapping[str, Any]) -> list[tuple[str, Any, str]]:
    """Every problem of ``spec.window``, ``spec.maxScheduledRuns`` and
    ``spec.exclusions``: (field, value, detail)."""
    problems: list[tuple[str, Any, str]] = []
    limit = spec.get("maxScheduledRuns")
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        problems.append(
            (LIMIT_FIELD, limit, "must be a whole number of at least 1, or unset for no limit")
        )
    window = spec.get("window")
    if window is not None and not isinstance(window, Mapping):
        problems.append((WINDOW_FIELD, window, "must be an object with start and/or end"))
        window = None
    bounds: dict[str, datetime] = {}
    for key in ("start", "end"):
        value = (window or {}).get(key)
        if value is None:
            continue
        moment = _time(value)
        if moment is None:
            problems.append(
                (
                    f"{WINDOW_FIELD}.{key}",
                    value,
                    "must be an RFC 3339 time such as 2026-01-01T00:00:00Z",
                )
            )
        else:
            bounds[key] = moment
    if len(bounds) == 2 and bounds["start"] >= bounds["end"]:
        problems.append(
            (f"{WINDOW_FIELD}.end", (window or {}).get("end"), "must be after spec.window.start")
        )
    exclusions = spec.get("exclusions")
    if exclusions is None:
        return problems
    if not isinstance(exclusions, Mapping):
        return [
            *problems,
            (EXCLUSIONS_FIELD, exclusions, "must be an object with dates and/or schedules"),
        ]
    dates, dates_problems = _exclusion_list(exclusions, "dates", MAX_EXCLUDED_DATES)
    expressions, schedules_problems = _exclusion_list(exclusions, "schedules", MAX_SCHEDULES)
    problems += dates_problems + schedules_problems
    for index, value in enumerate(dates):
        if _date(value) is None:
            problems.append(
                (f"{EXCLUSIONS_FIELD}.dates[{index}]", value, "must be a calendar date YYYY-MM-DD")
            )
    for index, expression in enumerate(expressions):
        if isinstance(expression, str) and len(expression) > MAX_SCHEDULE_LENGTH:
            shown = f"{expression[:40]}..."
            problems.append((f"{EXCLUSIONS_FIELD}.schedules[{index}]", shown, SCHEDULE_TOO_LONG))
            continue
        try:
            _exclusion_schedule(index, expression, spec.get("timeZone"))
        except schedules.ScheduleError as exc:
            found = _QUOTED_VALUE.match(str(exc))
            problems.append((exc.field, expression, found.group(1) if found else str(exc)))
    return problems


def _exclusion_list(
    exclusions: Mapping[str, Any], key: str, most: int
) -> tuple[Sequence[Any], list[tuple[str, Any, str]]]:
    """``spec.exclusions.<key>`` to check entry by entry; or nothing, with its problem,
    when it is no list or lists more than ``most`` (refused before any entry is parsed:
    each exclusion schedule is asked about every scheduled time walked)."""
    value = exclusions.get(key)
    field = f"{EXCLUSIONS_FIELD}.{key}"
    if value is None:
        return (), []
    if not isinstance(value, list | tuple):
        return (), [(field, value, f"must be a list of {key}")]
    if len(value) > most:
        return (), [(field, f"<{len(value)} {key}>", f"must list at most {most} {key}")]
    return value, []


def window_of(settings: CronJobSettings) -> schedules.Window | None:
    """:func:`parse_spec_window` of the typed spec (the controller's)."""
    limit = settings.max_scheduled_runs
    return parse_spec_window(
        {
            "window": settings.window,
            "exclusions": settings.exclusions,
            "maxScheduledRuns": limit.value if isinstance(limit, Unusable) else limit,
            "timeZone": settings.time_zone,
        }
    )


def parse_spec_window(spec: Mapping[str, Any]) -> schedules.Window | None:
    """``spec.window`` and ``spec.exclusions`` in ``spec.timeZone``; None when neither is
    set. Raises ``WindowError`` naming the field for a value of them or of
    ``spec.maxScheduledRuns`` stored past validation (``ScheduleError`` for the zone)."""
    window, exclusions = spec.get("window"), spec.get("exclusions")
    problems = window_problems(spec)
    if problems:
        field, value, detail = problems[0]
        raise WindowError(field, f"{field}: {value!r}: {detail}")
    if window is None and exclusions is None:
        return None
    zone = schedules.parse_schedule("@daily", spec.get("timeZone")).zone
    window, exclusions = window or {}, exclusions or {}
    return schedules.Window(
        zone,
        start=_time(window.get("start")),
        end=_time(window.get("end")),
        dates=frozenset(
            moment for value in exclusions.get("dates") or () if (moment := _date(value))
        ),
        schedules=tuple(
            _exclusion_schedule(index, expression, spec.get("timeZone"))
            for index, expression in enumerate(exclusions.get("schedules") or ())
        ),
    )


def _date(value: Any) -> date | None:
    try:
        return date.fromisoformat(value) if isinstance(value, str) and len(value) == 10 else None
    except ValueError:
        return None


def _exclusion_schedule(index: int, expression: Any, time_zone: Any) -> schedules.Schedule:
    """One exclusion schedule, its errors naming ``spec.exclusions.schedules[index]``."""
    field = f"{EXCLUSIONS_FIELD}.schedules[{index}]"
    if str(expression).startswith("@every"):
        message = (
            f'{field}: "{expression}": @every is a delay from the last run, not times; '
            "exclude cron times (such as * * 25 12 *) instead"
        )
        raise schedules.ScheduleError("UnparseableSchedule", field, message)
    try:
        return schedules.parse_schedules([str(expression)], time_zone).members[0]
    except schedules.ScheduleError as exc:
        message = str(exc).replace(f"{schedules.SCHEDULES_FIELD}[0]", field, 1)
        raise schedules.ScheduleError(exc.reason, field, message) from None


def parse_spec_schedule(spec: Mapping[str, Any]) -> schedules.AnySchedule:
    """:func:`schedule_of` the raw ``spec`` (a request's, or the plugin's)."""
    return schedule_of(settings_of(spec))


def schedule_of(settings: CronJobSettings) -> schedules.AnySchedule:
    """``spec.schedule`` or, when it is unset, ``spec.schedules`` (their union), in
    ``spec.timeZone``. Raises ``ScheduleError`` naming the field (``spec.schedules[1]``)."""
    if settings.schedule is None and settings.schedules is not None:
        return schedules.parse_schedules(list(settings.schedules), settings.time_zone)
    return schedules.parse_schedule(settings.schedule or "", settings.time_zone)


# --- backfill requests -------------------------------------------------------------

BACKFILL_FIELD: Final = f"metadata.annotations[{BACKFILL_ANNOTATION}]"
BACKFILL_TOKEN_ANNOTATION: Final = "batch.tutorial.kubebuilder.io/backfill-token"
"""On a backfill Job: the token of the request that ran it."""
_TINY: Final = timedelta(microseconds=1)
MAX_REQUEST_LENGTH: Final = 1024
"""The longest backfill annotation value read: a token of ``MAX_RUN_TOKEN_LENGTH`` and two
RFC 3339 times fit several times over; a longer value is refused before it is parsed."""
TIMES_MEMO_SIZE: Final = 64
"""How many requests' times are remembered (at most ``MAX_BACKFILL`` + 1 each, about
56 KiB, so about 3.5 MiB in all): more backfills running at once than this walk their
times again."""


@dataclass(frozen=True)
class Request:
    """A parsed backfill request."""

    token: str
    start: datetime
    end: datetime


def parse_request(raw: Any) -> Request | str:
    """The request in annotation value ``raw``, or why it is not one (the detail)."""
    if isinstance(raw, str) and len(raw) > MAX_REQUEST_LENGTH:
        return f"must be at most {MAX_REQUEST_LENGTH} characters, not {len(raw)}"
    try:
        value = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        value = None
    if not isinstance(value, Mapping):
        return 'must be JSON {"token": "...", "from": "<RFC 3339>", "to": "<RFC 3339>"}'
    token = value.get("token")
    if not isinstance(token, str) or not 0 < len(token) <= MAX_RUN_TOKEN_LENGTH:
        return f"token must be a string of 1 to {MAX_RUN_TOKEN_LENGTH} characters"
    start, end = _time(value.get("from")), _time(value.get("to"))
    if start is None or end is None:
        return "from and to must be RFC 3339 times such as 2026-12-01T00:00:00Z"
    if not start < end:
        return f"from ({rfc3339(start)}) must be before to ({rfc3339(end)})"
    if start < FIRST_JOB_TIME or end > END_OF_JOB_TIMES:
        return (
            f"[{rfc3339(start)}, {rfc3339(end)}) must lie within [{rfc3339(FIRST_JOB_TIME)}, "
            f"{rfc3339(END_OF_JOB_TIMES)}): a Job is named by its scheduled time in Unix "
            f"seconds, which must be 0 to {JOB_TIME_DIGITS} digits; move the range"
        )
    return Request(token, start, end)


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment.astimezone(UTC) if moment.tzinfo is not None else None


def times_of(schedule: schedules.AnySchedule, request: Request) -> tuple[datetime, ...]:
    """The schedule's times in [from, to), ascending, at most ``MAX_BACKFILL`` + 1 (one
    more than a request may hold, so that too many shows). Remembered per range and
    schedule (the token does not change them)."""
    return _remembered_times(schedule, request.start, request.end)


@functools.lru_cache(maxsize=TIMES_MEMO_SIZE)
def _remembered_times(
    schedule: schedules.AnySchedule, start: datetime, end: datetime
) -> tuple[datetime, ...]:
    return tuple(
        schedules.times_between(schedule, start - _TINY, end - _TINY, limit=MAX_BACKFILL + 1)
    )


def request_problem(raw: Any, schedule: schedules.AnySchedule | None) -> str | None:
    """Why annotation value ``raw`` cannot be run (None if it can): a message naming the
    annotation. Without a schedule (it is invalid, and reported as such) only the shape
    and the range are checked."""
    request = parse_request(raw)
    if isinstance(request, str):
        return f"{BACKFILL_FIELD}: {request}"
    return None if schedule is None else count_problem(schedule, request)


def count_problem(schedule: schedules.AnySchedule, request: Request) -> str | None:
    """Why ``request`` holds too many times of ``schedule`` (None if it does not)."""
    if len(times_of(schedule, request)) > MAX_BACKFILL:
        return (
            f"{BACKFILL_FIELD}: [{rfc3339(request.start)}, {rfc3339(request.end)}) holds more "
            f"than {MAX_BACKFILL} scheduled times of {schedule.expression!r}, the most one "
            "backfill runs; split it into shorter ranges"
        )
    return None


# --- start timeout -----------------------------------------------------------------

START_TIMEOUT_FIELD: Final = "spec.runStartTimeoutSeconds"


def start_timeout_problem(seconds: Any) -> str | None:
    """Why ``spec.runStartTimeoutSeconds`` cannot be used (None: it can, or it is unset):
    the detail after ``spec.runStartTimeoutSeconds: <value>:``."""
    if seconds is None:
        return None
    whole = isinstance(seconds, int) and not isinstance(seconds, bool)
    if whole and MIN_RUN_START_TIMEOUT_SECONDS <= seconds <= MAX_RUN_START_TIMEOUT_SECONDS:
        return None
    return (
        f"must be a whole number of seconds from {MIN_RUN_START_TIMEOUT_SECONDS} to "
        f"{MAX_RUN_START_TIMEOUT_SECONDS} (how long a run's Pods have to start before the "
        "run is ended and counted failed), or unset to let runs wait to start for ever"
    )


# --- stagger -----------------------------------------------------------------------

STAGGER_FIELD: Final = "spec.staggerSeconds"

GAP_SCAN_LIMIT: Final = 1000
"""How many consecutive schedule times ``shortest_gap`` looks at from its start."""

_GAP_SCAN_START: Final = datetime(2025, 1, 1, tzinfo=UTC)

_GAP_SCAN_SPAN: Final = timedelta(days=400)  # a year of DST transitions, and then some

_SMALLEST_CRON_GAP: Final = timedelta(minutes=1)


def stagger_offset(namespace: str, name: str, stagger_seconds: int) -> timedelta:
    """The CronJob's fixed offset in ``[0, stagger_seconds]`` seconds."""
    if stagger_seconds <= 0:
        return timedelta(0)
    digest = hashlib.sha256(f"{namespace}/{name}".encode()).digest()
    return timedelta(seconds=int.from_bytes(digest[:8], "big") % (stagger_seconds + 1))


@functools.lru_cache(maxsize=1024)
def shortest_gap(schedule: schedules.AnySchedule) -> timedelta | None:
    """The shortest time between consecutive runs of ``schedule`` in its time zone.

    Looks at the first ``GAP_SCAN_LIMIT`` times from 2025-01-01 and at the times around
    each DST transition of the following 400 days (a spring-forward day can bring two runs
    an hour closer). Only gaps up to the largest stagger matter, and those are between
    runs less than an hour apart, which a few days of runs show. None when it fires at
    most once in that span. Cached: the webhook and every reconcile ask again.
    """
    starts = [_GAP_SCAN_START, *_transitions(schedule.zone)]
    gaps = (
        gap
        for start in starts
        for gap in _gaps(schedule, start, GAP_SCAN_LIMIT if start == starts[0] else 100)
    )
    shortest: timedelta | None = None
    for gap in gaps:
        if shortest is None or gap < shortest:
            shortest = gap
            if shortest <= _SMALLEST_CRON_GAP:
                break
    return shortest


def _gaps(schedule: schedules.AnySchedule, start: datetime, limit: int) -> Iterator[timedelta]:
    end = start + _GAP_SCAN_SPAN
    times = itertools.takewhile(lambda t: t <= end, schedule.times_after(start))
    previous: datetime | None = None
    for moment in itertools.islice(times, limit + 1):
        if previous is not None:
            yield moment - previous
        previous = moment


def _transitions(zone: ZoneInfo) -> list[datetime]:
    """A day before each UTC offset change of ``zone`` in the scanned span."""
    days = [_GAP_SCAN_START + timedelta(days=n) for n in range(_GAP_SCAN_SPAN.days + 1)]
    offsets = [day.astimezone(zone).utcoffset() for day in days]
    return [
        days[n - 1] - timedelta(days=1) for n in range(1, len(days)) if offsets[n] != offsets[n - 1]
    ]


def stagger_problem(schedule: schedules.AnySchedule | None, stagger_seconds: int) -> str | None:
    """Why ``stagger_seconds`` cannot be used with ``schedule`` (None if it can): the
    detail, after ``spec.staggerSeconds: <value>:`` (``STAGGER_FIELD``). Without a
    schedule (it is invalid, and reported as such) only the range is checked."""
    if stagger_seconds < 0 or stagger_seconds > MAX_STAGGER_SECONDS:
        return f"must be between 0 and {MAX_STAGGER_SECONDS} seconds"
    if schedule is None:
        return None
    gap = shortest_gap(schedule)
    if gap is None or stagger_seconds < gap.total_seconds():
        return None
    seconds = int(gap.total_seconds())
    return (
        f"must be smaller than the shortest gap between two runs of {schedule.expression!r} "
        f"({seconds} seconds), or runs could swap or merge; use at most {seconds - 1}"
    )
