"""The CronJob spec as the controller reads it: typed, read leniently, never raising.

``CronJobSettings`` is what the reconciler acts on (``CronJobView.spec``) and what the
rules in ``cronjob_rules`` read a spec as. It is kept apart from ``batch_v1``'s pydantic
models (which re-export it, with the policies it types) so that the rules, the
admission webhook and ``kubectl cjt`` read a spec without importing pydantic.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final, NamedTuple, TypeVar

__all__ = [
    "CatchUpPolicy",
    "ConcurrencyPolicy",
    "CronJobSettings",
    "Unusable",
    "WhenGroupFull",
    "read_settings",
    "settings_of",
]


class ConcurrencyPolicy(StrEnum):
    """Specifies how to treat concurrent executions of a Job. Valid values are:

    - "Allow" (default): allows CronJobs to run concurrently;
    - "Forbid": forbids concurrent runs, skipping next run if previous run hasn't
      finished yet;
    - "Replace": cancels currently running job and replaces it with a new one;
    - "BufferOne": a time that comes due while a run is active starts as soon as that
      run finishes; at most one waits (status.bufferedRun), later ones are skipped"""

    ALLOW = "Allow"
    FORBID = "Forbid"
    REPLACE = "Replace"
    BUFFER_ONE = "BufferOne"


class CatchUpPolicy(StrEnum):
    """Which missed scheduled times run after the controller could not start them (it
    was down, or behind). Valid values are:

    - "Latest" (the default when unset): the newest missed time within
      startingDeadlineSeconds, as the built-in CronJob;
    - "All": every missed time within startingDeadlineSeconds, oldest first, each once,
      at most the newest 100"""

    LATEST = "Latest"
    ALL = "All"


class WhenGroupFull(StrEnum):
    """What a run does when its concurrency group has no free slot. Valid values are:

    - "Wait" (the default): it starts when a slot frees, the waiting runs of the group
      in scheduled-time order, while its startingDeadlineSeconds has not passed;
    - "Skip": it does not run, and is counted in status.skippedRuns.groupFull"""

    WAIT = "Wait"
    SKIP = "Skip"


@dataclass(frozen=True, slots=True)
class Unusable:
    """A spec value stored past validation that the controller cannot act on, as stored:
    it reports the value (its Warning and Degraded message quote it) and goes on without."""

    value: object


class CronJobSettings(NamedTuple):
    """The spec fields the reconciler acts on, typed, read without validating them.

    An enum value stored past validation reads as its default (an unknown
    concurrencyPolicy as Allow, an unknown catchUpPolicy as Latest); a number of the
    wrong type as unset, except the two the controller reports (:class:`Unusable`).
    Unset history limits stay None (at most ``MAX_HISTORY_LIMIT`` Jobs are kept then)."""

    schedule: str | None = None
    """``spec.schedule`` as a string (None: unset)."""
    schedules: tuple[str, ...] | None = None
    """``spec.schedules`` as strings (None: unset, or not a list)."""
    time_zone: Any = None
    """``spec.timeZone`` as stored (the schedule parser reports one it cannot use)."""
    starting_deadline_seconds: int | None = None
    concurrency_policy: ConcurrencyPolicy = ConcurrencyPolicy.ALLOW
    catch_up_policy: CatchUpPolicy = CatchUpPolicy.LATEST
    suspend: bool = False
    successful_jobs_history_limit: int | None = None
    failed_jobs_history_limit: int | None = None
    stagger_seconds: int | Unusable = 0
    pause_after_failures: int | None = None
    """``spec.failurePolicy.pauseAfterConsecutiveFailures`` when it is 1 or more (None:
    no failure pause)."""
    unusable_pause: Unusable | None = None
    """A failure policy stored past validation (not a positive whole number)."""
    concurrency_group: str | None = None
    """``spec.concurrencyGroup.name`` when it is a non-empty string (None: no group)."""
    group_waits: bool = True
    """Whether a scheduled run that finds the group full waits (``whenFull`` not Skip)."""
    max_scheduled_runs: int | Unusable | None = None
    """``spec.maxScheduledRuns`` (None: unset; the stored value if not whole, which the
    window's rules report)."""
    window: Any = None
    """``spec.window`` as stored (the window's rules report one they cannot use)."""
    exclusions: Any = None
    """``spec.exclusions`` as stored (the window's rules report one they cannot use)."""
    run_start_timeout_seconds: int | None = None
    """``spec.runStartTimeoutSeconds`` when it is a whole number (its range is checked
    where it is used)."""


def read_settings(cronjob: Mapping[str, Any]) -> CronJobSettings:
    """The reconciler's view of a CronJob object (raw JSON, e.g. from the cache).

    Unknown fields and the job template are not looked at; never raises: a schedule or
    time zone that validation would reject is returned as stored, for the controller
    to report, and other values as :class:`CronJobSettings` says."""
    return settings_of(cronjob.get("spec") or {})


def settings_of(spec: Mapping[str, Any]) -> CronJobSettings:
    """:func:`read_settings` of a CronJob's ``spec``."""
    schedule = spec.get("schedule")
    many = spec.get("schedules")
    pause, unusable_pause = _pause_of(spec.get("failurePolicy"))
    group = spec.get("concurrencyGroup")
    return CronJobSettings(
        schedule=None if schedule is None else str(schedule),
        schedules=tuple(str(entry) for entry in many) if isinstance(many, list | tuple) else None,
        time_zone=spec.get("timeZone"),
        starting_deadline_seconds=_whole(spec.get("startingDeadlineSeconds")),
        concurrency_policy=_member(
            _CONCURRENCY_POLICIES, spec.get("concurrencyPolicy"), ConcurrencyPolicy.ALLOW
        ),
        catch_up_policy=_member(
            _CATCH_UP_POLICIES, spec.get("catchUpPolicy"), CatchUpPolicy.LATEST
        ),
        suspend=bool(spec.get("suspend")),
        successful_jobs_history_limit=_whole(spec.get("successfulJobsHistoryLimit")),
        failed_jobs_history_limit=_whole(spec.get("failedJobsHistoryLimit")),
        stagger_seconds=_stagger_of(spec.get("staggerSeconds")),
        pause_after_failures=pause,
        unusable_pause=unusable_pause,
        concurrency_group=_group_name(group),
        group_waits=_group_waits(group),
        max_scheduled_runs=_limit_of(spec.get("maxScheduledRuns")),
        window=spec.get("window"),
        exclusions=spec.get("exclusions"),
        run_start_timeout_seconds=_whole(spec.get("runStartTimeoutSeconds")),
    )


_Enum = TypeVar("_Enum", bound=StrEnum)

_CONCURRENCY_POLICIES: Final = {policy.value: policy for policy in ConcurrencyPolicy}
_CATCH_UP_POLICIES: Final = {policy.value: policy for policy in CatchUpPolicy}


def _whole(value: Any) -> int | None:
    """``value`` if it is a whole number (not a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _member(members: Mapping[str, _Enum], value: Any, default: _Enum) -> _Enum:
    """The member named by ``value`` (``members``: by value); ``default`` when unset or
    unknown."""
    return members.get(value, default) if isinstance(value, str) else default


def _stagger_of(value: Any) -> int | Unusable:
    """``spec.staggerSeconds``: 0 when unset or zero, the stored value if not whole."""
    if value is None or value == 0:
        return 0
    whole = _whole(value)
    return Unusable(value) if whole is None else whole


def _limit_of(value: Any) -> int | Unusable | None:
    """``spec.maxScheduledRuns``: None when unset, the stored value if not whole."""
    if value is None:
        return None
    whole = _whole(value)
    return Unusable(value) if whole is None else whole


def _group_name(ref: Any) -> str | None:
    """``spec.concurrencyGroup.name`` when it is a non-empty string, else None."""
    name = ref.get("name") if isinstance(ref, Mapping) else None
    return name if isinstance(name, str) and name else None


def _group_waits(ref: Any) -> bool:
    """Whether ``spec.concurrencyGroup.whenFull`` is anything but Skip (unset: Wait)."""
    return not isinstance(ref, Mapping) or ref.get("whenFull") != WhenGroupFull.SKIP


def _pause_of(policy: Any) -> tuple[int | None, Unusable | None]:
    """``spec.failurePolicy``'s threshold when it is 1 or more, and the stored value when
    it is set but is not (a failure policy that is not an object counts as that value)."""
    if policy is None:
        return None, None
    if not isinstance(policy, Mapping):
        return None, Unusable(policy)
    raw = policy.get("pauseAfterConsecutiveFailures")
    threshold = _whole(raw)
    if threshold is not None and threshold >= 1:
        return threshold, None
    return None, (None if raw is None else Unusable(raw))
