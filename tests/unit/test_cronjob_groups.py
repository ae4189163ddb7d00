"""spec.concurrencyGroup: the slot rules (``groups.claim``) and the reconciler taking and
freeing slots on the fake client, several CronJobs sharing one ConcurrencyGroup.

The reconcilers of different CronJobs stand in for replicas: they share only the API
(the fake client), as sharded replicas do; a race is played by a reactor that runs
another CronJob's reconcile between a claim's read of the group and its write.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from cronjob_operator.api.batch_v1 import CRONJOB
from cronjob_operator.api.concurrencygroup_v1 import (
    CONCURRENCY_GROUP,
    MAX_GROUP_LIMIT,
    MAX_WAITERS,
)
from cronjob_operator.controllers.cronjob import (
    JOB_OWNER_INDEX,
    CronJobReconciler,
    group_slots,
    groups,
    job_owner_index,
)
from cronjob_operator.controllers.cronjob.view import group_status_of
from cronjob_operator.controllers.metrics import CronJobMetrics
from cronjob_operator.runtime import errors, objects
from cronjob_operator.runtime.clock import FakeClock
from cronjob_operator.runtime.controller import Request
from cronjob_operator.runtime.controllerutil import find_condition, rfc3339
from cronjob_operator.runtime.fake import Action, FakeClient, FakeClientBuilder, FakeRecorder
from cronjob_operator.runtime.kinds import JOB, Kind
from tests.unit.cronjob_harness import cronjob
from tests.unit.test_crd_generation import schema_of

NS = "team"
T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


ASK_AGAIN = timedelta(seconds=25)
"""How far apart a waiting CronJob is reconciled again in these tests (a group's change
wakes it; before the ConcurrencyGroup controller, a 5-s poll did)."""


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


# --- the rules ------------------------------------------------------------------------


def request(name: str, scheduled: datetime, *, wait: bool = True) -> groups.Claim:
    job = f"{name}-{int(scheduled.timestamp())}"
    return groups.Claim(cron_job=name, job=job, scheduled=scheduled, deadline=None, wait=wait)


def claim(
    status: dict[str, Any],
    limit: int,
    asking: groups.Claim,
    now: datetime,
    states: dict[str, groups.JobState],
) -> groups.Verdict:
    """``groups.claim`` on a group status as the API server returns it."""
    return groups.claim(group_status_of(status), limit, asking, now, states)


def holder(job: str, acquired: datetime) -> dict[str, Any]:
    return {"job": job, "cronJob": job.rsplit("-", 1)[0], "acquiredAt": rfc3339(acquired)}


def test_a_free_slot_is_taken_and_a_full_group_queues_or_refuses() -> None:
    first = claim({}, 1, request("a", at(1)), at(1), {})
    assert (first.granted, first.status["inUse"]) == (True, 1)
    waiting = claim(first.status, 1, request("b", at(1)), at(1), {})
    assert (waiting.granted, waiting.queued) == (False, True)
    assert [w["cronJob"] for w in waiting.status["waiting"]] == ["b"]
    skipping = claim(first.status, 1, request("c", at(1), wait=False), at(1), {})
    assert (skipping.granted, skipping.queued, "waiting" in skipping.status) == (
        False,
        False,
        False,
    )


def test_the_waiting_list_never_grows_past_its_bound() -> None:
    """status.waiting: at most MAX_WAITERS runs (about 370 bytes each with a 253-character
    CronJob name); a run that finds the list full is not queued, in the rule and in the
    schema the API server checks the controller's write against."""
    full = {
        "holders": [holder("a-1", at(0))],
        "waiting": [
            {"cronJob": f"w{index:04}", "scheduledTime": rfc3339(at(1)), "seenAt": rfc3339(at(1))}
            for index in range(MAX_WAITERS)
        ],
    }
    late = claim(full, 1, request("late", at(1)), at(1), {})
    assert (late.granted, late.queued) == (False, False)
    assert len(late.status["waiting"]) == MAX_WAITERS
    listed = schema_of("ConcurrencyGroup")["properties"]["status"]["properties"]
    assert listed["waiting"]["maxItems"] == MAX_WAITERS


def test_the_holders_list_is_bounded_in_the_schema_by_the_largest_limit() -> None:
    """Issue 47: status.holders had no bound in the schema; the controller never holds more
    than spec.limit (at most MAX_GROUP_LIMIT) slots, and now the schema says so."""
    listed = schema_of("ConcurrencyGroup")["properties"]["status"]["properties"]
    assert listed["holders"]["maxItems"] == MAX_GROUP_LIMIT
    assert listed["holders"]["items"]["properties"]["cronJob"]["maxLength"] == 253


