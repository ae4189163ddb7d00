"""concurrencyPolicy: making room for a new run (Allow, Forbid, Replace, BufferOne).

Pure rules that return what they decide; the decision (``decide.py``) performs and
records it. :func:`room_for` is asked before every new run (scheduled, requested,
backfilled): Forbid and BufferOne say wait while a run is active; Replace deletes every
active Job first. A delete that fails (a 500, a 409 because the name now has another
uid) raises before anything is created, so Replace never leaves two runs active; the
controller retries with backoff, and the next reconcile confirms against the API server
whether an entry's Job is really gone. :func:`buffer` is BufferOne's waiting time
(``status.bufferedRun``).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import NamedTuple

from cronjob_operator.api.batch_v1 import ConcurrencyPolicy
from cronjob_operator.controllers.cronjob.status import JobReference

__all__ = ["Buffering", "Room", "buffer", "room_for"]


class Room(NamedTuple):
    """What concurrencyPolicy says before a new run: ``wait`` (Forbid or BufferOne with a
    run active), or go once the active Jobs in ``replace`` are deleted (Replace)."""

    wait: bool
    replace: tuple[JobReference, ...] = ()


def room_for(policy: ConcurrencyPolicy, active: Sequence[JobReference]) -> Room:
    """What ``policy`` says before a new run, with ``active`` (``status.active``) running."""
    if policy in (ConcurrencyPolicy.FORBID, ConcurrencyPolicy.BUFFER_ONE) and active:
        return Room(wait=True)
    if policy is ConcurrencyPolicy.REPLACE:
        return Room(wait=False, replace=tuple(active))
    return Room(wait=False)


class Buffering(NamedTuple):
    """BufferOne's decision over the due times (other policies: the oldest runs now)."""

    run_now: datetime | None
    """The time whose run starts now (None: none)."""
    may_run: tuple[datetime, ...]
    """The due times that may still run (the skip accounting stops before the oldest)."""
    buffered: datetime | None
    """``status.bufferedRun`` as it is to be kept (None: none)."""
    newly_buffered: bool = False
    """``buffered`` came due now, while a run is active (announced by an event)."""
    dropped: datetime | None = None
    """A buffered time dropped because its deadline passed (a skip to count)."""


def buffer(
    policy: ConcurrencyPolicy,
    buffered: datetime | None,
    *,
    running: bool,
    queue: tuple[datetime, ...],
    ran: Collection[datetime],
    reach: datetime | None,
    holding: bool,
) -> Buffering:
    """BufferOne's decision, given the stored ``buffered`` time, whether a run is
    ``running``, the due ``queue`` (oldest first), the times that ``ran``, the deadline's
    ``reach`` and whether the CronJob is ``holding`` (suspended or paused). A buffered time
    whose Job exists started, and is no longer kept, whatever the policy."""
    if buffered is not None and buffered in ran:  # its Job exists: it started
        buffered = None
    oldest = queue[0] if queue else None
    if policy is not ConcurrencyPolicy.BUFFER_ONE:
        return Buffering(oldest, queue, buffered)
    if holding:
        return Buffering(None, queue, buffered)
    if running:
        fresh = [moment for moment in queue if moment not in ran]
        if buffered is None and fresh:
            return Buffering(None, (), fresh[0], newly_buffered=True)
        return Buffering(None, (), buffered)  # while a run is active, nothing else waits
    if buffered is None:
        return Buffering(oldest, queue, None)
    if reach is not None and buffered <= reach:
        return Buffering(oldest, queue, None, dropped=buffered)
    return Buffering(buffered, queue, buffered)
