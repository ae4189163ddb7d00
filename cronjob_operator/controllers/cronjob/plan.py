"""The Plan: everything one reconcile does, as ``decide`` returns it and the reconciler applies it.

A Plan is data, not I/O: the steps in their order (events, deletes, creates), the status
to write (None: write nothing), the notices and skipped runs reported once that write
lands, the gauge to set, the result, and the API error to raise after the write. A
create, and a delete that ``Replace`` makes room with, has an outcome the rest of the
decision depends on (the new Job joins ``status.active``; a failed delete stops the
reconcile before anything is created). The reconciler passes a :data:`Perform`: the
decision hands it such a step when it comes to it, with the steps recorded before it,
and goes on with its :data:`Outcome` (one decision per reconcile, however many steps it
performs). Without one (a decision asked what it would do), such a step ends the Plan
with ``pending`` set; the outcomes known so far can be given by step index, and as the
decision is pure the steps before the pending one come out the same each time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from cronjob_operator.controllers.cronjob.history import Notice
from cronjob_operator.controllers.cronjob.policies import Accounting
from cronjob_operator.controllers.stored import Misfit
from cronjob_operator.runtime import errors, objects
from cronjob_operator.runtime.controller import Result

__all__ = [
    "Create",
    "Created",
    "Delete",
    "Deleted",
    "Event",
    "Foreign",
    "GroupFull",
    "Outcome",
    "Perform",
    "Plan",
    "Problem",
    "Rejected",
    "Step",
    "Unknown",
]


@dataclass(frozen=True, slots=True)
class Problem:
    """Why the CronJob cannot be scheduled as written: Degraded's reason and message.

    ``stops_schedule`` is False for a problem that leaves scheduled runs going (a Job the
    API server rejects, a bad run request): Available stays True. ``retry`` is False when
    no later attempt can succeed (the namespace is being deleted): no requeue then."""

    reason: str
    message: str
    stops_schedule: bool = True
    retry: bool = True


@dataclass(frozen=True, slots=True)
class Event:
    """An event about the CronJob."""

    type: str
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class Delete:
    """Delete the Job ``name`` if it still has ``uid``. ``replace``: an active Job
    ``Replace`` makes room for, or a run ended by its start timeout (its outcome matters);
    else a pruned one."""

    name: str
    uid: str | None
    replace: bool = False


@dataclass(frozen=True, slots=True)
class Create:
    """Create ``job``; ``due`` (its staggered scheduled time) feeds the skew histogram;
    ``replaced``: the Jobs this reconcile's Replace deleted to make room, whose group
    slots it takes over."""

    job: Mapping[str, Any]
    due: datetime | None = None
    replaced: frozenset[str] = frozenset()


Step = Event | Delete | Create


@dataclass(frozen=True, slots=True)
class Created:
    """The Job the API server holds now: the one created, or ours that existed already
    (``new`` False)."""

    job: objects.Obj
    new: bool = True


@dataclass(frozen=True, slots=True)
class Foreign:
    """A Job of that name exists and another owner controls it."""


@dataclass(frozen=True, slots=True)
class Rejected:
    """The API server refused the create (Invalid) or the delete; ``error`` as raised."""

    error: errors.ApiError


@dataclass(frozen=True, slots=True)
class Unknown:
    """The create was refused as existing, and reading the Job of that name failed:
    ``error`` as raised (the reconcile writes what it learned, then fails)."""

    error: errors.ApiError


@dataclass(frozen=True, slots=True)
class Deleted:
    """The Job is gone (deleted now, or already)."""


@dataclass(frozen=True, slots=True)
class GroupFull:
    """No slot of the CronJob's ConcurrencyGroup ``group`` for the Job (``groups.py``):
    ``queued``, the run holds a place among the waiting ones; ``missing``, the group
    does not exist; ``misfit``, the group holds a field its schema does not admit
    (``controllers.stored``)."""

    group: str
    queued: bool = False
    missing: bool = False
    misfit: Misfit | None = None


Outcome = Created | Foreign | Rejected | Unknown | Deleted | GroupFull


@dataclass(frozen=True, slots=True)
class Plan:
    """What one reconcile does; see the module docstring."""

    steps: tuple[Step, ...]
    pending: bool = False
    status: dict[str, Any] | None = None
    notices: tuple[Notice, ...] = ()
    accounting: Accounting | None = None
    active: int | None = None
    result: Result = field(default_factory=Result)
    error: errors.ApiError | None = None


Perform = Callable[[Sequence[Step], Create | Delete], Outcome]
"""Performs a step whose outcome the decision needs, after the steps recorded before it
that are not applied yet (in their order), and returns its outcome; it raises no
``ApiError`` (a failure is an outcome)."""


class Pending(Exception):
    """Raised inside the decision at a step whose outcome it does not know yet."""


class Steps:
    """The Plan's steps as the decision records them, with the outcomes known so far
    (by step index)."""

    def __init__(self, outcomes: Mapping[int, Outcome], perform: Perform | None = None) -> None:
        self.steps: list[Step] = []
        self._outcomes = outcomes
        self._perform = perform

    def event(self, type_: str, reason: str, message: str) -> None:
        self.steps.append(Event(type_, reason, message))

    def prune(self, name: str, uid: str | None) -> None:
        """A delete whose outcome changes nothing the decision goes on to do."""
        self.steps.append(Delete(name, uid))

    def perform(self, step: Create | Delete) -> Outcome:
        """A step the rest of the decision depends on: its outcome (known, or performed
        now), or ``Pending``."""
        index = len(self.steps)
        outcome = self._outcomes.get(index)
        if outcome is None and self._perform is not None:
            outcome = self._perform(self.steps, step)
        self.steps.append(step)
        if outcome is None:
            raise Pending(index)
        return outcome
