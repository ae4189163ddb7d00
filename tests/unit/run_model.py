"""The reference model of which runs a CronJob owes: docs/cronjob-semantics.md, "The rule",
as code that imports nothing from ``controllers/``.

Why: the traces of ``reconcile_traces`` say that behaviour did not change, not that it is
right. This model is written from the rule's text, so where it and the controller
disagree one of them is wrong, and the story test (``test_exactly_once_stories``) says
which story shows it. It uses only the schedule math (``cronjob_operator.schedule``,
pure and tested on its own) and what a story recorded:

* ``Run``: one Job a controller created, with the identity it stands for;
* ``started_twice``: identities started more than once (rule 1 and 2, "once");
* ``limit_breaches``: creates at which ``concurrencyPolicy``, the group's limit or
  ``maxScheduledRuns`` did not hold (rule 4);
* ``unsettled``: at quiescence, scheduled times through ``accountedThrough`` that are
  neither started, nor counted skipped, nor pending, or that are more than one of these
  (rule 2, "never both, never neither"), as a count per CronJob.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from cronjob_operator import schedule as schedules

Identity = tuple[Any, ...]
"""``("scheduled", cronjob, seconds)``, ``("request", cronjob, token, epoch)`` or
``("backfill", cronjob, token, epoch, seconds)``: the epoch counts how often the
annotation took that token, so a token set again after another is a new run."""

EXCLUSIVE_POLICIES = frozenset({"Forbid", "Replace", "BufferOne"})


@dataclasses.dataclass(frozen=True)
class Run:
    """One Job a controller created, and what held at the instant of its create."""

    cron_job: str
    job: str
    uid: str
    identity: Identity
    policy: str
    others_unfinished: tuple[str, ...]
    group_unfinished: int
    group_limit: int | None
    run_limit: int | None
    settled_through: int | None
    """The stored ``accountedThrough`` at the create (Unix seconds): a backfill Job of a
    later time is that time's run; of an earlier one, a run of its own."""
    pending: frozenset[int] = frozenset()
    """The stored pending times at the create (``bufferedRun``, ``waitingForGroup``; Unix
    seconds): not settled, so past the run limit if this create uses it up."""


def started_twice(runs: Iterable[Run], lost: Mapping[Identity, int]) -> dict[Identity, list[str]]:
    """Identities with more than one Job (by uid). A run whose only evidence someone else
    deleted may start once more for each such delete (``lost``: how often each identity's
    Job was deleted before status recorded it): the controller cannot know it started."""
    uids: dict[Identity, set[str]] = defaultdict(set)
    for run in runs:
        uids[run.identity].add(run.uid)
    return {
        identity: sorted(found)
        for identity, found in uids.items()
        if len(found) > 1 + lost.get(identity, 0)
    }


def rerun_by_backfill(
    runs: Sequence[Run], began: Mapping[Identity, int], lost: Mapping[Identity, int]
) -> list[str]:
    """Backfill creates of a time whose Job was already created since that backfill
    began (``began``: the index in ``runs`` at which each backfill epoch, keyed by its
    identity without the time, was requested). A backfill counts a time that has a Job
    done (docs/beyond-builtin.md, 10), so its run of that time is the Job created then,
    whoever created it; a second is the time run twice (unless someone else deleted the
    first before status recorded it: ``lost``)."""
    found = []
    for index, run in enumerate(runs):
        if run.identity[0] != "backfill":
            continue
        first = began.get(run.identity[:-1], 0)
        earlier = [
            other
            for other in runs[first:index]
            if other.job == run.job and other.identity not in lost
        ]
        if earlier:
            found.append(f"{run.job} by {run.identity[:-1]} after {earlier[0].identity}")
    return found


