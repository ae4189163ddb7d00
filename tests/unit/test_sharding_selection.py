"""A member's owned-object informers follow the buckets of its share (``OwnedSelection``),
and an object is reconciled only once its bucket's owned objects are cached."""

from __future__ import annotations

from typing import Any

from cronjob_operator.api.batch_v1 import CRONJOB
from cronjob_operator.runtime import objects
from cronjob_operator.runtime.controller import Request, Result
from cronjob_operator.runtime.fake import FakeClient
from cronjob_operator.runtime.kinds import JOB, Kind
from cronjob_operator.runtime.sharding import (
    DrainAcknowledger,
    OwnedSelection,
    bucket_of,
    bucket_selector,
)
from tests.unit.test_sharding_protocol import Recording

NAMESPACE = "work"


class StubStore:
    def __init__(self) -> None:
        self.objects: list[objects.Obj] = []

    def list(self) -> list[objects.Obj]:
        return list(self.objects)


class StubInformer:
    def __init__(self) -> None:
        self.store = StubStore()
        self.synced = True

    def has_synced_selection(self) -> bool:
        return self.synced


class StubCache:
    """The two informers ``OwnedSelection`` reads, and the reselections it asks for."""

    def __init__(self) -> None:
        self.informers = {CRONJOB: StubInformer(), JOB: StubInformer()}
        self.reselected: list[str] = []

    def informer(self, kind: Kind) -> StubInformer:
        return self.informers[kind]

    def reselect(self, kind: Kind, selector: str) -> None:
        assert kind == JOB
        self.reselected.append(selector)
        self.informers[JOB].synced = False

    def own(self, *names: str) -> None:
        """The member's share is now these CronJobs."""
        self.informers[CRONJOB].store.objects = [cronjob(name) for name in names]

    def finish_sync(self) -> None:
        self.informers[JOB].synced = True


def cronjob(name: str) -> objects.Obj:
    return objects.freeze({"metadata": {"name": name, "namespace": NAMESPACE}})


def buckets(*names: str) -> frozenset[int]:
    return frozenset(bucket_of(NAMESPACE, name) for name in names)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def selection() -> tuple[OwnedSelection, StubCache, Clock]:
    cache, clock = StubCache(), Clock()
    owned = OwnedSelection(cache, CRONJOB, (JOB,), shrink_after=20.0, clock=clock)  # type: ignore[arg-type]
    return owned, cache, clock


def test_a_member_selects_no_bucket_until_it_owns_an_object() -> None:
    owned, cache, _ = selection()
    assert owned.selector == bucket_selector(())
    assert owned.follow() == frozenset()
    assert cache.reselected == []


def test_a_bucket_is_selected_at_once_and_ready_only_once_synced() -> None:
    owned, cache, _ = selection()
    cache.own("a", "b")
    assert owned.follow() == frozenset()
    assert cache.reselected == [bucket_selector(buckets("a", "b"))]
    assert not owned.ready(cronjob("a"))
    assert owned.follow() == frozenset()  # still syncing
    cache.finish_sync()
    assert owned.follow() == buckets("a", "b")  # the member enqueues their CronJobs
    assert owned.ready(cronjob("a"))
    assert owned.ready(cronjob("b"))
    assert owned.follow() == frozenset()
    assert len(cache.reselected) == 1


def test_one_reselection_at_a_time_and_the_kept_buckets_stay_ready() -> None:
    owned, cache, _ = selection()
    cache.own("a")
    owned.follow()
    cache.finish_sync()
    owned.follow()
    cache.own("a", "b")
    owned.follow()
    assert cache.reselected[-1] == bucket_selector(buckets("a", "b"))
    assert owned.ready(cronjob("a")), "a's Jobs are still cached while b's sync"
    assert not owned.ready(cronjob("b"))
    cache.own("a", "b", "c")
    owned.follow()
    assert len(cache.reselected) == 2, "c waits for the sync in flight"
    cache.finish_sync()
    assert owned.follow() == buckets("b")
    assert cache.reselected[-1] == bucket_selector(buckets("a", "b", "c"))


def test_a_bucket_the_share_no_longer_needs_is_dropped_only_after_a_while() -> None:
    owned, cache, clock = selection()
    cache.own("a", "b")
    owned.follow()
    cache.finish_sync()
    owned.follow()
    cache.own("a")  # b moved away
    clock.now += 19.0
    owned.follow()
    assert len(cache.reselected) == 1
    cache.own("a", "b")  # and came back: no sync was spent on it
    clock.now += 5.0
    owned.follow()
    cache.own("a")
    clock.now += 19.9
    owned.follow()
    assert len(cache.reselected) == 1
    clock.now += 0.2
    owned.follow()
    assert cache.reselected[-1] == bucket_selector(buckets("a"))
    assert not owned.ready(cronjob("b"))


def test_an_object_whose_owned_objects_are_not_cached_is_not_reconciled_nor_requeued() -> None:
    client = FakeClient()
    client.add(CRONJOB, {"metadata": {"name": "a", "namespace": NAMESPACE}, "spec": {}})
    client.add(CRONJOB, {"metadata": {"name": "b", "namespace": NAMESPACE}, "spec": {}})
    inner = Recording()
    ready: set[str] = {"b"}

    def is_ready(obj: Any) -> bool:
        return bool(objects.name_of(obj) in ready)

    acknowledger = DrainAcknowledger(
        inner, kind=CRONJOB, reader=client, writer=client, member="m1", ready=is_ready
    )
    assert acknowledger.reconcile(Request(NAMESPACE, "a")) == Result()
    assert acknowledger.reconcile(Request(NAMESPACE, "b")) == Result()
    assert inner.seen == ["b"]
    assert client.writes_of("patch") == []
