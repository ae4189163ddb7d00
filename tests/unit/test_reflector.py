"""The reflector's handling of watch events, without a server: store first, then the sink."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client as k8s_client

from cronjob_operator.runtime import _reflector as reflector_module
from cronjob_operator.runtime import errors, objects
from cronjob_operator.runtime._reflector import Backoff, Reflector
from cronjob_operator.runtime._rest import RestClient
from cronjob_operator.runtime._store import Store
from cronjob_operator.runtime.kinds import CONFIG_MAP


class Sink:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.events: list[tuple[str, str, bool]] = []

    def on_add(self, obj: objects.Obj) -> None:
        self._record("add", obj)

    def on_update(self, old: objects.Obj, new: objects.Obj) -> None:
        self._record("update", new)

    def on_delete(self, obj: objects.Obj) -> None:
        self._record("delete", obj)

    def on_synced(self) -> None:
        self.events.append(("synced", "", True))

    def _record(self, kind: str, obj: objects.Obj) -> None:
        # The store already reflects the event when the sink hears of it.
        in_store = self.store.get(objects.object_key(obj)) is not None
        self.events.append((kind, objects.name_of(obj), in_store))


def event(type_: str, name: str, rv: str, **extra: Any) -> dict[str, Any]:
    meta = {"name": name, "namespace": "ns", "resourceVersion": rv, "managedFields": [{"x": 1}]}
    return {"type": type_, "object": {"metadata": meta, **extra}}


@pytest.fixture
def reflector() -> tuple[Reflector, Store, Sink]:
    store = Store()
    sink = Sink(store)
    rest = RestClient(k8s_client.Configuration())  # never called: events are fed directly
    return Reflector(rest, CONFIG_MAP, store, sink), store, sink


def test_events_update_the_store_then_the_sink(reflector: tuple[Reflector, Store, Sink]) -> None:
    r, store, sink = reflector
    r._handle(event("ADDED", "a", "1"))
    r._handle(event("MODIFIED", "a", "2", data={"k": "v"}))
    r._handle(event("DELETED", "a", "3"))
    assert sink.events == [("add", "a", True), ("update", "a", True), ("delete", "a", False)]
    assert r.resource_version == "3"
    assert len(store) == 0


def test_objects_are_frozen_typed_and_stripped(reflector: tuple[Reflector, Store, Sink]) -> None:
    r, store, _ = reflector
    r._handle(event("ADDED", "a", "1"))
    cached = store.get("ns/a")
    assert cached is not None
    assert cached["kind"] == "ConfigMap"
    assert cached["apiVersion"] == "v1"
    assert "managedFields" not in cached["metadata"]
    with pytest.raises(TypeError):
        cached["metadata"]["name"] = "b"


def test_bookmarks_only_move_the_resource_version(reflector: tuple[Reflector, Store, Sink]) -> None:
    r, store, sink = reflector
    r._handle({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "42"}}})
    assert r.resource_version == "42"
    assert sink.events == []
    assert len(store) == 0


def test_an_error_event_410_means_relist(reflector: tuple[Reflector, Store, Sink]) -> None:
    r, _, _ = reflector
    with pytest.raises(errors.Gone):
        r._handle({"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}})


def test_relist_delivers_vanished_objects_as_deletes(
    reflector: tuple[Reflector, Store, Sink],
) -> None:
    r, _store, sink = reflector
    for name in ("keep", "gone"):
        r._handle(event("ADDED", name, "1"))
    sink.events.clear()
    r._replace(
        [objects.freeze({"metadata": {"name": "keep", "namespace": "ns", "resourceVersion": "5"}})]
    )
    assert sink.events == [("update", "keep", True), ("delete", "gone", False)]


@pytest.mark.parametrize("jitter", [1.0, 1.5], ids=["least-jitter", "most-jitter"])
def test_backoff_doubles_to_its_cap_and_resets_after_quiet(
    monkeypatch: pytest.MonkeyPatch, jitter: float
) -> None:
    # Jitter multiplies the capped delay by 1.0-1.5 (client-go's reflector backoff jitters
    # on top of its 30 s cap too); pinning it to either end makes every delay exact.
    monkeypatch.setattr(reflector_module.random, "uniform", lambda low, high: jitter)
    now = [0.0]
    backoff = Backoff(initial=0.8, maximum=30.0, reset_after=120.0, clock=lambda: now[0])
    delays = [backoff.next_delay() for _ in range(8)]
    doubling = [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0]
    assert delays == pytest.approx([d * jitter for d in doubling])
    now[0] += 119.0
    assert backoff.next_delay() == pytest.approx(30.0 * jitter), "failures 119 s apart: no reset"
    now[0] += 121.0
    assert backoff.next_delay() == pytest.approx(0.8 * jitter), "121 s of quiet resets it"


def test_backoff_jitter_stays_within_half_the_delay() -> None:
    backoff = Backoff(initial=0.8, maximum=30.0, reset_after=120.0, clock=lambda: 0.0)
    delays = [backoff.next_delay() for _ in range(40)]
    bases = [min(30.0, 0.8 * 2**i) for i in range(40)]
    assert all(base <= delay <= base * 1.5 for base, delay in zip(bases, delays, strict=True))