def test_a_freed_slot_goes_to_the_oldest_waiting_run() -> None:
    status = {
        "holders": [holder("a-1", at(0))],
        "waiting": [
            {"cronJob": "b", "scheduledTime": rfc3339(at(2)), "seenAt": rfc3339(at(2))},
            {"cronJob": "c", "scheduledTime": rfc3339(at(1)), "seenAt": rfc3339(at(2))},
        ],
    }
    done = {"a-1": groups.JobState.FINISHED}
    younger = claim(status, 1, request("b", at(2)), at(2.5), done)
    assert (younger.granted, younger.queued) == (False, True)
    older = claim(status, 1, request("c", at(1)), at(2.5), done)
    assert older.granted
    assert [h["cronJob"] for h in older.status["holders"]] == ["c"]
    assert [w["cronJob"] for w in older.status["waiting"]] == ["b"]


@pytest.mark.parametrize(
    ("state", "age", "freed"),
    [
        (groups.JobState.RUNNING, timedelta(hours=1), False),
        (groups.JobState.FINISHED, timedelta(0), True),
        (groups.JobState.ABSENT, groups.CLAIM_GRACE - timedelta(seconds=1), False),
        (groups.JobState.ABSENT, groups.CLAIM_GRACE, True),
    ],
)
def test_a_slot_is_free_once_its_job_finished_or_is_gone_past_the_grace(
    state: groups.JobState, age: timedelta, freed: bool
) -> None:
    now = at(10)
    status = {"holders": [holder("a-1", now - age)]}
    verdict = claim(status, 1, request("b", now), now, {"a-1": state})
    assert verdict.granted is freed


def test_a_waiting_run_whose_deadline_passed_does_not_hold_the_slot() -> None:
    place = {"seenAt": rfc3339(at(10)), "deadline": rfc3339(at(9))}
    status = {"waiting": [{"cronJob": "old", "scheduledTime": rfc3339(at(0)), **place}]}
    verdict = claim(status, 1, request("new", at(10)), at(10), {})
    assert verdict.granted
    assert "waiting" not in verdict.status


def test_a_place_holds_however_long_its_run_waits() -> None:
    """Changed on purpose: a waiting run no longer refreshes its place, so an old place
    holds (the ConcurrencyGroup controller drops one whose CronJob is gone). Failed
    before: a place not seen for a minute lapsed, and the younger run took the slot."""
    status = {
        "waiting": [{"cronJob": "old", "scheduledTime": rfc3339(at(0)), "seenAt": rfc3339(at(0))}]
    }
    verdict = claim(status, 1, request("new", at(10)), at(10), {})
    assert (verdict.granted, verdict.queued) == (False, True)
    assert [w["cronJob"] for w in verdict.status["waiting"]] == ["old", "new"]


def test_a_waiting_run_that_asks_again_keeps_its_place_and_changes_nothing() -> None:
    """A run's place is written once, when it joins. Failed before: each ask moved the
    place to the end of the list and refreshed seenAt every 20 s, a write of the group
    each time."""
    stored = {
        "holders": [holder("a-1", at(0))],
        "waiting": [
            {"cronJob": "b", "scheduledTime": rfc3339(at(1)), "seenAt": rfc3339(at(1))},
            {"cronJob": "c", "scheduledTime": rfc3339(at(2)), "seenAt": rfc3339(at(2))},
        ],
        "inUse": 1,
    }
    for minutes in (1.5, 3, 30):
        verdict = claim(stored, 1, request("b", at(1)), at(minutes), {})
        assert (verdict.granted, verdict.queued) == (False, True)
        assert verdict.status == stored


def test_a_waiting_run_whose_time_moved_takes_the_newest_time_where_it_stands() -> None:
    stored = {
        "waiting": [
            {"cronJob": "b", "scheduledTime": rfc3339(at(1)), "seenAt": rfc3339(at(1))},
            {"cronJob": "c", "scheduledTime": rfc3339(at(2)), "seenAt": rfc3339(at(2))},
        ],
    }
    full = {**stored, "holders": [holder("a-1", at(0))]}
    verdict = claim(full, 1, request("b", at(3)), at(3), {})
    assert [(w["cronJob"], w["scheduledTime"]) for w in verdict.status["waiting"]] == [
        ("b", rfc3339(at(3))),
        ("c", rfc3339(at(2))),
    ]
    assert groups.next_in_line(group_status_of(verdict.status), 2, at(3)) == ["c"]


