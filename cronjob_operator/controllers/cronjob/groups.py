"""spec.concurrencyGroup: who gets a slot of a ConcurrencyGroup, and what a full one means.

Pure rules, no I/O and no clock (``group_slots.py`` reads and writes the group object;
docs/beyond-builtin.md has the user's view). The slots are ``status.holders`` of the
ConcurrencyGroup: one entry per Job, taken (``claim``) before the Job is created and
written with the resourceVersion read, so of two replicas that decide at once on the
last slot one gets a 409, reads again and finds it taken. Nothing is released by the
replica that took a slot alone: a slot is free again once its Job has finished or is
gone (``reclaimable``), which whoever reads the group next can see, so a replica that
died leaks no slot. A slot whose Job does not exist yet (taken, the Job not created) is
free only after ``CLAIM_GRACE``: the taker creates the Job within it or not at all.

Waiting (whenFull Wait): a scheduled run that finds the group full records its place in
``status.waiting``; a free slot goes to the oldest waiting run (by scheduled time, then
CronJob name), so the runs start in scheduled-time order. A place is dropped once its
deadline has passed, or when its CronJob has not asked again for ``WAITER_STALE``.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from cronjob_operator.api.batch_v1 import SkipReason
from cronjob_operator.api.concurrencygroup_v1 import MAX_WAITERS
from cronjob_operator.controllers.cronjob import policies
from cronjob_operator.controllers.cronjob.plan import GroupFull, Problem, Steps
from cronjob_operator.controllers.cronjob.view import api_status, stamp, time_at
from cronjob_operator.controllers.stored import Misfit
from cronjob_operator.runtime.controllerutil import rfc3339

__all__ = [
    "CLAIM_GRACE",
    "GROUP_UNUSABLE",
    "WAITER_REFRESH",
    "WAITER_STALE",
    "WAIT_POLL",
    "Claim",
    "JobState",
    "Verdict",
    "claim",
    "hand_over",
    "on_full",
    "reclaimable",
    "release",
    "with_group_skip",
]

CLAIM_GRACE: Final = timedelta(seconds=60)
"""How long a slot whose Job does not exist stays taken: the taker creates the Job at
once (within half of it, by its own clock, or not at all), so only a slot whose taker
died before creating its Job is freed by it."""
WAITER_STALE: Final = timedelta(seconds=60)
"""A waiting run whose CronJob has not asked for a slot for this long loses its place."""
WAITER_REFRESH: Final = timedelta(seconds=20)
"""A waiting CronJob writes its place again (``seenAt``) at most this often."""
WAIT_POLL: Final = timedelta(seconds=5)
GROUP_UNUSABLE: Final = "GroupUnusable"
"""The reason a run does not start when its group holds a field its schema does not
admit (``controllers.stored``)."""
"""How often a CronJob whose run waits for a slot asks again."""


class JobState(enum.Enum):
    """What the API server says of a slot holder's Job."""

    RUNNING = "Running"
    FINISHED = "Finished"
    ABSENT = "Absent"


@dataclass(frozen=True)
class Claim:
    """One Job asking for a slot: ``scheduled`` orders it among the waiting runs;
    ``wait``: take a place in ``status.waiting`` if no slot is free."""

    cron_job: str
    job: str
    scheduled: datetime
    deadline: datetime | None
    wait: bool


@dataclass(frozen=True)
class Verdict:
    """The group's new holders and waiting runs, whether the Job has its slot, and
    whether it waits."""

    holders: list[dict[str, Any]]
    waiting: list[dict[str, Any]]
    granted: bool
    queued: bool

    @property
    def status(self) -> dict[str, Any]:
        """The group's new status, rendered for the API (only for the verdict written:
        a full group's first verdict, taken without the holders' states, is not)."""
        return _status(self.holders, self.waiting)


def reclaimable(holder: Mapping[str, Any], state: JobState, now: datetime) -> bool:
    """Whether a holder's slot is free again: its Job finished, or it is absent and the
    slot older than the claim grace."""
    if state is JobState.FINISHED:
        return True
    if state is JobState.RUNNING:
        return False
    acquired = time_at(holder, "acquiredAt")
    return acquired is None or now - acquired >= CLAIM_GRACE


