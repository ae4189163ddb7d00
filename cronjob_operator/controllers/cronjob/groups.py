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
the CronJob waiting longest, then CronJob name), so the runs start in scheduled-time
order and no CronJob starves; a run still waiting when a newer time of its CronJob
falls due takes that time, keeping when it joined. A run writes its place once
when it joins (``joinedAt`` is kept in ``seenAt``) and leaves it once, when it gets its
slot; while it waits it keeps its place in the list and writes nothing, and it asks
again only when the group changes (the ConcurrencyGroup controller, in
``controllers/concurrencygroup``, reclaims the slots and wakes the oldest waiters). A
place lapses once its deadline has passed, or (``lapsed``, decided by that controller)
when its CronJob is gone or no longer waits for this group, past ``WAITER_GRACE``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from cronjob_operator.api.batch_v1 import SkipReason
from cronjob_operator.api.concurrencygroup_v1 import MAX_WAITERS
from cronjob_operator.controllers.cronjob import policies
from cronjob_operator.controllers.cronjob.plan import GroupFull, Problem, Steps
from cronjob_operator.controllers.cronjob.status import CronJobStatus, GroupWait
from cronjob_operator.controllers.cronjob.view import api_status, stamp, time_at
from cronjob_operator.controllers.stored import Misfit
from cronjob_operator.runtime.controllerutil import rfc3339

__all__ = [
    "CLAIM_GRACE",
    "GROUP_UNUSABLE",
    "UNQUEUED_RETRY",
    "WAITER_GRACE",
    "Claim",
    "JobState",
    "Verdict",
    "claim",
    "hand_over",
    "lapsed",
    "next_in_line",
    "on_full",
    "reclaimable",
    "release",
    "tidy",
    "with_group_skip",
]

CLAIM_GRACE: Final = timedelta(seconds=60)
"""How long a slot whose Job does not exist stays taken: the taker creates the Job at
once (within half of it, by its own clock, or not at all), so only a slot whose taker
died before creating its Job is freed by it."""
UNQUEUED_RETRY: Final = timedelta(seconds=5)
"""How soon a run that found its group full without a place among the waiting ones asks
again: a run request or a backfill step (they wait, reported ``WaitingForGroup``), or
a CronJob whose group does not exist yet (or does not fit its schema). The group's
change wakes only the runs in ``status.waiting``; these read the group (no write) until
they get a slot."""
WAITER_GRACE: Final = timedelta(seconds=60)
"""How long a place whose CronJob does not show it waiting for the group is kept: the
CronJob writes the group first and its own status (``waitingForGroup``) after, so a
place younger than this may be one whose CronJob's write is still on its way."""
GROUP_UNUSABLE: Final = "GroupUnusable"
"""The reason a run does not start when its group holds a field its schema does not
admit (``controllers.stored``)."""


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
    waiting = [dict(waiter) for waiter in status.get("waiting") or () if _holds_place(waiter, now)]
    others = [waiter for waiter in waiting if waiter.get("cronJob") != request.cron_job]
    # A run that takes no place (requested, backfilled, whenFull Skip) leaves its
    # CronJob's place, its waiting scheduled run's, where it is.
    kept = others if request.wait else waiting
    if any(holder.get("job") == request.job for holder in holders):
        return Verdict(holders, kept, granted=True, queued=False)
    mine = next((w for w in waiting if w.get("cronJob") == request.cron_job), None)
    joined = time_at(mine, "seenAt") if request.wait else None
    key = (request.scheduled, joined or stamp(now), request.cron_job)
    ahead = [waiter for waiter in kept if _order(waiter) < key]
    if limit - len(holders) > len(ahead):
        holders.append({"job": request.job, "cronJob": request.cron_job, "acquiredAt": stamp(now)})
        return Verdict(holders, kept, granted=True, queued=False)
    if not request.wait or len(others) >= MAX_WAITERS:
        return Verdict(holders, kept, granted=False, queued=False)
    return Verdict(holders, _waiting_with(waiting, request, now), granted=False, queued=True)


def next_in_line(status: Mapping[str, Any], limit: int, now: datetime) -> list[str]:
    """The CronJobs whose waiting runs the group's free slots go to, oldest first (as
    ``claim`` ranks them): as many as slots are free."""
    free = limit - len(status.get("holders") or ())
    if free <= 0:
        return []
    waiting = sorted((w for w in status.get("waiting") or () if _holds_place(w, now)), key=_order)
    return [str(waiter.get("cronJob")) for waiter in waiting[:free]]


@dataclass(frozen=True)
class Tidied:
    """The group's status without its reclaimable holders and lapsed places, and when
    to look again (None: only when something changes)."""

    status: dict[str, Any]
    again: datetime | None


