"""Backfill progress: run every scheduled time in [from, to) once, on request (Temporal's backfill).

Pure rules, no I/O and no clock (docs/beyond-builtin.md, 10, has the user's view), that
return the progress they decide; the reconciler records it in its backfill step. The
request itself (its annotation, its parsing, its bounds and its times) is
``api.cronjob_rules``, which the webhook and the plugin share.

* ``status.backfill`` is a request's progress: token, from, to, requested (the times in
  [from, to)), done, next, state. The same token again changes nothing; a new token
  starts a new backfill (cancelling one that runs); removing the annotation cancels it.
* Exactly once: a backfill Job is named by its scheduled time, as a scheduled run's is,
  so a time that has a Job is counted done and not run again; ``next`` only moves forward
  (in order, one Job per reconcile), and pruning keeps the Jobs at or after the stored
  ``next`` while a backfill runs (:func:`protected`), so no Job the backfill still has to
  see can vanish before it does. A backfill Job never moves ``lastScheduleTime``
  backwards (it only moves forward, to the newest Job that exists).
* The cost of a request is paid once. The reconciler asks :func:`recorded` first: a
  request whose token ``status.backfill`` holds was checked when it started, and one that
  is no longer Running needs no schedule times at all.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from datetime import datetime
from typing import Any

from cronjob_operator.api.batch_v1 import BackfillState
from cronjob_operator.api.cronjob_rules import Request
from cronjob_operator.controllers.cronjob.status import Backfill
from cronjob_operator.controllers.cronjob.view import stamp, time_at

__all__ = [
    "advanced",
    "as_recorded",
    "cancelled",
    "protected",
    "recorded",
    "start",
]


def recorded(progress: Mapping[str, Any] | None, request: Request) -> bool:
    """Whether ``status.backfill`` (``progress``) is this request's: it was checked and
    started, and only its state says what is left."""
    return progress is not None and progress.get("token") == request.token


def as_recorded(progress: Mapping[str, Any], request: Request) -> Request:
    """``request`` with the range its token had when it started: the same token again
    does nothing, so an annotation that kept the token but moved the range is that
    recorded request (walking the new range while ``status.backfill``, which pruning and
    the Replace bookkeeping read, kept the old one ran times twice)."""
    start, end = time_at(progress, "from"), time_at(progress, "to")
    if start is None or end is None:
        return request
    return dataclasses.replace(request, start=start, end=end)


def start(request: Request, times: tuple[datetime, ...]) -> Backfill:
    """``status.backfill`` for a new request."""
    progress: Backfill = {
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


def advanced(
    progress: Backfill, times: tuple[datetime, ...], exists: Collection[datetime]
) -> Backfill:
    """``progress`` with every time from ``next`` on whose Job exists counted done, up to
    the first without one (the next to run); Complete when none is left."""
    advanced = progress.copy()
    upcoming = time_at(progress, "next")
    if upcoming is None:
        return advanced
    remaining = [moment for moment in times if moment >= upcoming]
    while remaining and remaining[0] in exists:
        remaining.pop(0)
        advanced["done"] = int(advanced.get("done") or 0) + 1
    if remaining:
        advanced["next"] = stamp(remaining[0])
    else:
        advanced.pop("next", None)
        advanced["state"] = BackfillState.COMPLETE.value
    return advanced


def cancelled(progress: Backfill) -> Backfill:
    """``progress`` stopped (its annotation went, or another token replaced it)."""
    stopped = progress.copy()
    stopped.pop("next", None)
    stopped["state"] = BackfillState.CANCELLED.value
    return stopped


def protected(stored_status: Mapping[str, Any], moment: datetime) -> bool:
    """Whether pruning must keep the Job of ``moment``: a running backfill (as stored)
    still has to reach it."""
    progress = stored_status.get("backfill") or {}
    if progress.get("state") != BackfillState.RUNNING.value:
        return False
    upcoming, end = time_at(progress, "next"), time_at(progress, "to")
    return upcoming is not None and end is not None and upcoming <= moment < end