# --- the ConcurrencyGroup controller's rules (groups.tidy, groups.next_in_line) --------


def place(name: str, scheduled: datetime, joined: datetime, **more: str) -> dict[str, Any]:
    return {"cronJob": name, "scheduledTime": rfc3339(scheduled), "seenAt": rfc3339(joined), **more}


def test_free_slots_go_to_the_oldest_time_then_the_longest_waiting_then_the_name() -> None:
    status = group_status_of(
        {
            "holders": [holder("a-1", at(0))],
            "waiting": [
                place("z", at(1), at(1)),
                place("y", at(2), at(2)),
                place("x", at(1), at(3)),
                place("w", at(1), at(3)),
            ],
        }
    )
    assert groups.next_in_line(status, 1, at(4)) == []
    assert groups.next_in_line(status, 2, at(4)) == ["z"]
    assert groups.next_in_line(status, 5, at(4)) == ["z", "w", "x", "y"]


def test_a_run_whose_cronjob_waited_longer_goes_first_at_the_same_time() -> None:
    """Failed before: the tie went to the name, so "a" took the slot from "z", which
    had waited since minute 1 (its time moved to minute 2)."""
    status = {"waiting": [place("z", at(2), at(1))]}
    verdict = claim(status, 1, request("a", at(2)), at(2), {})
    assert (verdict.granted, verdict.queued) == (False, True)
    assert groups.next_in_line(group_status_of(verdict.status), 1, at(2)) == ["z"]


def test_tidy_drops_a_gone_waiters_place_next_in_line_and_keeps_the_rest_unread() -> None:
    asked: list[str] = []

    def waits_here(name: str) -> bool | None:
        asked.append(name)
        return {"gone": None, "left": False, "young": False}.get(name, True)

    now = at(10)
    stored = {
        "holders": [holder("a-1", at(0))],
        "waiting": [
            place("back", at(9), at(0)),
            place("gone", at(1), at(0)),
            place("left", at(2), at(0)),
            place("young", at(3), now - timedelta(seconds=10)),
            place("next", at(4), at(0)),
        ],
    }
    tidied = groups.tidy(
        group_status_of(stored), 2, {"a-1": groups.JobState.FINISHED}, waits_here, now
    )
    assert [w["cronJob"] for w in tidied.status["waiting"]] == ["back", "young", "next"]
    assert tidied.status["holders"] == []
    assert asked == ["gone", "left", "young", "next"]  # "back" is behind three others
    assert tidied.again == now - timedelta(seconds=10) + groups.WAITER_GRACE


# --- the reconciler -------------------------------------------------------------------


class World:
    """CronJobs of one namespace sharing ConcurrencyGroup ``g`` on one fake API server."""

    def __init__(self, limit: int, *specs: tuple[str, dict[str, Any]]) -> None:
        self.clock = FakeClock(T0)
        group = {
            "apiVersion": CONCURRENCY_GROUP.api_version,
            "kind": CONCURRENCY_GROUP.kind,
            "metadata": {"name": "g", "namespace": NS},
            "spec": {"limit": limit},
        }
        cronjobs = [
            cronjob(name, NS, created=T0 - timedelta(seconds=50), spec=spec) for name, spec in specs
        ]
        self.client: FakeClient = (
            FakeClientBuilder()
            .with_kinds(CRONJOB, CONCURRENCY_GROUP)
            .with_index(JOB, JOB_OWNER_INDEX, job_owner_index)
            .with_clock(self.clock)
            .with_objects(group, *cronjobs)
            .build()
        )
        self.registry = CollectorRegistry()
        self.metrics = CronJobMetrics(self.registry)
        self.recorder = FakeRecorder()
        self.reconciler = CronJobReconciler(
            self.client, self.recorder, clock=self.clock, metrics=self.metrics
        )

    def reconcile(self, name: str, moment: datetime) -> None:
        self.clock.set(moment)
        result = self.reconciler.reconcile(Request(NS, name))
        if result.follow_up:
            self.reconciler.reconcile(Request(NS, name))

    def running(self) -> list[str]:
        return sorted(
            objects.name_of(job)
            for job in self.client.list(JOB, namespace=NS)
            if not (job.get("status") or {}).get("conditions")
        )

    def status(self, name: str) -> dict[str, Any]:
        return objects.thaw(self.client.get(CRONJOB, name, NS).get("status") or {})

    def group(self) -> dict[str, Any]:
        return objects.thaw(self.client.get(CONCURRENCY_GROUP, "g", NS).get("status") or {})

    def finish(self, job: str) -> None:
        body = objects.thaw(self.client.get(JOB, job, NS))
        now = rfc3339(self.clock())
        body["status"] = {
            "conditions": [{"type": "Complete", "status": "True", "lastTransitionTime": now}],
            "startTime": now,
            "completionTime": now,
        }
        self.client.update_status(JOB, body)