def limit_breaches(runs: Sequence[Run], lost: Mapping[Identity, int]) -> list[str]:
    """Each create at which a limit of rule 4 did not hold, described. A scheduled run
    whose Job someone else deleted before status recorded it (``lost``) is not counted
    toward ``maxScheduledRuns``: the controller cannot know it started (rule 3)."""
    breaches = []
    counted: dict[str, tuple[int, int]] = {}
    uncountable = dict(lost)
    for run in runs:
        if run.policy in EXCLUSIVE_POLICIES and run.others_unfinished:
            breaches.append(f"{run.job}: {run.policy} beside {list(run.others_unfinished)}")
        if run.group_limit is not None and run.group_unfinished >= run.group_limit:
            breaches.append(
                f"{run.job}: group had {run.group_unfinished} of {run.group_limit} in use"
            )
        if run.identity[0] == "request" or run.run_limit is None:
            continue
        if uncountable.get(run.identity, 0) > 0:
            uncountable[run.identity] -= 1
            continue
        count, through = counted.get(run.cron_job, (0, -1))
        moment = int(run.identity[-1])
        if moment > through:
            count, through = count + 1, moment
        counted[run.cron_job] = (count, through)
        # A backfill counts, but is not refused by the limit (docs/beyond-builtin.md, 11).
        if run.identity[0] == "scheduled" and count > run.run_limit:
            breaches.append(f"{run.job}: scheduled run {count} of {run.run_limit}")
    return breaches


@dataclasses.dataclass(frozen=True)
class Settled:
    """What one CronJob's stored status says of its scheduled times, at quiescence."""

    accounted_through: datetime | None
    skipped: int
    """The sum of every reason's count in ``status.skippedRuns``."""
    pending: frozenset[datetime]
    """``bufferedRun`` and ``waitingForGroup``: times that wait, not yet settled."""

    @classmethod
    def of(cls, status: Mapping[str, Any]) -> Settled:
        skipped = status.get("skippedRuns") or {}
        buffered, waiting = status.get("bufferedRun"), status.get("waitingForGroup")
        pending = {_instant(buffered)} if buffered else set()
        if waiting:
            pending.add(_instant(waiting["scheduledTime"]))
        through = skipped.get("accountedThrough")
        return cls(
            accounted_through=_instant(through) if through else None,
            skipped=sum(v for k, v in skipped.items() if k != "accountedThrough"),
            pending=frozenset(pending),
        )


def stagger_of(spec: Mapping[str, Any], namespace: str, name: str) -> timedelta:
    """The CronJob's fixed stagger offset: the first 8 bytes of sha256("ns/name") modulo
    ``staggerSeconds`` + 1 (docs/beyond-builtin.md, 4)."""
    most = spec.get("staggerSeconds") or 0
    digest = hashlib.sha256(f"{namespace}/{name}".encode()).digest()
    return timedelta(seconds=int.from_bytes(digest[:8], "big") % (most + 1))


def due_times(spec: Mapping[str, Any], after: datetime, through: datetime) -> list[datetime]:
    """The scheduled times of ``spec``'s schedule(s) in (``after``, ``through``] inside
    ``spec.window``: the times that fell due, for a CronJob whose schedule and zone were
    never edited (an excluded time falls due, and is counted skipped)."""
    zone = spec.get("timeZone")
    listed = spec.get("schedules")
    parsed: schedules.AnySchedule = (
        schedules.parse_schedules(listed, zone)
        if listed
        else schedules.parse_schedule(spec["schedule"], zone)
    )
    window = spec.get("window") or {}
    start, end = window.get("start"), window.get("end")
    return [
        moment
        for moment in schedules.times_between(parsed, after, through, limit=100_000)
        if (start is None or moment >= _instant(start)) and (end is None or moment < _instant(end))
    ]