def tidy(
    status: Mapping[str, Any],
    limit: int,
    states: Mapping[str, JobState],
    waits_here: Callable[[str], bool | None],
    now: datetime,
) -> Tidied:
    """What the ConcurrencyGroup controller keeps of ``status``: the holders not
    ``reclaimable`` (``states`` as for ``claim``; a slot taken within the claim grace
    is looked at again when the grace ends, its Job created or not by then), and the
    waiting runs whose deadline has not passed, less those next in line for a free
    slot whose place ``lapsed`` (``waits_here``: whether the CronJob shows its run
    waiting for this group; None: it is gone). Only the places next in line are
    checked: a place further back keeps no one from a slot, and is checked when it
    comes to the front."""
    holders = [
        dict(holder)
        for holder in status.get("holders") or ()
        if not reclaimable(holder, states.get(str(holder.get("job"))) or JobState.RUNNING, now)
    ]
    waiting = sorted(
        (dict(w) for w in status.get("waiting") or () if _holds_place(w, now)), key=_order
    )
    again = [end for h in holders if (end := _grace_end(h)) > now]  # its Job may not show yet
    again += [d for w in waiting if (d := time_at(w, "deadline")) is not None]
    kept: list[dict[str, Any]] = []
    free = limit - len(holders)
    for waiter in waiting:
        if len(kept) < free:
            here = waits_here(str(waiter.get("cronJob")))
            if lapsed(waiter, here, now):
                continue
            if not here:  # in its grace: looked at again when that ends
                again.append((time_at(waiter, "seenAt") or now) + WAITER_GRACE)
        kept.append(waiter)
    return Tidied(_status(holders, _in_stored_order(kept, status)), min(again, default=None))


def _in_stored_order(kept: list[dict[str, Any]], status: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``kept``'s places in the order ``status`` lists them (a place never moves)."""
    names = {str(w.get("cronJob")) for w in kept}
    return [dict(w) for w in status.get("waiting") or () if str(w.get("cronJob")) in names]


def _grace_end(holder: Mapping[str, Any]) -> datetime:
    """When a holder whose Job is absent frees its slot."""
    acquired = time_at(holder, "acquiredAt") or datetime.min.replace(tzinfo=UTC)
    return acquired + CLAIM_GRACE


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
    status: CronJobStatus,
    stored: Mapping[str, Any],
    full: GroupFull,
    scheduled: datetime | None,
    steps: Steps,
    *,
    walk_behind: bool = False,
) -> Problem | None:
    """What a run that did not get a slot does to the CronJob's status: a scheduled run
    waits (``status.waitingForGroup``) or is counted skipped (GroupFull, and the skip
    accounting's watermark passes it so it never runs); a requested or backfilled run is
    retried, reported as a problem that leaves the schedule going. A missing group stops
    every run until it exists. ``stored``: the status as stored (a run already waiting
    is not announced again). ``walk_behind``: the skip accounting has older times still
    to walk (it walks ``ACCOUNT_STEP`` a reconcile); moving its watermark past them would
    leave them uncounted, so the skipped run is left for the follow-up that has walked
    up to it, which tries its slot again."""
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
        waiting: GroupWait = {"group": full.group, "scheduledTime": stamp(scheduled)}
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
    elif walk_behind:
        return None  # counted once the accounting has walked up to it
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


def _order(waiter: Mapping[str, Any]) -> tuple[datetime, datetime, str]:
    """Where a waiting run stands: by scheduled time, then how long its CronJob has
    waited (``seenAt``, kept when its time moves to a newer one: a CronJob that just got
    a slot waits behind one that did not, so none starves), then CronJob name."""
    earliest = datetime.min.replace(tzinfo=UTC)
    scheduled = time_at(waiter, "scheduledTime") or earliest
    return scheduled, time_at(waiter, "seenAt") or earliest, str(waiter.get("cronJob"))


def lapsed(waiter: Mapping[str, Any], waits_here: bool | None, now: datetime) -> bool:
    """Whether a waiting run has lost its place: its deadline passed, or its CronJob is
    gone (``waits_here`` None) or does not show it waiting for this group (False), and
    the place is older than ``WAITER_GRACE``."""
    if not _holds_place(waiter, now):
        return True
    if waits_here:
        return False
    joined = time_at(waiter, "seenAt")
    return joined is None or now - joined >= WAITER_GRACE


def _holds_place(waiter: Mapping[str, Any], now: datetime) -> bool:
    """Whether a waiting run is well formed and its deadline (if any) not passed."""
    deadline = time_at(waiter, "deadline")
    if time_at(waiter, "seenAt") is None or time_at(waiter, "scheduledTime") is None:
        return False
    return deadline is None or now <= deadline


def _waiting_with(
    waiting: list[dict[str, Any]], request: Claim, now: datetime
) -> list[dict[str, Any]]:
    """``waiting`` holding the request's place: its recorded one, where it stands, when it
    is the same run (nothing to write); its run's newer time in its stead, joined when
    the CronJob first waited; else a fresh one (joined now) at the end. The list's order
    means nothing (``_order`` ranks), so a place never moves."""
    place: dict[str, Any] = {
        "cronJob": request.cron_job,
        "scheduledTime": stamp(request.scheduled),
    }
    if request.deadline is not None:
        place["deadline"] = stamp(request.deadline)
    mine = next((i for i, w in enumerate(waiting) if w.get("cronJob") == request.cron_job), None)
    if mine is None:
        return [*waiting, {**place, "seenAt": stamp(now)}]
    if {k: v for k, v in waiting[mine].items() if k != "seenAt"} != place:
        waiting[mine] = {**place, "seenAt": waiting[mine]["seenAt"]}
    return waiting


def _status(holders: list[dict[str, Any]], waiting: list[dict[str, Any]]) -> dict[str, Any]:
    """The group's status to write, its times rendered for the API."""
    status: dict[str, Any] = {
        "holders": [api_status(holder) for holder in holders],
        "inUse": len(holders),
    }
    if waiting:
        status["waiting"] = [api_status(waiter) for waiter in waiting]
    return status