def grouped(schedule: str, when_full: str = "Wait", **more: Any) -> dict[str, Any]:
    return {"schedule": schedule, "concurrencyGroup": {"name": "g", "whenFull": when_full}, **more}


def job(name: str, moment: datetime) -> str:
    return f"{name}-{int(moment.timestamp())}"


def test_three_cronjobs_limit_one_run_one_at_a_time_in_scheduled_order() -> None:
    world = World(
        1, ("a", grouped("0 * * * *")), ("b", grouped("2 * * * *")), ("c", grouped("1 * * * *"))
    )
    world.reconcile("a", at(0))
    world.reconcile("c", at(1))
    world.reconcile("b", at(2))
    world.reconcile("c", at(2.5))  # a waiting CronJob asks again (woken by the group)
    assert world.running() == [job("a", at(0))]
    assert world.status("b")["waitingForGroup"] == {"group": "g", "scheduledTime": rfc3339(at(2))}
    assert world.group()["inUse"] == 1
    world.clock.set(at(3))
    world.finish(job("a", at(0)))
    world.reconcile("b", at(3))  # younger: c (01) waits since before it
    assert world.running() == []
    world.reconcile("c", at(3))
    assert world.running() == [job("c", at(1))]
    assert "waitingForGroup" not in world.status("c")
    world.reconcile("a", at(3.1))  # frees nothing more; b still waits
    world.reconcile("b", at(3.2))
    assert world.running() == [job("c", at(1))]
    world.clock.set(at(4))
    world.finish(job("c", at(1)))
    world.reconcile("b", at(4))
    assert world.running() == [job("b", at(2))]
    assert [h["job"] for h in world.group()["holders"]] == [job("b", at(2))]


def test_a_waiting_run_is_announced_once_however_often_it_asks_again() -> None:
    world = World(1, ("a", grouped("0 * * * *")), ("b", grouped("1 * * * *")))
    world.reconcile("a", at(0))
    for poll in range(4):
        world.reconcile("b", at(1) + poll * ASK_AGAIN)
    assert world.recorder.reasons().count("WaitingForGroup") == 1


def test_skip_counts_the_run_skipped_with_its_own_reason_and_never_runs_it() -> None:
    world = World(1, ("a", grouped("0 * * * *")), ("s", grouped("1 * * * *", "Skip")))
    world.reconcile("a", at(0))
    world.reconcile("s", at(1))
    status = world.status("s")
    assert status["skippedRuns"]["groupFull"] == 1
    assert status["skippedRuns"]["accountedThrough"] == rfc3339(at(1))
    kept = schema_of("CronJob")["properties"]["status"]["properties"]["skippedRuns"]
    assert set(status["skippedRuns"]) <= set(kept["properties"])  # else the server prunes it
    sample = world.registry.get_sample_value(
        "cronjob_operator_runs_skipped_total",
        {"namespace": NS, "cronjob": "s", "reason": "GroupFull"},
    )
    assert sample == 1
    world.finish(job("a", at(0)))
    world.reconcile("a", at(1.5))
    world.reconcile("s", at(1.5))  # a slot is free now, but the 01 run was skipped
    assert world.running() == []
    assert world.status("s")["skippedRuns"]["groupFull"] == 1


def test_a_waiting_run_whose_deadline_passes_is_counted_and_stops_waiting() -> None:
    world = World(
        1, ("a", grouped("0 * * * *")), ("d", grouped("1 * * * *", startingDeadlineSeconds=30))
    )
    world.reconcile("a", at(0))
    world.reconcile("d", at(1))
    assert "waitingForGroup" in world.status("d")
    world.finish(job("a", at(0)))
    world.reconcile("d", at(1) + timedelta(seconds=31))
    status = world.status("d")
    assert world.running() == []
    assert "waitingForGroup" not in status
    assert status["skippedRuns"]["deadlinePassed"] == 1


