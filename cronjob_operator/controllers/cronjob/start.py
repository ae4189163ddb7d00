"""The start stage: every run, whatever its source, starts here, in one way.

A source (``sources.py``: a run request, a backfill's next time, the scheduled time due
now) admits its run and hands it over as a :class:`Run`. :meth:`Starter.start` asks
concurrencyPolicy for room (``concurrency.room_for``: Forbid and BufferOne wait while a
run is active; Replace deletes the active Jobs, but only those the stored status
records, docs/cronjob-semantics.md "The rule", 3, and otherwise waits for the write that
records them), then creates the Job, the group's slot claimed with the create (the
reconciler's ``perform``, ``group_slots.py``), and records the new run in the status
(``active``; a scheduled run's ``lastScheduleTime``, never backwards). A new source adds
a :class:`Run`, not a method that mends how it meets Replace or a group.

What a start teaches the rest of the decision is kept here: the Jobs this reconcile
created (``started``: Jobs first, their status write is the follow-up's), whether Replace
waits for a status write (``record_first``), the Jobs its Replace deleted (their group
slots are free) and the scheduled time a full group skipped (``group_skipped``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from enum import Enum
from typing import Any, NamedTuple

from cronjob_operator.api import cronjob_rules as rules
from cronjob_operator.api.batch_v1 import BACKFILL_ANNOTATION, ConcurrencyPolicy
from cronjob_operator.controllers.cronjob import (
    backfill,
    concurrency,
    groups,
    history,
    jobs,
    requests,
)
from cronjob_operator.controllers.cronjob.plan import (
    Create,
    Created,
    Delete,
    Foreign,
    GroupFull,
    Problem,
    Rejected,
    Steps,
    Unknown,
)
from cronjob_operator.controllers.cronjob.status import CronJobStatus
from cronjob_operator.controllers.cronjob.view import CronJobView, stamp, time_at
from cronjob_operator.runtime import errors, objects
from cronjob_operator.runtime.sharding import owned_object_labels

__all__ = ["Run", "Source", "Starter", "Waits"]


class Source(Enum):
    """Where a run comes from, which is what its identity is made of (docs/
    cronjob-semantics.md, "The rule"): a scheduled time, a run request's token, or a
    backfill's token and time."""

    SCHEDULED = "scheduled"
    REQUESTED = "requested"
    BACKFILL = "backfill"


class Run(NamedTuple):
    """A run one source asks to start, past that source's admission."""

    source: Source
    job: Callable[[], dict[str, Any]]
    """Builds its Job (built only once concurrencyPolicy lets it start)."""
    scheduled: datetime | None = None
    """A scheduled run's time, which it records as lastScheduleTime (never backwards)."""
    due_at: datetime | None = None
    """When a scheduled run was due, with its stagger (None: late by design, buffered)."""
    walk_behind: bool = False
    """The skip accounting has older times left to walk (a full group's skip waits)."""


class Waits(NamedTuple):
    """concurrencyPolicy said wait: Forbid or BufferOne with a run active, or Replace
    waiting (``replacing``) for a status write or for the Job it replaces to end."""

    replacing: bool