def unsettled(
    spec: Mapping[str, Any],
    created: datetime,
    status: Mapping[str, Any],
    runs: Sequence[Run],
    *,
    stagger: timedelta = timedelta(0),
    lost: Mapping[Identity, int] | None = None,
) -> str | None:
    """Rule 2 at quiescence for one CronJob: the due times through ``accountedThrough``
    against the scheduled runs started, the skipped counts and the pending times; a
    description of the difference, or None when they add up. ``stagger``: the CronJob's
    offset (``stagger_of``). ``lost``: how often each identity's Job was deleted by
    someone else before status recorded it; a time whose every start was lost so is
    counted as the controller sees it: as run while it still remembers creating the Job
    (nothing in status), or, once it forgot (a restart), skipped or started again."""
    settled = Settled.of(status)
    if settled.accounted_through is None:
        return None
    # The first run is the first whose staggered time is after the creation.
    due = due_times(spec, created - stagger, settled.accounted_through)
    starts: dict[Identity, int] = defaultdict(int)
    for run in runs:
        if _runs_its_time(run):
            starts[run.identity] += 1
    lost = lost or {}
    started = {
        int(identity[-1]) for identity, count in starts.items() if count > lost.get(identity, 0)
    }
    forgettable = {int(identity[-1]) for identity in starts if int(identity[-1]) not in started}
    limit = spec.get("maxScheduledRuns")
    reached = None if limit is None else _limit_reached_at(runs, limit, lost)
    if reached is not None:
        through, unsettled_then = reached
        due = [
            moment
            for moment in due
            if int(moment.timestamp()) <= through and int(moment.timestamp()) not in unsettled_then
        ]
    ran = [moment for moment in due if int(moment.timestamp()) in started]
    waiting = [moment for moment in due if moment in settled.pending]
    # Each lost time the controller still remembered counts as run, not skipped.
    remembered = sum(1 for moment in due if int(moment.timestamp()) in forgettable)
    if 0 <= len(due) - (len(ran) + settled.skipped + len(waiting)) <= remembered:
        return None
    return (
        f"{len(due)} times due through {settled.accounted_through.isoformat()}, but "
        f"{len(ran)} started + {settled.skipped} skipped + {len(waiting)} pending"
    )


def _limit_reached_at(
    runs: Iterable[Run], limit: int, lost: Mapping[Identity, int]
) -> tuple[int, frozenset[int]] | None:
    """Where ``maxScheduledRuns`` ends the schedule: the last scheduled time (Unix
    seconds) it settles, and the times pending then, which are no runs; None while some
    runs remain. Runs count in the order they were created, each time after the newest
    counted one (scheduled and backfill runs alike, docs/beyond-builtin.md, 11). The limit
    ends the schedule where it is used up in that order, not in scheduled-time order: a
    backfill run that uses it up ends the schedule after the times already settled when
    it was created (its ``settled_through``), which stay as they were, started or
    skipped; a time still pending then (a buffered one) never starts, unless the run
    that uses the limit up is a scheduled one, which settles the times before its own as
    it starts (a waiting run moves to the newest due time, the older one counted
    skipped; found by a story: seed 14 of 2,000). A run whose Job
    someone else deleted before status recorded it (``lost``) is not counted: the
    controller cannot know it started (as in ``limit_breaches``)."""
    count, through = 0, -1
    uncountable = dict(lost)
    for run in runs:
        if run.identity[0] == "request":
            continue
        if uncountable.get(run.identity, 0) > 0:
            uncountable[run.identity] -= 1
            continue
        moment = int(run.identity[-1])
        if moment > through:
            count, through = count + 1, moment
            if count == limit:
                # A scheduled run settles the times before it as it starts (a waiting
                # one moves to it, counted skipped): only a backfill run leaves them.
                left = run.pending - {moment} if run.identity[0] == "backfill" else frozenset()
                return max(moment, run.settled_through or moment), left
    return None


def _runs_its_time(run: Run) -> bool:
    """Whether ``run`` is the run of its scheduled time: a scheduled run, or a backfill
    of a time not yet settled, or settled as pending (it ran, so the schedule does not
    run or count it; a buffered time whose Job it created is not run again)."""
    if run.identity[0] == "scheduled":
        return True
    if run.identity[0] != "backfill":
        return False
    moment = int(run.identity[-1])
    return run.settled_through is None or moment > run.settled_through or moment in run.pending


def _instant(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))
