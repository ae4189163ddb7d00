"""Where runs come from: a run request, a backfill's next time, the scheduled time due now.

Each source finds its due run (its identity: a request's token, a backfill's token and
time, a scheduled time), admits it by its own rules, records what is its own, and hands
the run to the start stage (``start.py``), which applies concurrencyPolicy and creates
the Job the same way for all three:

- a run request (``requests.py``): a token not handled yet, even while the CronJob is
  suspended or paused; while it waits, ``status.pendingRunRequest``;
- a backfill (``backfill.py``): the requested range's progress, recorded once per token,
  and its next time once that time has come, one per reconcile, in order;
- the schedule (``due.py`` computes it from ``runs.py``, ``policies.py``,
  ``concurrency.py``, ``limits.py`` and the stagger of ``api/cronjob_rules.py``): the
  time due now inside the window, exclusions and run limit, neither suspended nor
  paused, before its deadline; with the skip accounting, BufferOne's buffer and the
  catch-up policy's times.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, NamedTuple
from zoneinfo import ZoneInfo

from cronjob_operator import schedule as schedules
from cronjob_operator.api import cronjob_rules as rules
from cronjob_operator.api.batch_v1 import BACKFILL_ANNOTATION, BackfillState
from cronjob_operator.controllers.cronjob import (
    backfill,
    conditions,
    due,
    jobs,
    limits,
    policies,
    requests,
    runs,
)
from cronjob_operator.controllers.cronjob.due import SOON, Walks
from cronjob_operator.controllers.cronjob.plan import Problem, Steps
from cronjob_operator.controllers.cronjob.start import Run, Source, Starter, Waits
from cronjob_operator.controllers.cronjob.status import Backfill, CronJobStatus
from cronjob_operator.controllers.cronjob.view import CronJobView, shown, stamp, time_at
from cronjob_operator.runtime import objects
from cronjob_operator.runtime.controllerutil import rfc3339

__all__ = ["Decided", "Sources"]


class Decided(NamedTuple):
    """What the backfill or the scheduling step decided: when to look again (None: the
    events that matter reconcile again), any problem, and the skipped runs this
    reconcile accounted for (the scheduling step's)."""

    requeue: timedelta | None = None
    problem: Problem | None = None
    accounting: policies.Accounting | None = None


class Sources:
    """The three sources of one decision, in the order it asks them."""

    __slots__ = ("now", "starter", "status", "steps", "view", "walks")

    def __init__(
        self,
        view: CronJobView,
        status: CronJobStatus,
        steps: Steps,
        starter: Starter,
        now: datetime,
        walks: Walks,
    ) -> None:
        self.view = view
        self.status = status
        self.steps = steps
        self.starter = starter
        self.now = now
        self.walks = walks

    def requested(self) -> Problem | None:
        """Run now: create the Job an unhandled run request asks for (even if suspended)."""
        view, status = self.view, self.status
        request = requests.run_request(view.obj)
        if request is None or view.deleting:
            status.pop("pendingRunRequest", None)
            return None
        if isinstance(request, str):
            self.steps.event("Warning", "InvalidRunRequest", request)
            return Problem("InvalidRunRequest", request, stops_schedule=False)
        token = request.token
        name = rules.manual_job_name(view.name, token)
        owned = {objects.name_of(job) for job in view.jobs.owned()}
        if name not in owned:
            started = self.starter.start(
                Run(Source.REQUESTED, functools.partial(jobs.build_manual_job, view.obj, request))
            )
            if isinstance(started, Waits):
                if started.replacing:
                    return None  # the follow-up, or the end of the Job it waits for, replaces
                if status.get("pendingRunRequest") != token:
                    self.steps.event(
                        "Normal",
                        "RunRequestPending",
                        f"run request {token!r} waits: a job is active and concurrencyPolicy "
                        "is Forbid; it starts when the active job finishes",
                    )
                status["pendingRunRequest"] = token
                return None
            if started is not None:
                return dataclasses.replace(started, stops_schedule=False)
        status.pop("pendingRunRequest", None)
        status["lastHandledRunRequest"] = token
        return None

    def backfill(self) -> Decided:
        """Start, cancel or advance the requested backfill, and create the Job of its
        next time when it is due and concurrencyPolicy makes room (one per reconcile, in
        order)."""
        view, status, now = self.view, self.status, self.now
        raw = view.annotations.get(BACKFILL_ANNOTATION)
        progress = status.get("backfill")
        running = (progress or {}).get("state") == BackfillState.RUNNING
        if raw is None or view.deleting:
            if running and raw is None:
                self._record_backfill(backfill.cancelled(status["backfill"]), "BackfillCancelled")
            return Decided()
        try:
            schedule = rules.schedule_of(view.spec)
        except schedules.ScheduleError:
            return Decided()  # reported by the scheduling step
        request = rules.parse_request(raw)
        if isinstance(request, str):
            return self._backfill_refused(f"{rules.BACKFILL_FIELD}: {request}")
        # The state first: a recorded request was checked when it started, and one that
        # is done needs no schedule times (its cost must not outlive it).
        recorded = backfill.recorded(progress, request)
        if recorded and not running:
            return Decided()
        if recorded:
            request = backfill.as_recorded(status["backfill"], request)
        problem = None if recorded else rules.count_problem(schedule, request)
        if problem is not None:
            return self._backfill_refused(problem)
        times = rules.times_of(schedule, request)
        if not recorded:
            if running:
                self._record_backfill(backfill.cancelled(status["backfill"]), "BackfillCancelled")
            self._record_backfill(backfill.start(request, times), "BackfillStarted")
        if status["backfill"].get("state") != BackfillState.RUNNING:
            return Decided()
        ran = runs.ran(view.name, view.jobs, {}) | runs.went_missing(
            view.name, view.stored, view.missing
        )
        progress = status["backfill"] = backfill.advanced(status["backfill"], times, ran)
        upcoming = time_at(progress, "next")
        if upcoming is None:
            self.steps.event("Normal", "BackfillComplete", _backfill_message(status))
            return Decided()
        if upcoming > now:
            return Decided(upcoming - now + timedelta(milliseconds=100))
        started = self.starter.start(
            Run(
                Source.BACKFILL,
                functools.partial(_backfill_job, view.obj, upcoming, schedule.zone, request.token),
            )
        )
        if isinstance(started, Waits):
            return Decided()  # the active Job's end reconciles again
        return Decided(
            SOON, None if started is None else dataclasses.replace(started, stops_schedule=False)
        )

    def _record_backfill(self, progress: Backfill, reason: str) -> None:
        """Record ``progress`` as ``status.backfill`` and announce it (``reason``)."""
        self.status["backfill"] = progress
        self.steps.event("Normal", reason, _backfill_message(self.status))

    def _backfill_refused(self, problem: str) -> Decided:
        """An unusable backfill request's Warning event and problem (nothing to requeue)."""
        self.steps.event("Warning", "InvalidBackfill", problem)
        return Decided(problem=Problem("InvalidBackfill", problem, stops_schedule=False))

    def scheduled(self) -> Decided:
        """Steps 5-9: maybe create the due Job; when to look again, any problem, and the
        skipped runs this reconcile accounted for.

        Sets ``status.nextScheduleTime``, or removes it when no scheduled run will start.
        """
        view, status, now = self.view, self.status, self.now
        conditions.set_next_schedule_time(status, None)
        since = runs.observe_schedule(status, view.spec, created=view.created or now, now=now)
        if view.deleting:
            return Decided()
        # Suspended or paused: nothing starts, but the times that come are accounted for.
        holding = view.spec.suspend or conditions.paused(view.spec, status)
        try:
            window = limits.bounds(status, view)  # the run limit's count, then the window
        except (schedules.ScheduleError, rules.WindowError) as exc:
            timing: due.Timing | due.Unschedulable | None = due.refusal(exc, holding)
        else:
            timing = due.timing_of(
                view, status, now=now, since=since, holding=holding, walks=self.walks, window=window
            )
        if timing is None:
            return Decided()
        if isinstance(timing, due.Unschedulable):
            self.steps.event("Warning", timing.event_reason, timing.problem.message)
            return Decided(problem=None if holding else timing.problem)
        due_runs = due.due_runs_of(view, status, timing, now=now, since=since, holding=holding)
        self._record_due_runs(due_runs)
        if holding:
            return Decided(due_runs.requeue, accounting=due_runs.accounting)
        return self._start_due_run(timing, due_runs)

    def _record_due_runs(self, due_runs: due.DueRuns) -> None:
        """Record the buffered time (announcing a new one) and the skipped runs."""
        status, buffering = self.status, due_runs.buffering
        if buffering.buffered is None and time_at(status, "bufferedRun") is not None:
            status.pop("bufferedRun")
        elif buffering.buffered is not None:
            status["bufferedRun"] = stamp(buffering.buffered)
        if buffering.newly_buffered:
            assert buffering.buffered is not None
            self.steps.event(
                "Normal",
                "RunBuffered",
                f"the run scheduled at {rfc3339(buffering.buffered)} waits: a job is active "
                "and concurrencyPolicy is BufferOne; it starts when no job is active",
            )
        if due_runs.skipped_runs is not None:
            status["skippedRuns"] = due_runs.skipped_runs

    def _start_due_run(self, timing: due.Timing, due_runs: due.DueRuns) -> Decided:
        """Record the next time and start the due run, if any."""
        walked, offset, accounting = timing.due, timing.offset, due_runs.accounting
        conditions.set_next_schedule_time(
            self.status, limits.next_run(timing.window, timing.schedule, walked, offset)
        )
        target = due_runs.buffering.run_now
        if target is None:
            if walked.scheduled is None and walked.next_time is None:
                field = "spec.schedule" if self.view.spec.schedule is not None else "spec.schedules"
                message = f"{field}: {timing.schedule.expression!r} never fires; fix the schedule"
                self.steps.event("Warning", "InvalidSchedule", message)
                return Decided(problem=Problem("InvalidSchedule", message), accounting=accounting)
            return Decided(due_runs.requeue, accounting=accounting)
        if walked.too_many_missed and len(timing.queue) == 1:  # Latest; All counts CatchUpBound
            self.steps.event(
                "Warning",
                "TooManyMissedTimes",
                f"too many missed start times ({walked.missed}+): running only the most recent, "
                f"{rfc3339(walked.scheduled or target)}; set or check spec.startingDeadlineSeconds",
            )
        late = target not in timing.queue  # the buffered run: its lateness is no creation skew
        walk_behind = accounting is not None and accounting.more
        problem = self._run(target, timing.schedule.zone, None if late else offset, walk_behind)
        requeue = due_runs.requeue if problem is None or problem.retry else None
        return Decided(requeue, problem, accounting)

    def _run(
        self, scheduled: datetime, zone: ZoneInfo, offset: timedelta | None, walk_behind: bool
    ) -> Problem | None:
        """Create the Job of ``scheduled`` unless it exists; ``offset`` is the stagger
        (None: the run is late by design, a buffered one, and feeds no skew);
        ``walk_behind``: the skip accounting has older times left to walk."""
        status = self.status
        name = jobs.job_name(self.view.name, scheduled)
        active = status.get("active") or []
        if time_at(status, "lastScheduleTime") == scheduled:
            return None  # this run exists already
        if any(ref.get("name") == name for ref in active):
            status["lastScheduleTime"] = stamp(scheduled)  # created, never recorded (a crash)
            return None
        run = Run(
            Source.SCHEDULED,
            functools.partial(jobs.build_job, self.view.obj, scheduled, zone),
            scheduled=scheduled,
            due_at=None if offset is None else scheduled + offset,
            walk_behind=walk_behind,
        )
        started = self.starter.start(run)
        if not isinstance(started, Waits):
            return started
        if not started.replacing:
            self.steps.event(
                "Normal",
                "JobAlreadyActive",
                "Not starting job because prior execution is running and concurrency policy is "
                "Forbid",
            )
        return None  # under Replace, the follow-up or the end of the Job it waits for replaces


def _backfill_message(status: Mapping[str, Any]) -> str:
    progress = status.get("backfill") or {}
    return (
        f"backfill {progress.get('token')!r} of [{shown(progress.get('from'))}, "
        f"{shown(progress.get('to'))}): "
        f"{progress.get('done')}/{progress.get('requested')} done, {progress.get('state')}"
    )


def _backfill_job(
    cronjob: objects.Obj, scheduled: datetime, zone: ZoneInfo, token: str
) -> dict[str, Any]:
    """The Job of a backfill's step: the scheduled time's Job, marked with its token."""
    job = jobs.build_job(cronjob, scheduled, zone)
    job["metadata"].setdefault("annotations", {})[rules.BACKFILL_TOKEN_ANNOTATION] = token
    return job