class Starter:
    """The start stage of one decision, and what its starts have taught it."""

    __slots__ = (
        "created",
        "group_skipped",
        "record_first",
        "replaced",
        "started",
        "status",
        "steps",
        "view",
    )

    def __init__(self, view: CronJobView, status: CronJobStatus, steps: Steps) -> None:
        self.view = view
        self.status = status
        self.steps = steps
        self.started: list[objects.Obj] = []
        self.created: set[str] = set()  # the names of the Jobs this reconcile created
        self.record_first = False  # Replace or a start timeout waits for a write (rule 3)
        self.replaced: set[str] = set()  # the Jobs its Replace deleted (their group slots)
        self.group_skipped: datetime | None = None  # a scheduled run skipped, its group full

    def start(self, run: Run) -> Problem | Waits | None:
        """Start ``run``, past its source's admission: concurrencyPolicy makes room (or
        says wait), then its Job is created (the group's slot is claimed with the create).
        The one way any run begins, whatever its source."""
        if not self._make_room():
            return Waits(replacing=self._replacing())
        return self._create(run)

    def _make_room(self) -> bool:
        """Apply concurrencyPolicy before a new run: False if it says wait.

        Replace deletes only Jobs whose run the stored status records (docs/
        cronjob-semantics.md, "The rule", 3): a Job is the only evidence of a run its
        stored status does not record, and a retry or follow-up that no longer finds it
        would run that run again. When the status this reconcile computed records it,
        the reconcile writes that status and its follow-up replaces (``record_first``);
        when none can yet (a time a running backfill has still to reach), the new run
        waits for that Job, as under Forbid. A failed delete raises: the reconcile writes
        what it learned, then fails."""
        active = self.status.get("active") or []
        room = concurrency.room_for(self.view.spec.concurrency_policy, active)
        if not all(self.records(self.view.stored, ref["name"]) for ref in room.replace):
            self.record_first |= all(self.records(self.status, ref["name"]) for ref in room.replace)
            return False
        for ref in room.replace:
            outcome = self.steps.perform(Delete(ref["name"], ref.get("uid"), replace=True))
            if isinstance(outcome, Rejected):
                raise outcome.error
            active.remove(ref)
            self.replaced.add(ref["name"])
        return not room.wait

    def _replacing(self) -> bool:
        return self.view.spec.concurrency_policy is ConcurrencyPolicy.REPLACE

    def records(self, status: Mapping[str, Any], job_name: str) -> bool:
        """Whether ``status`` records the run of this CronJob's Job ``job_name``: never
        the stored status for a Job this reconcile created, nor any status for a time of
        a requested backfill that status has not started (the Job may be its step, or
        one it must count done)."""
        view = self.view
        if status is view.stored and job_name in self.created:
            return False
        moment = jobs.scheduled_time(view.name, job_name)
        if moment is not None and self._unstarted_backfill_covers(status, moment):
            return False
        unhandled = requests.unrecorded_manual_job({**view.obj, "status": status})
        return history.records(status, view.name, job_name, unhandled_manual_job=unhandled)

    def _unstarted_backfill_covers(self, status: Mapping[str, Any], moment: datetime) -> bool:
        request = rules.parse_request(self.view.annotations.get(BACKFILL_ANNOTATION))
        if isinstance(request, str) or backfill.recorded(status.get("backfill"), request):
            return False
        return request.start <= moment < request.end

    def _create(self, run: Run) -> Problem | None:
        """Create ``run``'s Job: a new one holds back the status write (Jobs first) unless
        a run request's; a scheduled run also moves lastScheduleTime."""
        job, scheduled = run.job(), run.scheduled
        name = job["metadata"]["name"]
        job["metadata"]["labels"] = owned_object_labels(
            job["metadata"].get("labels", {}), self.view.obj
        )
        outcome = self.steps.perform(Create(job, due=run.due_at, replaced=frozenset(self.replaced)))
        if isinstance(outcome, Unknown):
            raise outcome.error
        if isinstance(outcome, GroupFull):
            counted = self.status.get("skippedRuns")
            problem = groups.on_full(
                self.status,
                self.view.stored,
                outcome,
                scheduled,
                self.steps,
                walk_behind=run.walk_behind,
            )
            if self.status.get("skippedRuns") != counted:
                self.group_skipped = scheduled  # reported with the rest of the accounting
            return problem
        if isinstance(outcome, Foreign):
            message = f"Job {name} exists and is not controlled by this CronJob; not touching it"
            self.steps.event("Warning", "UnexpectedJob", message)
            return None
        if isinstance(outcome, Rejected):
            exc = outcome.error
            if isinstance(exc, errors.Invalid):
                message = (
                    f"spec.jobTemplate: the API server rejected Job {name}: {exc.message}; "
                    "fix the template (every run would be rejected the same way)"
                )
                self.steps.event("Warning", "FailedCreate", message)
                return Problem("InvalidJobTemplate", message)
            if errors.has_status_cause(exc, errors.NAMESPACE_TERMINATING_CAUSE):
                return _namespace_terminating(self.view.namespace)
            self.steps.event("Warning", "FailedCreate", f"Error creating job: {exc}")
            raise exc  # the reconcile writes what it learned, then fails
        assert isinstance(outcome, Created)
        created = outcome.job
        if outcome.new:
            self.steps.event("Normal", "SuccessfulCreate", f"Created job {name}")
            self.created.add(name)
            if run.source is not Source.REQUESTED:  # a request's write is not held back
                self.started.append(created)
        ref = jobs.job_reference(created)
        active = self.status.setdefault("active", [])
        running = jobs.finished_state(created) is None  # an existing Job may be done already
        if running and all(entry.get("uid") != ref["uid"] for entry in active):
            active.append(ref)
        last = time_at(self.status, "lastScheduleTime")
        if scheduled is not None and (last is None or scheduled > last):  # never backwards
            self.status["lastScheduleTime"] = stamp(scheduled)
        return None


def _namespace_terminating(namespace: str) -> Problem:
    """A create refused because the namespace is being deleted: no Warning, as the
    built-in; unlike it, no retry either (a terminating namespace never becomes active
    again; deleting it deletes the CronJob, and that reconciles)."""
    message = (
        f"metadata.namespace: {namespace} is being deleted, so no Job can be created in it "
        "and no run starts; the CronJob is deleted with it (create it in another namespace "
        "to keep it running)"
    )
    return Problem("NamespaceTerminating", message, retry=False)