def test_slots_of_a_dead_replica_are_reclaimed_from_the_jobs_state() -> None:
    world = World(2, ("a", grouped("0 * * * *")), ("b", grouped("5 * * * *")))
    world.reconcile("a", at(0))
    # A replica that died: took a slot, never created the Job (b-..., long ago), and
    # a's Job finished with no reconcile of a since.
    body = objects.thaw(world.client.get(CONCURRENCY_GROUP, "g", NS))
    body["status"]["holders"].append(holder("ghost-1", at(0)))
    body["status"]["inUse"] = 2
    world.client.update_status(CONCURRENCY_GROUP, body)
    world.finish(job("a", at(0)))
    world.reconcile("b", at(5))
    assert world.running() == [job("b", at(5))]
    assert [h["job"] for h in world.group()["holders"]] == [job("b", at(5))]


def test_the_owners_reconcile_frees_the_slot_of_its_finished_job() -> None:
    world = World(1, ("a", grouped("0 * * * *")))
    world.reconcile("a", at(0))
    world.finish(job("a", at(0)))
    world.reconcile("a", at(0.5))
    assert world.group() == {"holders": [], "inUse": 0}
    gauge = world.registry.get_sample_value(
        "cronjob_operator_concurrency_group_slots",
        {"namespace": NS, "group": "g", "state": "inUse"},
    )
    assert gauge == 0


def test_two_replicas_deciding_at_once_on_the_last_slot_start_one_job() -> None:
    world = World(1, ("a", grouped("0 * * * *")), ("b", grouped("0 * * * *")))
    raced = iter([True])

    def other_replica_first(action: Action) -> None:
        # a has read the group (one free slot) and is about to write: b decides now.
        if action.subresource == "status" and next(raced, False):
            world.reconciler.reconcile(Request(NS, "b"))

    world.client.prepend_reactor("update", CONCURRENCY_GROUP, other_replica_first)
    world.reconcile("a", at(0))
    world.reconcile("b", at(0.1))
    assert world.running() == [job("b", at(0))]
    assert world.status("a")["waitingForGroup"]["group"] == "g"
    group_writes = [
        write
        for write in world.client.writes
        if write.kind == CONCURRENCY_GROUP and write.subresource == "status"
    ]
    assert len(group_writes) >= 3  # b's slot, a's refused one (409), a's place among the waiting


def test_a_missing_group_stops_runs_and_names_the_field() -> None:
    world = World(1, ("a", {"schedule": "0 * * * *", "concurrencyGroup": {"name": "nope"}}))
    world.reconcile("a", at(0))
    assert world.running() == []
    degraded = find_condition(world.status("a")["conditions"], "Degraded")
    assert degraded is not None
    assert degraded["reason"] == "GroupNotFound"
    assert "spec.concurrencyGroup.name" in degraded["message"]


class ShardView:
    """The fake client as a sharded replica sees it: its cache lacks the Jobs named in
    ``elsewhere`` (another shard's); ``live`` reaches every Job and logs each Job read."""

    def __init__(self, client: FakeClient, elsewhere: set[str]) -> None:
        self._client = client
        self._elsewhere = elsewhere
        self.live_job_reads: list[str] = []
        self.live = self._Live(client, self.live_job_reads)

    class _Live:
        def __init__(self, client: FakeClient, log: list[str]) -> None:
            self._client = client
            self._log = log

        def get(self, kind: Kind, name: str, namespace: str | None = None) -> objects.Obj:
            if kind == JOB:
                self._log.append(name)
            return self._client.get(kind, name, namespace)

        def __getattr__(self, name: str) -> Any:
            return getattr(self._client, name)

    def get(self, kind: Kind, name: str, namespace: str | None = None) -> objects.Obj:
        if kind == JOB and name in self._elsewhere:
            raise errors.NotFound({"reason": "NotFound"}, code=404)
        return self._client.get(kind, name, namespace)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def shard_reconciler(world: World, elsewhere: set[str]) -> tuple[CronJobReconciler, ShardView]:
    view = ShardView(world.client, elsewhere)
    reconciler = CronJobReconciler(
        view,  # type: ignore[arg-type]
        world.recorder,
        clock=world.clock,
        metrics=CronJobMetrics(None),
    )
    return reconciler, view