def claim(
    status: Mapping[str, Any],
    limit: int,
    request: Claim,
    now: datetime,
    states: Mapping[str, JobState],
) -> Verdict:
    """Take a slot for ``request`` if one is free and no older run waits for it.

    ``states``: what is known of the holders' Jobs (a holder missing from it is taken
    to be running). The verdict's status drops the reclaimable holders and the waiting
    runs whose place lapsed, and holds ``request`` as a holder or (``wait``) a waiter.
    """
    holders = [
        dict(holder)
        for holder in status.get("holders") or ()
        if not reclaimable(holder, states.get(str(holder.get("job")), JobState.RUNNING), now)
    ]
    others = [
        dict(waiter)
        for waiter in status.get("waiting") or ()
        if waiter.get("cronJob") != request.cron_job and _holds_place(waiter, now)
    ]
    mine = next(
        (w for w in status.get("waiting") or () if w.get("cronJob") == request.cron_job), None
    )
    if any(holder.get("job") == request.job for holder in holders):
        return Verdict(holders, others, granted=True, queued=False)
    key = (request.scheduled, request.cron_job)
    ahead = [waiter for waiter in others if _order(waiter) < key]
    if limit - len(holders) > len(ahead):
        holders.append({"job": request.job, "cronJob": request.cron_job, "acquiredAt": stamp(now)})
        return Verdict(holders, others, granted=True, queued=False)
    if not request.wait or len(others) >= MAX_WAITERS:
        return Verdict(holders, others, granted=False, queued=False)
    others.append(_place(request, mine, now))
    return Verdict(holders, others, granted=False, queued=True)


def hand_over(
    status: Mapping[str, Any], replaced: Collection[str], request: Claim, now: datetime
) -> Verdict | None:
    """The slot of a Job that ``request``'s Replace deleted, handed to ``request``
    (None when none of the ``replaced`` Jobs holds one). Replace replaces a run: the
    new one takes the old one's slot, ahead of any waiting run, or the old run would be
    deleted and the new one refused."""
    holders = [dict(holder) for holder in status.get("holders") or ()]
    handed = next((h for h in holders if h.get("job") in replaced), None)
    if handed is None:
        return None
    holders.remove(handed)
    holders.append({"job": request.job, "cronJob": request.cron_job, "acquiredAt": stamp(now)})
    waiting = [dict(w) for w in status.get("waiting") or () if w.get("cronJob") != request.cron_job]
    return Verdict(holders, waiting, granted=True, queued=False)


def release(status: Mapping[str, Any], finished: set[str]) -> dict[str, Any]:
    """``status`` without the holders whose Jobs are in ``finished``."""
    holders = [dict(h) for h in status.get("holders") or () if h.get("job") not in finished]
    return _status(holders, [dict(w) for w in status.get("waiting") or ()])


