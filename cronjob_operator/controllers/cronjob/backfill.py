"""Backfill: run every scheduled time in [from, to) once, on request (Temporal's backfill).

Pure rules, no I/O and no clock (docs/beyond-builtin.md, 10, has the user's view); the
reconciler calls them in its backfill step, the webhook calls :func:`request_problem`.

* The request is the annotation ``BACKFILL_ANNOTATION``, JSON ``{"token", "from", "to"}``
  (RFC 3339); ``status.backfill`` is its progress: token, from, to, requested (the times in
  [from, to)), done, next, state. The same token again changes nothing; a new token
  starts a new backfill (cancelling one that runs); removing the annotation cancels it.
* Exactly once: a backfill Job is named by its scheduled time, as a scheduled run's is,
  so a time that has a Job is counted done and not run again; ``next`` only moves forward
  (in order, one Job per reconcile), and pruning keeps the Jobs at or after the stored
  ``next`` while a backfill runs (:func:`protected`), so no Job the backfill still has to
  see can vanish before it does. A backfill Job never moves ``lastScheduleTime``
  backwards (it only moves forward, to the newest Job that exists).
* At most ``MAX_BACKFILL`` times per request, in [1970, 2286) (what a Job name can carry,
  ``jobs.FIRST_JOB_TIME``, ``jobs.END_OF_JOB_TIMES``), in an annotation of at most
  ``MAX_REQUEST_LENGTH`` characters: anything else is refused (webhook) or reported
  (``Degraded``, reason ``InvalidBackfill``, no retry) with the bound.
* The cost of a request is paid once. The reconciler asks :func:`recorded` first: a
  request whose token ``status.backfill`` holds was checked when it started, and one that
  is no longer Running needs no schedule times at all. The times of a request are walked
  once and remembered (:func:`times_of`, the last ``TIMES_MEMO_SIZE`` requests), so a
  running backfill's reconciles and the webhook's checks of the same request reuse them.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from cronjob_operator import schedule as schedules
from cronjob_operator.api.batch_v1 import (
    BACKFILL_ANNOTATION,
    MAX_BACKFILL,
    MAX_RUN_TOKEN_LENGTH,
    BackfillState,
)
from cronjob_operator.controllers.cronjob.jobs import END_OF_JOB_TIMES, FIRST_JOB_TIME
from cronjob_operator.controllers.cronjob.view import stamp, time_at
from cronjob_operator.runtime.controllerutil import rfc3339

__all__ = [
    "BACKFILL_FIELD",
    "BACKFILL_TOKEN_ANNOTATION",
    "MAX_REQUEST_LENGTH",
    "TIMES_MEMO_SIZE",
    "Request",
    "advance",
    "cancel",
    "count_problem",
    "parse_request",
    "protected",
    "recorded",
    "request_problem",
    "start",
    "times_of",
]

BACKFILL_FIELD: Final = f"metadata.annotations[{BACKFILL_ANNOTATION}]"
BACKFILL_TOKEN_ANNOTATION: Final = "batch.tutorial.kubebuilder.io/backfill-token"
"""On a backfill Job: the token of the request that ran it."""
_TINY: Final = timedelta(microseconds=1)
MAX_REQUEST_LENGTH: Final = 1024
"""The longest backfill annotation value read: a token of ``MAX_RUN_TOKEN_LENGTH`` and two
RFC 3339 times fit several times over; a longer value is refused before it is parsed."""
TIMES_MEMO_SIZE: Final = 64
"""How many requests' times are remembered (at most ``MAX_BACKFILL`` + 1 each, about
56 KiB at most): more backfills running at once than this walk their times again."""


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
            "seconds, which must be 0 to 10 digits; move the range"
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
    return _walk(schedule, start, end)


def _walk(schedule: schedules.AnySchedule, start: datetime, end: datetime) -> tuple[datetime, ...]:
    """The schedule evaluation itself (what :func:`times_of` remembers)."""
    return tuple(
        schedules.times_between(schedule, start - _TINY, end - _TINY, limit=MAX_BACKFILL + 1)
    )


def recorded(progress: Mapping[str, Any] | None, request: Request) -> bool:
    """Whether ``status.backfill`` (``progress``) is this request's: it was checked and
    started, and only its state says what is left."""
    return progress is not None and progress.get("token") == request.token


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


def start(request: Request, times: tuple[datetime, ...]) -> dict[str, Any]:
    """``status.backfill`` for a new request."""
    progress: dict[str, Any] = {
        "token": request.token,
        "from": stamp(request.start),
        "to": stamp(request.end),
        "requested": len(times),
        "done": 0,
        "state": BackfillState.RUNNING.value if times else BackfillState.COMPLETE.value,
    }
    if times:
        progress["next"] = stamp(times[0])
    return progress


def advance(progress: dict[str, Any], times: tuple[datetime, ...], exists: set[datetime]) -> None:
    """Count done every time from ``next`` on whose Job exists, up to the first without
    one (the next to run); Complete when none is left."""
    upcoming = time_at(progress, "next")
    if upcoming is None:
        return
    remaining = [moment for moment in times if moment >= upcoming]
    while remaining and remaining[0] in exists:
        remaining.pop(0)
        progress["done"] = int(progress.get("done") or 0) + 1
    if remaining:
        progress["next"] = stamp(remaining[0])
    else:
        progress.pop("next", None)
        progress["state"] = BackfillState.COMPLETE.value


def cancel(progress: dict[str, Any]) -> None:
    """Stop a running backfill (its annotation went, or another token replaced it)."""
    progress.pop("next", None)
    progress["state"] = BackfillState.CANCELLED.value


def protected(stored_status: Mapping[str, Any], moment: datetime) -> bool:
    """Whether pruning must keep the Job of ``moment``: a running backfill (as stored)
    still has to reach it."""
    progress = stored_status.get("backfill") or {}
    if progress.get("state") != BackfillState.RUNNING.value:
        return False
    upcoming, end = time_at(progress, "next"), time_at(progress, "to")
    return upcoming is not None and end is not None and upcoming <= moment < end