def test_a_full_group_of_running_jobs_costs_a_waiting_run_no_live_job_reads() -> None:
    """The cache answers for the holders' running Jobs. Failed before it did: each poll
    read every holder's Job from the API server (2 a poll, 8 in all)."""
    world = World(
        2, ("a", grouped("0 * * * *")), ("b", grouped("0 * * * *")), ("c", grouped("1 * * * *"))
    )
    world.reconcile("a", at(0))
    world.reconcile("b", at(0))
    replica, seen = shard_reconciler(world, set())
    for poll in range(4):
        world.clock.set(at(1) + poll * ASK_AGAIN)
        replica.reconcile(Request(NS, "c"))
    assert world.status("c")["waitingForGroup"] == {"group": "g", "scheduledTime": rfc3339(at(1))}
    assert seen.live_job_reads == []


def test_a_holder_the_cache_lacks_within_the_claim_grace_is_not_read() -> None:
    """Another shard's Job taken 30 s ago holds its slot whatever the server says.
    Failed before: the waiting run read it from the API server."""
    world = World(1, ("a", grouped("0 * * * *")), ("b", grouped("0 * * * *")))
    world.reconcile("a", at(0))
    replica, seen = shard_reconciler(world, {job("a", at(0))})
    world.clock.set(at(0.5))
    replica.reconcile(Request(NS, "b"))
    assert seen.live_job_reads == []
    assert world.running() == [job("a", at(0))]
    assert world.status("b")["waitingForGroup"]["group"] == "g"


@pytest.mark.parametrize("finished", [False, True])
def test_a_slot_is_freed_only_on_the_api_servers_word(finished: bool) -> None:
    """A holder's Job the cache lacks past the grace (another shard's), or shows finished,
    is read from the API server: a running one keeps its slot, a finished one frees it."""
    world = World(1, ("a", grouped("0 * * * *")), ("b", grouped("5 * * * *")))
    world.reconcile("a", at(0))
    first = job("a", at(0))
    if finished:
        world.finish(first)
    replica, seen = shard_reconciler(world, set() if finished else {first})
    world.clock.set(at(5))
    replica.reconcile(Request(NS, "b"))
    assert seen.live_job_reads == [first]
    holding = job("b", at(5)) if finished else first
    assert [h["job"] for h in world.group()["holders"]] == [holding]


def test_a_reconcile_that_frees_no_slot_neither_reads_nor_parses_the_group(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every reconcile of a grouped CronJob ends with a release. Failed before: one with
    no finished Job read the group (1 read), and one whose finished Jobs hold no slot
    parsed its every holder and waiting run (1 parse) though it frees nothing."""
    world = World(2, ("a", grouped("0 * * * *")), ("b", grouped("1 * * * *")))
    world.reconcile("a", at(0))
    parses: list[object] = []
    real_parse = group_status_of  # as group_slots imports it

    def counted(stored: Any) -> dict[str, Any]:
        parses.append(stored)
        return real_parse(stored)

    monkeypatch.setattr(group_slots, "group_status_of", counted)
    reads = len(world.client.reads_of("get", CONCURRENCY_GROUP))
    world.reconcile("a", at(0.5))  # its Job runs: nothing to free, nothing due
    assert len(world.client.reads_of("get", CONCURRENCY_GROUP)) == reads
    world.finish(job("a", at(0)))
    world.reconcile("a", at(0.6))  # frees its slot
    assert len(parses) == 1
    assert world.group() == {"holders": [], "inUse": 0}
    world.reconcile("b", at(1))  # b takes a slot and a's finished Job holds none
    world.reconcile("a", at(1.1))
    assert len(parses) == 2  # b's claim only
    assert [h["job"] for h in world.group()["holders"]] == [job("b", at(1))]
    gauge = world.registry.get_sample_value(
        "cronjob_operator_concurrency_group_slots",
        {"namespace": NS, "group": "g", "state": "inUse"},
    )
    assert gauge == 1  # set from the group a's release read


def test_a_deleted_group_loses_its_series_at_its_owners_next_release() -> None:
    """Failed before: only a claim that found the group gone dropped its gauge series; a
    CronJob whose Job finished after the group's delete read NotFound and kept them."""
    world = World(1, ("a", grouped("0 * * * *")))
    world.reconcile("a", at(0))
    labels = {"namespace": NS, "group": "g", "state": "limit"}
    assert world.registry.get_sample_value("cronjob_operator_concurrency_group_slots", labels) == 1
    world.client.delete(CONCURRENCY_GROUP, "g", namespace=NS)
    world.finish(job("a", at(0)))
    world.reconcile("a", at(0.5))
    assert (
        world.registry.get_sample_value("cronjob_operator_concurrency_group_slots", labels) is None
    )