def on_full(
    status: dict[str, Any],
    stored: Mapping[str, Any],
    full: GroupFull,
    scheduled: datetime | None,
    steps: Steps,
) -> Problem | None:
    """What a run that did not get a slot does to the CronJob's status: a scheduled run
    waits (``status.waitingForGroup``) or is counted skipped (GroupFull, and the skip
    accounting's watermark passes it so it never runs); a requested or backfilled run is
    retried, reported as a problem that leaves the schedule going. A missing group stops
    every run until it exists. ``stored``: the status as stored (a run already waiting
    is not announced again)."""
    if full.missing:
        message = (
            f"spec.concurrencyGroup.name: ConcurrencyGroup {full.group!r} does not exist in "
            "this namespace, so no run starts; create it or remove spec.concurrencyGroup"
        )
        steps.event("Warning", "GroupNotFound", message)
        return Problem("GroupNotFound", message)
    if full.misfit is not None:
        message = _misfit_message(full.group, full.misfit)
        steps.event("Warning", GROUP_UNUSABLE, message)
        return Problem(GROUP_UNUSABLE, message)
    if scheduled is None:
        message = (
            f"spec.concurrencyGroup: every slot of ConcurrencyGroup {full.group!r} is taken; "
            "the requested run starts when one frees"
        )
        return Problem("WaitingForGroup", message, stops_schedule=False)
    if full.queued:
        waiting = {"group": full.group, "scheduledTime": stamp(scheduled)}
        if dict(stored.get("waitingForGroup") or {}) != waiting:
            steps.event(
                "Normal",
                "WaitingForGroup",
                f"the run scheduled at {rfc3339(scheduled)} waits for a slot of "
                f"ConcurrencyGroup {full.group!r}",
            )
        status["waitingForGroup"] = waiting
        return None
    if time_at(status, "bufferedRun") == scheduled:
        status.pop("bufferedRun")  # BufferOne's turn came, and Skip never runs it later
    elif (through := time_at(status.get("skippedRuns"), "accountedThrough")) is not None and (
        through >= scheduled
    ):
        return None  # accounted for already
    skipped_runs = policies.skip_counted(status.get("skippedRuns"), SkipReason.GROUP_FULL)
    through = time_at(skipped_runs, "accountedThrough")
    if through is None or through < scheduled:
        skipped_runs["accountedThrough"] = stamp(scheduled)
    status["skippedRuns"] = skipped_runs
    return None


def _misfit_message(group: str, misfit: Misfit) -> str:
    edit = f"kubectl edit concurrencygroups {group}"
    if misfit.in_status:
        edit += " --subresource=status"
    return (
        f"spec.concurrencyGroup.name: ConcurrencyGroup {group!r} holds {misfit.field}: "
        f"{misfit.problem}, which its schema does not admit, so no run starts; correct it "
        f"({edit}, or delete and re-create it) or remove spec.concurrencyGroup"
    )


def with_group_skip(
    accounting: policies.Accounting | None, skipped: datetime | None
) -> policies.Accounting | None:
    """``accounting`` with the scheduled time ``on_full`` skipped (None: none), so the
    reconcile reports it with the rest (event, counter)."""
    if accounting is None or skipped is None:
        return accounting
    return policies.with_skip(accounting, SkipReason.GROUP_FULL, skipped)


def _order(waiter: Mapping[str, Any]) -> tuple[datetime, str]:
    """Where a waiting run stands: by scheduled time, then CronJob name."""
    scheduled = time_at(waiter, "scheduledTime") or datetime.min.replace(tzinfo=UTC)
    return scheduled, str(waiter.get("cronJob"))


def _holds_place(waiter: Mapping[str, Any], now: datetime) -> bool:
    deadline = time_at(waiter, "deadline")
    seen = time_at(waiter, "seenAt")
    if seen is None or time_at(waiter, "scheduledTime") is None:
        return False
    return (deadline is None or now <= deadline) and now - seen < WAITER_STALE


def _place(request: Claim, mine: Mapping[str, Any] | None, now: datetime) -> dict[str, Any]:
    """The request's waiting entry: the one recorded if it is the same run and was seen
    recently (no write needed), else a fresh one."""
    place: dict[str, Any] = {
        "cronJob": request.cron_job,
        "scheduledTime": stamp(request.scheduled),
    }
    if request.deadline is not None:
        place["deadline"] = stamp(request.deadline)
    if mine is not None:
        seen = time_at(mine, "seenAt")
        same = {k: v for k, v in mine.items() if k != "seenAt"} == place
        if same and seen is not None and now - seen < WAITER_REFRESH:
            return dict(mine)
    place["seenAt"] = stamp(now)
    return place


def _status(holders: list[dict[str, Any]], waiting: list[dict[str, Any]]) -> dict[str, Any]:
    """The group's status to write, its times rendered for the API."""
    status: dict[str, Any] = {
        "holders": [api_status(holder) for holder in holders],
        "inUse": len(holders),
    }
    if waiting:
        status["waiting"] = [api_status(waiter) for waiter in waiting]
    return status
