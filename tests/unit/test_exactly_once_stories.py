"""Each run starts once, where the features meet and the cluster misbehaves: a stateful
property test (Hypothesis's rule-based state machine) over the CronJob reconciler.

A story is a few CronJobs (every spec field that chooses runs, several sharing one
ConcurrencyGroup), schedule and zone edits across DST, run requests and backfills, Jobs
finishing, failing, deleted by someone else or ended by their start timeout (their Pods
never show), and the faults of ``story_world``: status
writes refused, a create that times out after the Job was stored, a follow-up lost, a
cache that lags, a restart with empty memory, the clock jumping. After every step:

* no run identity (docs/cronjob-semantics.md, "The rule") started twice;
* at the instant of every create, ``concurrencyPolicy``, the group's limit and
  ``maxScheduledRuns`` held.

CI runs the derandomized profile with a fixed budget (``STORIES``); a developer run
draws new stories, and ``STORIES=100000`` runs many more.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from cronjob_operator.api.batch_v1 import BACKFILL_ANNOTATION, RUN_ANNOTATION
from cronjob_operator.runtime import objects
from cronjob_operator.runtime.controllerutil import rfc3339
from tests.unit import run_model, story_world
from tests.unit.story_world import GROUP, StoryWorld, unfinished

STORIES = int(os.environ.get("STORIES", "300"))

# A story takes about 0.1 s of CPU; the suite's 600 s per test would stop a large run.
# A large run niced beside other work may take longer still: STORIES_TIMEOUT=0 lifts it.
pytestmark = pytest.mark.timeout(int(os.environ.get("STORIES_TIMEOUT", max(600, STORIES))))

SCHEDULES = ("*/5 * * * *", "0 * * * *", "*/1 * * * *", "30 1 * * *", "0 9-17 * * 1-5")
ZONES = (None, "Europe/Berlin", "America/New_York")
POLICIES = ("Allow", "Forbid", "Replace", "BufferOne")
STARTS = (
    datetime(2026, 3, 28, 22, 17, tzinfo=UTC),  # Europe/Berlin springs forward ahead
    datetime(2026, 11, 1, 4, 50, tzinfo=UTC),  # America/New_York falls back ahead
)
STEPS = (1, 20, 59, 60, 61, 300, 3599, 3600, 86400)
CHAIN = 12
"""Reconciles asked for at once, in a row, at most: a catch-up of an hour of five-minute
times, one per reconcile."""

EDITABLE: dict[str, tuple[Any, ...]] = {
    "schedule": SCHEDULES,
    "timeZone": ZONES,
    "concurrencyPolicy": POLICIES,
    "catchUpPolicy": ("Latest", "All"),
    "startingDeadlineSeconds": (None, 30, 200, 3600),
    "suspend": (False, True),
    "successfulJobsHistoryLimit": (0, 1, 3),
    "failedJobsHistoryLimit": (0, 1),
}


FIXED: dict[str, tuple[Any, ...]] = {
    "staggerSeconds": (None, 0, 20),
    "failurePolicy": (None, {"pauseAfterConsecutiveFailures": 1}),
    "exclusions": (None, {"schedules": ["*/10 * * * *"]}, {"dates": ["2026-03-29"]}),
    "runStartTimeoutSeconds": (None, None, 60, 3600),
}
"""Fields a story sets once (an edit of these would move what falls due)."""


@st.composite
def specs(draw: st.DrawFn) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedule": draw(st.sampled_from(SCHEDULES))}
    if draw(st.integers(0, 4)) == 0:
        del spec["schedule"]
        spec["schedules"] = draw(
            st.lists(st.sampled_from(SCHEDULES), min_size=2, max_size=2, unique=True)
        )
    for key, options in FIXED.items():
        value = draw(st.sampled_from(options))
        if value is not None:
            spec[key] = value
    if draw(st.integers(0, 4)) == 0:
        spec["window"] = {"start": "2026-03-28T22:40:00Z", "end": "2026-11-01T08:00:00Z"}
    for key, options in EDITABLE.items():
        if key == "schedule" and "schedules" in spec:
            continue
        value = draw(st.sampled_from(options))
        if value is not None:
            spec[key] = value
    limit = draw(st.sampled_from((None, None, 1, 2, 5)))
    if limit is not None:
        spec["maxScheduledRuns"] = limit
    when_full = draw(st.sampled_from((None, "Wait", "Skip")))
    if when_full is not None:
        spec["concurrencyGroup"] = {"name": GROUP, "whenFull": when_full}
    return spec


class Stories(RuleBasedStateMachine):
    """One story per run of the machine; see the module docstring."""

    world: StoryWorld

    @initialize(
        cronjobs=st.lists(specs(), min_size=1, max_size=3),
        start=st.sampled_from(STARTS),
        group_limit=st.integers(1, 2),
    )
    def begin(self, cronjobs: list[dict[str, Any]], start: datetime, group_limit: int) -> None:
        named = {f"c{index}": spec for index, spec in enumerate(cronjobs)}
        self.world = StoryWorld(named, start=start, group_limit=group_limit)
        self.edited: set[str] = set()

    def _name(self, index: int) -> str:
        return self.world.names[index % len(self.world.names)]

    # --- time and the controller ------------------------------------------------------

    @rule(seconds=st.sampled_from(STEPS))
    def time_passes(self, seconds: int) -> None:
        self.world.later(timedelta(seconds=seconds))

    @rule(index=st.integers(0, 2), follow_ups=st.sampled_from((0, 1, CHAIN)))
    def reconcile(self, index: int, follow_ups: int) -> None:
        """A reconcile and up to ``follow_ups`` of the reconciles it asks for at once (a
        follow-up, a catch-up or backfill step), under whatever lag the cache has: a
        watch may lag a whole chain of creates."""
        name = self._name(index)
        result = self.world.reconcile(name)
        for _ in range(follow_ups):
            if isinstance(result, Exception) or not story_world.at_once(result):
                return
            result = self.world.reconcile(name)

    @rule(index=st.integers(0, 2))
    def a_burst_under_a_lagging_watch(self, index: int) -> None:
        """The watch stops delivering, and a reconcile goes on through every follow-up
        and step it asks for at once (a catch-up, a backfill) before it comes back."""
        self.world.lag()
        self.reconcile(index, CHAIN)

    @rule()
    def restart(self) -> None:
        self.world.restart()

    @rule()
    def cache_lags(self) -> None:
        self.world.lag()

    @rule()
    def cache_catches_up(self) -> None:
        self.world.catch_up()

    @rule(
        fault=st.sampled_from(
            (("status", 409), ("status", 500), ("delete", 500), ("create-timeout", 0))
        )
    )
    def fault(self, fault: tuple[str, int]) -> None:
        self.world.fail_next(*fault)

    # --- the rest of the cluster ------------------------------------------------------

    @rule(pick=st.integers(0, 20), state=st.sampled_from(("Complete", "Failed")))
    def a_job_finishes(self, pick: int, state: str) -> None:
        running = [job for job in self.world.jobs() if unfinished(job)]
        if running:
            self.world.finish(objects.name_of(running[pick % len(running)]), state)

    @rule(pick=st.integers(0, 20))
    def someone_deletes_a_job(self, pick: int) -> None:
        jobs = self.world.jobs()
        if jobs:
            self.world.delete_job(objects.name_of(jobs[pick % len(jobs)]))

    @rule(index=st.integers(0, 2), key=st.sampled_from(sorted(EDITABLE)), data=st.data())
    def edit(self, index: int, key: str, data: st.DataObject) -> None:
        value = data.draw(st.sampled_from(EDITABLE[key]))
        name = self._name(index)
        if key in ("schedule", "timeZone"):
            self.edited.add(name)
            if "schedules" in self.world.spec(name):
                return  # exactly one of schedule and schedules
        self.world.edit(name, **{key: value})

    @rule(index=st.integers(0, 2), token=st.sampled_from(("t0", "t1", "t2")))
    def run_requested(self, index: int, token: str) -> None:
        self.world.annotate(self._name(index), RUN_ANNOTATION, token)

    @rule(
        index=st.integers(0, 2),
        token=st.sampled_from(("b0", "b1")),
        ago=st.sampled_from((10, 70, 300)),
        minutes=st.sampled_from((5, 30, 120)),
    )
    def backfill_requested(self, index: int, token: str, ago: int, minutes: int) -> None:
        start = self.world.clock() - timedelta(minutes=ago)
        value = json.dumps(
            {
                "token": token,
                "from": rfc3339(start),
                "to": rfc3339(start + timedelta(minutes=minutes)),
            }
        )
        self.world.annotate(self._name(index), BACKFILL_ANNOTATION, value)

    # --- what must hold after every step ----------------------------------------------

    @rule()
    def the_cluster_settles(self) -> None:
        """Quiescence: rule 2 for every CronJob whose schedule and zone were never edited
        (the due times of an edited one need the edit's ``since``, which the model does not
        derive yet)."""
        self.world.settle()
        for name in self.world.names:
            if name in self.edited:
                continue
            runs = [run for run in self.world.ledger.starts if run.cron_job == name]
            spec = self.world.spec(name)
            found = run_model.unsettled(
                spec,
                self.world.created,
                self.world.status(name),
                runs,
                stagger=run_model.stagger_of(spec, story_world.NS, name),
                lost=self.world.ledger.lost,
            )
            assert found is None, f"{name}: {found}; status {dict(self.world.status(name))}"

    @invariant()
    def no_run_started_twice(self) -> None:
        twice = run_model.started_twice(self.world.ledger.starts, self.world.ledger.lost)
        assert not twice, f"runs started twice: {twice}"

    @invariant()
    def no_backfill_reran_a_time(self) -> None:
        ledger = self.world.ledger
        reruns = run_model.rerun_by_backfill(ledger.starts, ledger.backfill_began, ledger.lost)
        assert not reruns, f"backfill ran a time again: {reruns}"

    @invariant()
    def the_limits_held_at_every_create(self) -> None:
        breaches = run_model.limit_breaches(self.world.ledger.starts, self.world.ledger.lost)
        assert not breaches, f"limits exceeded: {breaches}"


Stories.TestCase.settings = settings(
    max_examples=STORIES,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
test_exactly_once_stories = Stories.TestCase
