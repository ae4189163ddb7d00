"""The ConcurrencyGroup controller and the wake-up of waiting runs, on the fake client.

A waiting run no longer polls: it writes its place once, and is reconciled again when
the group changes (``group_slots.waiters_to_wake``, the CronJob controller's watch on
groups). The ConcurrencyGroup controller (``controllers/concurrencygroup``) frees the
slots no CronJob frees (a Job deleted) and drops the places of CronJobs gone, so the
next run in line is woken. ``World`` is test_cronjob_groups' several CronJobs sharing
group ``g``; the watches are played by hand: a group's change maps to the CronJobs to
wake, which are reconciled.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta

from prometheus_client import CollectorRegistry

from cronjob_operator.api.batch_v1 import CRONJOB, RUN_ANNOTATION
from cronjob_operator.api.concurrencygroup_v1 import CONCURRENCY_GROUP
from cronjob_operator.controllers.concurrencygroup import ConcurrencyGroupReconciler
from cronjob_operator.controllers.cronjob import group_slots, groups
from cronjob_operator.controllers.metrics import CronJobMetrics
from cronjob_operator.runtime import objects
from cronjob_operator.runtime.controller import Request
from cronjob_operator.runtime.kinds import JOB
from tests.unit.test_cronjob_groups import NS, World, at, grouped, job


def to_wake(world: World) -> list[str]:
    """The CronJobs the group's current state wakes (the CronJob controller's watch)."""
    group = world.client.get(CONCURRENCY_GROUP, "g", NS)
    return [request.name for request in group_slots.waiters_to_wake(world.clock)(group)]


def test_a_waiting_run_is_not_polled() -> None:
    """Failed before: a CronJob whose run waited asked to be reconciled again in 5 s."""
    world = World(1, ("a", grouped("0 * * * *")), ("b", grouped("1 * * * *")))
    world.reconcile("a", at(0))
    world.clock.set(at(1))
    result = world.reconciler.reconcile(Request(NS, "b"))
    assert "waitingForGroup" in world.status("b")
    assert result.requeue_after > 60  # its next scheduled time, not a poll


def test_a_waiting_run_writes_the_group_once_however_often_it_is_reconciled() -> None:
    """Failed before: its place was written again (moved, seenAt) every 20 s it asked."""
    world = World(1, ("a", grouped("0 * * * *")), ("b", grouped("1 * * * *")))
    world.reconcile("a", at(0))
    world.reconcile("b", at(1))
    joined = len(world.client.writes_of("update", CONCURRENCY_GROUP))
    for seconds in (25, 50, 75, 300):
        world.reconcile("b", at(1) + timedelta(seconds=seconds))
    assert len(world.client.writes_of("update", CONCURRENCY_GROUP)) == joined
    assert [w["cronJob"] for w in world.group()["waiting"]] == ["b"]


def test_the_holders_release_wakes_the_oldest_waiting_run_which_starts() -> None:
    world = World(
        1, ("a", grouped("0 * * * *")), ("b", grouped("2 * * * *")), ("c", grouped("1 * * * *"))
    )
    world.reconcile("a", at(0))
    world.reconcile("c", at(1))
    world.reconcile("b", at(2))
    assert to_wake(world) == []
    world.clock.set(at(3))
    world.finish(job("a", at(0)))
    world.reconcile("a", at(3))  # the owner frees its slot: a group change
    assert to_wake(world) == ["c"]
    world.reconcile("c", at(3))
    assert world.running() == [job("c", at(1))]
    assert [w["cronJob"] for w in world.group()["waiting"]] == ["b"]


def test_a_deleted_holder_is_reclaimed_past_the_grace_and_the_next_run_woken() -> None:
    world = World(1, ("a", grouped("0 * * * *")), ("b", grouped("0 * * * *")))
    groups_controller = ConcurrencyGroupReconciler(world.client, clock=world.clock)
    world.reconcile("a", at(0))
    world.reconcile("b", at(0.25))
    assert "waitingForGroup" in world.status("b")
    held = world.client.get(JOB, job("a", at(0)), NS)
    assert groups_controller.holders.requests(held) == []  # not reconciled yet
    world.client.delete(JOB, job("a", at(0)), namespace=NS)
    world.clock.set(at(0.5))
    assert groups_controller.reconcile(Request(NS, "g")).requeue_after == 31  # the grace
    assert world.group()["inUse"] == 1
    assert groups_controller.holders.requests(held) == [Request(NS, "g")]
    world.clock.set(at(1.5))
    groups_controller.reconcile(Request(NS, "g"))
    assert world.group()["inUse"] == 0
    assert to_wake(world) == ["b"]
    world.reconcile("b", at(1.5))
    assert world.running() == [job("b", at(0))]


def test_a_gone_waiters_place_is_dropped_and_the_next_run_woken() -> None:
    world = World(
        1, ("a", grouped("0 * * * *")), ("b", grouped("1 * * * *")), ("c", grouped("2 * * * *"))
    )
    groups_controller = ConcurrencyGroupReconciler(world.client, clock=world.clock)
    world.reconcile("a", at(0))
    world.reconcile("b", at(1))
    world.reconcile("c", at(2))
    world.client.delete(CRONJOB, "b", namespace=NS)
    world.finish(job("a", at(0)))
    world.reconcile("a", at(3))
    assert to_wake(world) == ["b"]
    world.reconcile("b", at(3))  # gone: does nothing
    world.clock.set(at(3))
    groups_controller.reconcile(Request(NS, "g"))
    assert [w["cronJob"] for w in world.group()["waiting"]] == ["c"]
    assert to_wake(world) == ["c"]
    world.reconcile("c", at(3))
    assert world.running() == [job("c", at(2))]


def test_a_group_that_changes_nothing_is_not_written() -> None:
    world = World(1, ("a", grouped("0 * * * *")), ("b", grouped("1 * * * *")))
    groups_controller = ConcurrencyGroupReconciler(world.client, clock=world.clock)
    world.reconcile("a", at(0))
    world.reconcile("b", at(1))
    before = len(world.client.writes_of("update", CONCURRENCY_GROUP))
    world.clock.set(at(30))
    assert groups_controller.reconcile(Request(NS, "g")).requeue_after == 0
    assert len(world.client.writes_of("update", CONCURRENCY_GROUP)) == before


def test_four_every_minute_cronjobs_with_70_s_runs_in_a_group_of_two_share_it() -> None:
    """No CronJob starves: a tie on the scheduled time goes to the CronJob that has
    waited longest. Failed before: it went to the name, and c and d never ran (a and b
    ran 8 times each in these 10 minutes). Events only: a run falls due each minute, a
    Job finishes 70 s after its create (its owner frees the slot), and each group
    change wakes the runs next in line."""
    names = ["a", "b", "c", "d"]
    world = World(2, *((name, grouped("* * * * *")) for name in names))
    created: dict[str, datetime] = {}
    for step in range(10 * 12):
        now = at(1) + timedelta(seconds=5 * step)
        world.clock.set(now)
        for held in world.running():
            created.setdefault(held, now)
            if now - created[held] >= timedelta(seconds=70):
                world.finish(held)
                world.reconcile(held.rsplit("-", 1)[0], now)
                wake_all(world)
        if now.second == 0:
            for name in names:
                world.reconcile(name, now)
            wake_all(world)
    runs = Counter(job_name.rsplit("-", 1)[0] for job_name in created)
    assert set(runs) == set(names), runs
    assert max(runs.values()) - min(runs.values()) <= 1, runs


def wake_all(world: World) -> None:
    """Reconcile the CronJobs each change of the group wakes, until it changes no more."""
    for _ in range(10):
        version = world.client.get(CONCURRENCY_GROUP, "g", NS)["metadata"]["resourceVersion"]
        for name in to_wake(world):
            world.reconcile(name, world.clock())
        if world.client.get(CONCURRENCY_GROUP, "g", NS)["metadata"]["resourceVersion"] == version:
            return


def test_a_requested_run_that_finds_the_group_full_asks_again_soon() -> None:
    """A run request holds no place among the waiting runs, so no group change wakes
    it: it asks again within ``groups.UNQUEUED_RETRY`` (reading the group, no write)."""
    world = World(1, ("a", grouped("0 * * * *")), ("b", grouped("0 * * * *")))
    world.reconcile("a", at(0))
    world.reconcile("b", at(0.1))  # its scheduled run waits: a place, written once
    body = objects.thaw(world.client.get(CRONJOB, "b", NS))
    body["metadata"].setdefault("annotations", {})[RUN_ANNOTATION] = "now-1"
    world.client.update(CRONJOB, body)
    world.clock.set(at(0.2))
    writes = len(world.client.writes_of("update", CONCURRENCY_GROUP))
    result = world.reconciler.reconcile(Request(NS, "b"))
    assert (world.status("b").get("conditions") or [{}])[0].get("reason") == "WaitingForGroup"
    assert result.requeue_after == groups.UNQUEUED_RETRY.total_seconds()
    assert len(world.client.writes_of("update", CONCURRENCY_GROUP)) == writes


def test_a_slot_the_group_controller_frees_moves_the_gauge_of_a_replica_that_shows_it() -> None:
    """Failed before: the gauge moved only when this replica's CronJobs claimed or
    released, so a slot the ConcurrencyGroup controller reclaimed stayed in use on the
    dashboard until the group's next claim. A replica that never used the group gets no
    series from the watch (each replica shows the groups it uses)."""
    world = World(1, ("a", grouped("0 * * * *")))
    groups_controller = ConcurrencyGroupReconciler(world.client, clock=world.clock)
    world.reconcile("a", at(0))
    world.client.delete(JOB, job("a", at(0)), namespace=NS)
    world.clock.set(at(0.5))
    groups_controller.reconcile(Request(NS, "g"))
    world.clock.set(at(1.5))
    groups_controller.reconcile(Request(NS, "g"))
    assert world.group()["inUse"] == 0
    in_use = {"namespace": NS, "group": "g", "state": "inUse"}
    series = ("cronjob_operator_concurrency_group_slots", in_use)
    assert world.registry.get_sample_value(*series) == 1
    group = world.client.get(CONCURRENCY_GROUP, "g", NS)
    assert group_slots.waiters_to_wake(world.clock, world.metrics)(group) == []
    assert world.registry.get_sample_value(*series) == 0
    elsewhere = CollectorRegistry()
    group_slots.waiters_to_wake(world.clock, CronJobMetrics(elsewhere))(group)
    assert elsewhere.get_sample_value(*series) is None
