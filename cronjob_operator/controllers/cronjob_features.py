"""The CronJob's features beyond the built-in: next run, run now, failure pause, stagger.

Pure rules, no I/O and no clock (docs/beyond-builtin.md has the user's view); the
reconciler in ``cronjob.py`` calls them around its reads and writes, and the admission
webhook calls the checks. Each feature is opt-in, so a spec the built-in CronJob accepts
behaves exactly as before.

* Next run: ``status.nextScheduleTime`` is the next time a scheduled run is due (after
  stagger), an RFC 3339 string; absent when none will start (suspended, paused, being
  deleted, bad schedule, never fires).
* Run now: the annotation ``RUN_ANNOTATION`` holds a request token (Flux's
  ``requestedAt`` convention); ``status.lastHandledRunRequest`` records the last token
  handled. The Job's name is derived from the token (``manual_job_name``), so a token
  creates one Job however often it is retried, by however many managers; the name's
  ``-m`` suffix can never equal a scheduled Job's all-digit one.
* Failure awareness: ``record_failures`` counts each failed Job once, by the time its
  ``Failed`` condition became true, against a watermark (``status.lastFailureTime``) that
  is written in the same status update as the count; a failed Job is pruned only once the
  stored status has counted it (``counted``), so pruning cannot lose a failure.
* Stagger: ``stagger_offset`` is a fixed offset in ``[0, staggerSeconds]`` from a hash of
  the CronJob's namespace and name (stable across restarts, replicas and a re-create);
  ``stagger_problem`` rejects a stagger that is not below the schedule's shortest gap.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import itertools
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Final
from zoneinfo import ZoneInfo

from cronjob_operator import schedule as schedules
from cronjob_operator.api.batch_v1 import MAX_RUN_TOKEN_LENGTH, MAX_STAGGER_SECONDS, RUN_ANNOTATION
from cronjob_operator.controllers import cronjob_state as state
from cronjob_operator.runtime import objects
from cronjob_operator.runtime.controllerutil import find_condition, parse_time, rfc3339

__all__ = [
    "GAP_SCAN_LIMIT",
    "INSTANTIATE_ANNOTATION",
    "PAUSED_REASON",
    "PAUSE_FIELD",
    "RUN_TOKEN_ANNOTATION",
    "STAGGER_FIELD",
    "TOKEN_FIELD",
    "build_manual_job",
    "counted",
    "failure_time",
    "manual_job_name",
    "parse_spec_schedule",
    "pause_threshold",
    "paused",
    "record_failures",
    "resume_on_new_generation",
    "run_request",
    "set_next_schedule_time",
    "shortest_gap",
    "stagger_offset",
    "stagger_problem",
    "token_problem",
    "unrecorded_manual_job",
]

RUN_TOKEN_ANNOTATION: Final = "batch.tutorial.kubebuilder.io/run-request"
"""On a manual Job: the token that asked for it."""
INSTANTIATE_ANNOTATION: Final = "cronjob.kubernetes.io/instantiate"
"""On a manual Job: ``manual``, as ``kubectl create job --from=cronjob/x`` sets it."""
PAUSED_REASON: Final = "PausedAfterFailures"
TOKEN_FIELD: Final = f"metadata.annotations[{RUN_ANNOTATION}]"
STAGGER_FIELD: Final = "spec.staggerSeconds"
PAUSE_FIELD: Final = "spec.failurePolicy.pauseAfterConsecutiveFailures"
GAP_SCAN_LIMIT: Final = 1000
"""How many consecutive schedule times ``shortest_gap`` looks at from its start."""

_GAP_SCAN_START: Final = datetime(2025, 1, 1, tzinfo=UTC)
_GAP_SCAN_SPAN: Final = timedelta(days=400)  # a year of DST transitions, and then some
_SMALLEST_CRON_GAP: Final = timedelta(minutes=1)
_NAME_HASH_CHARS: Final = 9  # "-m" + 9 = 11 characters, as "-<unix seconds>"


# --- the schedule -----------------------------------------------------------------------


def parse_spec_schedule(spec: Mapping[str, Any]) -> schedules.AnySchedule:
    """``spec.schedule`` or, when it is unset, ``spec.schedules`` (their union), in
    ``spec.timeZone``. Raises ``ScheduleError`` naming the field (``spec.schedules[1]``)."""
    many = spec.get("schedules")
    if spec.get("schedule") is None and isinstance(many, (list, tuple)):
        return schedules.parse_schedules([str(entry) for entry in many], spec.get("timeZone"))
    return schedules.parse_schedule(str(spec.get("schedule") or ""), spec.get("timeZone"))


# --- next run -------------------------------------------------------------------------


def set_next_schedule_time(status: dict[str, Any], moment: datetime | None) -> None:
    """Set ``status.nextScheduleTime`` to ``moment``, or remove it when None."""
    if moment is None:
        status.pop("nextScheduleTime", None)
    else:
        status["nextScheduleTime"] = rfc3339(moment)


# --- run now --------------------------------------------------------------------------


def run_request(cronjob: Mapping[str, Any]) -> str | None:
    """The run request token on ``cronjob`` not yet handled, if any."""
    annotations = (cronjob.get("metadata") or {}).get("annotations") or {}
    token = annotations.get(RUN_ANNOTATION)
    if not token:
        return None
    handled = (cronjob.get("status") or {}).get("lastHandledRunRequest")
    return None if token == handled else str(token)


def token_problem(token: str) -> str | None:
    """Why ``token`` is not an acceptable run request token (None if it is); the message
    names the annotation (the field) and the fix."""
    if len(token) > MAX_RUN_TOKEN_LENGTH:
        return (
            f"{TOKEN_FIELD}: the run request token is {len(token)} characters, at most "
            f"{MAX_RUN_TOKEN_LENGTH} are allowed; use a shorter token such as the current time"
        )
    return None


def build_manual_job(cronjob: objects.Obj, token: str) -> dict[str, Any]:
    """The Job a run request with ``token`` creates."""
    return state.job_from_template(
        cronjob,
        name=manual_job_name(cronjob["metadata"]["name"], token),
        annotations={INSTANTIATE_ANNOTATION: "manual", RUN_TOKEN_ANNOTATION: token},
    )


def manual_job_name(cronjob_name: str, token: str) -> str:
    """``<cronjob>-m<9 base32 characters of sha256(token)>``: fits 63 as a scheduled name
    does, and never equals one (a scheduled suffix is all digits)."""
    digest = hashlib.sha256(token.encode()).digest()
    encoded = base64.b32encode(digest).decode().lower()
    return f"{cronjob_name}-m{encoded[:_NAME_HASH_CHARS]}"


def unrecorded_manual_job(cronjob: Mapping[str, Any]) -> str | None:
    """The name of the manual Job that the stored status has not recorded: the one its
    unhandled run request asks for (None when there is none)."""
    token = run_request(cronjob)
    return None if token is None else manual_job_name(cronjob["metadata"]["name"], token)


# --- failure awareness ----------------------------------------------------------------


def failure_time(job: objects.Obj) -> datetime | None:
    """When ``job`` failed: its ``Failed=True`` condition's transition time."""
    for condition in (job.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "Failed" and condition.get("status") == "True":
            return parse_time(condition.get("lastTransitionTime")) or parse_time(
                (job.get("metadata") or {}).get("creationTimestamp")
            )
    return None


def record_failures(status: dict[str, Any], failed: Iterable[objects.Obj]) -> list[str]:
    """Count the failed Jobs not counted yet; returns their names, oldest first.

    A failure counts when it is newer than ``status.lastFailureTime`` (the watermark); a
    success newer than the watermark (``status.lastSuccessfulTime``, already advanced)
    resets the count, and only failures after it count. Two failures in the same second
    seen by different reconciles count once (the watermark has second precision).
    """
    watermark = parse_time(status.get("lastFailureTime"))
    last_success = parse_time(status.get("lastSuccessfulTime"))
    fresh = sorted(
        (when, objects.name_of(job))
        for job in failed
        if (when := failure_time(job)) is not None and (watermark is None or when > watermark)
    )
    count = int(status.get("consecutiveFailures") or 0)
    if last_success is not None and (watermark is None or last_success > watermark):
        count = 0
    count += sum(1 for when, _ in fresh if last_success is None or when > last_success)
    status["consecutiveFailures"] = count
    if fresh:
        status["lastFailureTime"] = rfc3339(fresh[-1][0])
    return [name for _, name in fresh]


def counted(failed: Iterable[objects.Obj], stored_status: Mapping[str, Any]) -> list[objects.Obj]:
    """The failed Jobs the stored status has counted already: only these may be pruned."""
    watermark = parse_time(stored_status.get("lastFailureTime"))
    if watermark is None:
        return []
    return [job for job in failed if (when := failure_time(job)) is not None and when <= watermark]


def pause_threshold(spec: Mapping[str, Any]) -> int | None:
    """``spec.failurePolicy.pauseAfterConsecutiveFailures`` as stored (None when unset)."""
    policy = spec.get("failurePolicy")
    if not isinstance(policy, Mapping):
        return None
    value = policy.get("pauseAfterConsecutiveFailures")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def paused(spec: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    """Whether scheduled runs are paused: the failure count reached a valid threshold."""
    threshold = pause_threshold(spec)
    if threshold is None or threshold < 1:
        return False
    return int(status.get("consecutiveFailures") or 0) >= threshold


def resume_on_new_generation(status: dict[str, Any], generation: int) -> bool:
    """Reset the count of a CronJob paused at an older generation; True if it did.

    A spec edit (any change bumps ``metadata.generation``) is the user's "try again": the
    count restarts, so the pause needs as many new failures as the threshold says.
    """
    available = find_condition(status.get("conditions") or [], "Available") or {}
    observed = status.get("observedGeneration")
    if available.get("reason") != PAUSED_REASON or observed is None or observed == generation:
        return False
    status["consecutiveFailures"] = 0
    return True


# --- stagger --------------------------------------------------------------------------


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
