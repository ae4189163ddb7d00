"""Each informer handler has its own buffer and thread (client-go's processorListener),
except one that ``runs_inline`` (it never blocks), called on the informer's thread.

Events are fed through the reflector's own ``_handle`` (what its thread does for a watch
event), without a server. A handler that blocks must not hold up the reflector, another
handler of the same informer, or another informer; it still gets every event, in order,
once it goes on. Waits are bounded by a deadline; nothing here depends on timing.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s_client

from cronjob_operator.runtime import objects
from cronjob_operator.runtime.cache import Informer
from cronjob_operator.runtime.cache._informer import _Listener
from cronjob_operator.runtime.client import RestClient
from cronjob_operator.runtime.kinds import CONFIG_MAP

DEADLINE = 30.0


class Recorder:
    """Records (kind, name, resourceVersion); ``gate`` (when given) holds every call."""

    def __init__(self, gate: threading.Event | None = None) -> None:
        self.gate = gate
        self.log: list[tuple[str, str, str]] = []
        self.changed = threading.Condition()

    def on_add(self, obj: objects.Obj) -> None:
        self._record("add", obj)

    def on_update(self, old: objects.Obj, new: objects.Obj) -> None:
        self._record("update", new)

    def on_delete(self, obj: objects.Obj) -> None:
        self._record("delete", obj)

    def _record(self, kind: str, obj: objects.Obj) -> None:
        if self.gate is not None:
            self.gate.wait()
        version = str(obj["metadata"]["resourceVersion"])
        with self.changed:
            self.log.append((kind, objects.name_of(obj), version))
            self.changed.notify_all()

    def wait_for(self, count: int) -> list[tuple[str, str, str]]:
        with self.changed:
            assert self.changed.wait_for(lambda: len(self.log) >= count, DEADLINE), self.log
            return list(self.log)


def event(type_: str, name: str, rv: str) -> dict[str, Any]:
    meta = {"name": name, "namespace": "ns", "resourceVersion": rv}
    return {"type": type_, "object": {"metadata": meta}}


@pytest.fixture
def informers() -> Iterator[tuple[Informer, Informer]]:
    rest = RestClient(k8s_client.Configuration())  # never called: events are fed directly
    pair = Informer(rest, CONFIG_MAP), Informer(rest, CONFIG_MAP)
    yield pair
    for informer in pair:
        informer.stop()


def feed(informer: Informer, *events: dict[str, Any]) -> None:
    """Hand ``events`` to the reflector on a thread; fail if that thread is held up."""

    def handle_all() -> None:
        for e in events:
            informer._reflector._handle(e)

    thread = threading.Thread(target=handle_all)
    thread.start()
    thread.join(DEADLINE)
    assert not thread.is_alive(), "the reflector's thread is blocked by a handler"


def test_a_blocked_handler_holds_up_neither_the_watch_nor_other_handlers_or_informers(
    informers: tuple[Informer, Informer],
) -> None:
    first, second = informers
    gate = threading.Event()
    blocked, beside, elsewhere = Recorder(gate), Recorder(), Recorder()
    first.add_handler(blocked)
    first.add_handler(beside)
    second.add_handler(elsewhere)
    try:
        feed(first, event("ADDED", "a", "1"), event("MODIFIED", "a", "2"))
        feed(second, event("ADDED", "b", "3"))
        assert beside.wait_for(2) == [("add", "a", "1"), ("update", "a", "2")]
        assert elsewhere.wait_for(1) == [("add", "b", "3")]
        feed(first, event("DELETED", "a", "4"))
        assert beside.wait_for(3)[-1] == ("delete", "a", "4")
        assert blocked.log == []
    finally:
        gate.set()
    assert blocked.wait_for(3) == [("add", "a", "1"), ("update", "a", "2"), ("delete", "a", "4")]


def test_a_handler_added_late_is_replayed_the_cache_on_its_own_thread(
    informers: tuple[Informer, Informer],
) -> None:
    informer, _ = informers
    feed(informer, event("ADDED", "a", "1"), event("ADDED", "b", "2"))  # not synced yet
    gate = threading.Event()
    late = Recorder(gate)
    adder = threading.Thread(target=informer.add_handler, args=(late,))
    adder.start()
    adder.join(DEADLINE)
    assert not adder.is_alive(), "add_handler waited for the handler"
    feed(informer, event("MODIFIED", "a", "3"))
    gate.set()
    replayed = late.wait_for(3)
    assert sorted(replayed[:2]) == [("add", "a", "1"), ("add", "b", "2")]
    assert replayed[2] == ("update", "a", "3"), "the replay comes before later events"


class Failing(Recorder):
    def _record(self, kind: str, obj: objects.Obj) -> None:
        super()._record(kind, obj)
        raise RuntimeError("handler bug")


def wait_idle(informer: Informer) -> None:
    deadline = threading.Event()
    for _ in range(int(DEADLINE / 0.01)):
        if informer.handlers_idle():
            return
        deadline.wait(0.01)
    raise AssertionError("the handlers never became idle")


def test_handlers_are_idle_only_once_each_has_finished_every_event_it_was_given(
    informers: tuple[Informer, Informer],
) -> None:
    informer, _ = informers
    assert informer.handlers_idle(), "no handler, nothing pending"
    gate = threading.Event()
    held, failing = Recorder(gate), Failing()
    informer.add_handler(held)
    informer.add_handler(failing)
    feed(informer, event("ADDED", "a", "1"))
    failing.wait_for(1)
    assert not informer.handlers_idle(), "the store holds an event a handler has not finished"
    gate.set()
    held.wait_for(1)
    wait_idle(informer)
    feed(informer, event("MODIFIED", "a", "2"))
    assert failing.wait_for(2)[-1] == ("update", "a", "2")
    wait_idle(informer)  # a handler that raised still finished its event


def test_stop_ends_the_handler_threads_and_drops_what_is_buffered(
    informers: tuple[Informer, Informer],
) -> None:
    informer, _ = informers
    gate = threading.Event()
    handler = Recorder(gate)
    informer.add_handler(handler)
    feed(informer, event("ADDED", "a", "1"), event("MODIFIED", "a", "2"))
    informer.stop(timeout=0.0)  # signal only: the handler is still held by the gate
    gate.set()
    for listener in informer._listeners:
        assert isinstance(listener, _Listener)
        listener.join(DEADLINE)
        assert not listener._thread.is_alive()
    assert handler.log in ([], [("add", "a", "1")]), "at most the call under way at stop"


class InlineRecorder(Recorder):
    """A handler that says it never blocks; records the thread of each call too."""

    runs_inline = True

    def __init__(self) -> None:
        super().__init__()
        self.threads: list[threading.Thread] = []

    def _record(self, kind: str, obj: objects.Obj) -> None:
        self.threads.append(threading.current_thread())
        super()._record(kind, obj)


def test_a_handler_that_runs_inline_is_called_in_order_on_the_informers_thread(
    informers: tuple[Informer, Informer],
) -> None:
    # Failed before: every handler got a thread of its own (and a wake-up per event).
    informer, _ = informers
    feed(informer, event("ADDED", "a", "1"))
    handler = InlineRecorder()
    informer.add_handler(handler)  # the cache is replayed at once, on this thread
    assert handler.log == [("add", "a", "1")]
    assert handler.threads == [threading.current_thread()]
    feed(informer, event("MODIFIED", "a", "2"), event("DELETED", "a", "2"))
    assert handler.log == [("add", "a", "1"), ("update", "a", "2"), ("delete", "a", "2")]
    assert threading.current_thread() not in handler.threads[1:]  # the feeding thread's
    assert informer.handlers_idle()
    assert not [t for t in threading.enumerate() if t.name.startswith("handler-configmaps")]
