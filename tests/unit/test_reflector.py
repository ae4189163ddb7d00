"""The reflector's handling of watch events, without a server: store first, then the sink."""

from __future__ import annotations

import itertools
import random
import threading
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client as k8s_client

from cronjob_operator.runtime import errors, objects
from cronjob_operator.runtime.cache import Backoff, Reflector, Store
from cronjob_operator.runtime.cache import _reflector as reflector_module
from cronjob_operator.runtime.client import JSON, RestClient
from cronjob_operator.runtime.kinds import CONFIG_MAP, JOB
from cronjob_operator.runtime.metrics import Metrics


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


@pytest.mark.parametrize("jitter", [1.0, 2.0], ids=["least-jitter", "most-jitter"])
def test_backoff_doubles_to_its_cap_and_resets_after_quiet(
    monkeypatch: pytest.MonkeyPatch, jitter: float
) -> None:
    # Jitter multiplies the capped delay by 1.0-2.0 (client-go's reflector backoff, jitter
    # 1.0, on top of its 30 s cap: [30, 60) s); pinning it to either end makes every delay exact.
    bounds: list[tuple[float, float]] = []

    def uniform(low: float, high: float) -> float:
        bounds.append((low, high))
        return jitter

    monkeypatch.setattr(random, "uniform", uniform)
    now = [10_000.0]  # a monotonic clock is far from 0: quiet is a difference of readings
    backoff = Backoff(initial=0.8, maximum=30.0, reset_after=120.0, clock=lambda: now[0])
    delays = [backoff.next_delay() for _ in range(8)]
    doubling = [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0]
    assert delays == pytest.approx([d * jitter for d in doubling])
    assert set(bounds) == {(1.0, 2.0)}, "the jitter is drawn from [1, 2), client-go's 1.0"
    now[0] += 119.0
    assert backoff.next_delay() == pytest.approx(30.0 * jitter), "failures 119 s apart: no reset"
    now[0] += 121.0
    assert backoff.next_delay() == pytest.approx(0.8 * jitter), "121 s of quiet resets it"


def test_backoff_jitter_stays_within_the_delay_again() -> None:
    backoff = Backoff(initial=0.8, maximum=30.0, reset_after=120.0, clock=lambda: 0.0)
    delays = [backoff.next_delay() for _ in range(40)]
    bases = [min(30.0, 0.8 * 2**i) for i in range(40)]
    assert all(base <= delay <= base * 2.0 for base, delay in zip(bases, delays, strict=True))


class FakeStream:
    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.events, self.closed = events, False

    def __iter__(self) -> Any:
        return iter(self.events)

    def close(self) -> None:
        self.closed = True


class FakeRest:
    """Answers watches and LISTs from scripts and records what was asked.

    When the watch or the LIST script is used up, it sets ``stop`` (ending
    ``Reflector.run``).
    """

    def __init__(
        self, watches: list[FakeStream | Exception], pages: list[dict[str, Any] | Exception]
    ) -> None:
        self.watches, self.pages = watches, pages
        self.watch_params: list[dict[str, Any]] = []
        self.read_timeouts: list[float] = []
        self.list_params: list[dict[str, Any]] = []
        self.requests: list[tuple[str, str, float | None]] = []
        self.watch_paths: list[str] = []
        self.stop = threading.Event()

    def watch(
        self, path: str, params: dict[str, Any], *, read_timeout: float, accept: str = JSON
    ) -> FakeStream:
        if not self.watches:
            self.stop.set()
            raise errors.TransportError("the script is over")
        self.watch_params.append(dict(params))
        self.watch_paths.append(path)
        self.read_timeouts.append(read_timeout)
        return _answer(self.watches.pop(0))

    def request(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        if not self.pages:
            self.stop.set()
            raise errors.TransportError("the script is over")
        self.list_params.append(dict(kwargs["params"]))
        self.requests.append((method, path, kwargs.get("timeout")))
        return _answer(self.pages.pop(0))


def _answer(answer: Any) -> Any:
    if isinstance(answer, Exception):
        raise answer
    return answer


def end_bookmark(rv: str) -> dict[str, Any]:
    meta = {"resourceVersion": rv, "annotations": {"k8s.io/initial-events-end": "true"}}
    return {"type": "BOOKMARK", "object": {"metadata": meta}}


def full_length_watches() -> Callable[[], float]:
    """A clock on which every watch lasts as long as the server's longest timeout: a
    scripted watch that ends is one the server ended in time, not a very short watch."""
    return itertools.count(0, reflector_module.WATCH_TIMEOUT_RANGE[1]).__next__


def streaming(
    watches: list[FakeStream | Exception],
    pages: list[dict[str, Any] | Exception] | None = None,
    *,
    watch_list: bool = True,
) -> tuple[Reflector, Store, Sink, FakeRest]:
    store = Store()
    sink = Sink(store)
    rest = FakeRest(watches, pages or [])
    reflector = Reflector(
        rest,  # type: ignore[arg-type]
        CONFIG_MAP,
        store,
        sink,
        watch_list=watch_list,
        clock=full_length_watches(),
    )
    return reflector, store, sink, rest


@pytest.fixture
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """``Reflector.run`` goes on at once after a failure (the waits are tested above)."""
    monkeypatch.setattr(reflector_module.Backoff, "next_delay", lambda self: 0.0)


GONE_EVENT = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}}
GONE = errors.api_error(410, {"message": "too old resource version", "reason": "Expired"})


def page(rv: str, *names: str) -> dict[str, Any]:
    return {
        "metadata": {"resourceVersion": rv},
        "items": [event("", n, rv)["object"] for n in names],
    }


def test_a_streamed_sync_fills_the_store_at_the_end_bookmark_then_keeps_watching() -> None:
    stream = FakeStream(
        [
            event("ADDED", "a", "1"),
            event("ADDED", "b", "2"),
            {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "3"}}},
            event("ADDED", "c", "3"),
            end_bookmark("4"),
            event("MODIFIED", "a", "5"),
        ]
    )
    r, store, sink, rest = streaming([stream])
    r._sync(threading.Event())
    assert sink.events == [
        ("add", "a", True),
        ("add", "b", True),
        ("add", "c", True),
        ("synced", "", True),
        ("update", "a", True),
    ]
    assert sorted(objects.name_of(obj) for obj in store.list()) == ["a", "b", "c"]
    assert rest.watch_params[0] | {"timeoutSeconds": 0} == {
        "resourceVersion": "",
        "allowWatchBookmarks": True,
        "sendInitialEvents": True,
        "resourceVersionMatch": "NotOlderThan",
        "timeoutSeconds": 0,
    }
    assert rest.list_params == []
    assert (r.streamed_syncs, r.listed_syncs, r.resource_version) == (1, 0, "5")
    assert stream.closed


def test_a_stream_that_ends_before_the_bookmark_changes_nothing_and_fails() -> None:
    r, store, sink, _ = streaming([FakeStream([event("ADDED", "a", "1")])])
    with pytest.raises(errors.TransportError, match="initial-events-end"):
        r._sync(threading.Event())
    assert (len(store), sink.events, r.streamed_syncs) == (0, [], 0)


def test_a_refused_stream_falls_back_to_a_paged_list_from_the_watch_cache() -> None:
    refused = errors.api_error(422, {"message": "sendInitialEvents is forbidden"})
    pages: list[dict[str, Any] | Exception] = [
        {"metadata": {"continue": "next"}, "items": [event("", "a", "1")["object"]]},
        {"metadata": {"resourceVersion": "7"}, "items": [event("", "b", "2")["object"]]},
    ]
    r, store, sink, rest = streaming([refused, FakeStream([event("ADDED", "c", "8")])], pages)
    r._sync(threading.Event())
    assert rest.list_params == [
        {"limit": 500, "resourceVersion": "0"},
        {"limit": 500, "continue": "next"},
    ]
    assert rest.watch_params[1]["resourceVersion"] == "7"
    assert "sendInitialEvents" not in rest.watch_params[1]
    assert [e[:2] for e in sink.events] == [
        ("add", "a"),
        ("add", "b"),
        ("synced", ""),
        ("add", "c"),
    ]
    assert (r.streamed_syncs, r.listed_syncs, len(store)) == (0, 1, 3)


@pytest.mark.parametrize(
    "error",
    [errors.api_error(410, {"message": "too old"}), errors.api_error(503, {"message": "busy"})],
)
def test_gone_and_transient_errors_are_not_a_refusal(error: errors.ApiError) -> None:
    r, _, _, rest = streaming([error, error])  # a 410 is tried once more, from ""
    with pytest.raises(type(error)):
        r._sync(threading.Event())
    assert rest.list_params == []


@pytest.mark.usefixtures("no_backoff")
def test_a_watch_ending_in_410_streams_again_from_the_last_version_seen() -> None:
    first = FakeStream([end_bookmark("4"), event("ADDED", "a", "9"), GONE_EVENT])
    second = FakeStream([event("ADDED", "a", "9"), end_bookmark("11")])
    r, store, _, rest = streaming([first, second])
    r.run(rest.stop)
    assert [p["resourceVersion"] for p in rest.watch_params] == ["", "9"]
    assert (r.resource_version, len(store), r._version_unavailable) == ("11", 1, False)


@pytest.mark.usefixtures("no_backoff")
def test_a_streamed_sync_answering_410_retries_at_once_from_a_consistent_read() -> None:
    first = FakeStream([end_bookmark("4"), event("ADDED", "a", "9"), GONE_EVENT])
    fresh = FakeStream([event("ADDED", "a", "12"), end_bookmark("12")])
    r, _, _, rest = streaming([first, GONE, fresh])
    r.run(rest.stop)
    assert [p["resourceVersion"] for p in rest.watch_params] == ["", "9", ""]
    assert (r.resource_version, r._version_unavailable) == ("12", False)


@pytest.mark.usefixtures("no_backoff")
def test_a_list_answering_410_relists_at_once_from_a_consistent_read() -> None:
    watches: list[FakeStream | Exception] = [FakeStream([GONE_EVENT]), FakeStream([])]
    pages: list[dict[str, Any] | Exception] = [page("7", "a"), GONE, page("20", "a", "b")]
    r, store, _, rest = streaming(watches, pages, watch_list=False)
    r.run(rest.stop)
    assert [p["resourceVersion"] for p in rest.list_params] == ["0", "7", ""]
    assert [p["resourceVersion"] for p in rest.watch_params] == ["7", "20"]
    assert (len(store), r._version_unavailable, r._list_resource_version()) == (2, False, "20")


def test_a_watch_outlives_no_server_timeout_on_the_clients_read_timeout() -> None:
    streams: list[FakeStream | Exception] = [FakeStream([end_bookmark("4")])]
    streams += [FakeStream([]) for _ in range(30)]
    r, _, _, rest = streaming(streams)
    r._sync(threading.Event())
    for _ in range(30):
        r._watch(threading.Event())
    timeouts = [p["timeoutSeconds"] for p in rest.watch_params]
    assert all(300 <= t <= 600 for t in timeouts), "client-go: 5 to 10 minutes"
    assert len(set(timeouts)) > 1, "drawn at random, so watches do not reconnect in step"
    assert all(
        read == t + reflector_module.WATCH_READ_GRACE and read > t
        for read, t in zip(rest.read_timeouts, timeouts, strict=True)
    ), "the server ends a quiet watch before the client's read timeout would"


@pytest.mark.usefixtures("no_backoff")
def test_a_watch_the_server_ends_is_watched_again_without_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    quiet = [FakeStream([end_bookmark("4")]), FakeStream([]), FakeStream([])]
    r, _, _, rest = streaming(quiet)  # type: ignore[arg-type]
    caplog.set_level("INFO", logger=reflector_module.log.name)
    r.run(rest.stop)
    assert [p["resourceVersion"] for p in rest.watch_params] == ["", "4", "4"]
    assert [p.get("sendInitialEvents") for p in rest.watch_params] == [True, None, None]
    warnings = [rec for rec in caplog.records if rec.levelname == "WARNING"]
    assert [rec.getMessage() for rec in warnings] == [
        f"{CONFIG_MAP}: list/watch failed, retrying in 0.0s: the script is over"
    ], "only the end of the test's script"


def test_a_repeated_stream_refusal_is_said_once_not_on_every_retry(
    caplog: pytest.LogCaptureFixture,
) -> None:
    forbidden = {"message": 'cannot watch resource "configmaps"'}
    answers: list[FakeStream | Exception] = []
    for _ in range(3):  # each retry: the streamed sync is refused, the plain watch opens
        answers += [errors.api_error(403, forbidden), FakeStream([])]
    r, _, _, _ = streaming(answers)
    r._list = lambda resource_version: None  # type: ignore[method-assign]
    caplog.set_level("DEBUG", logger=reflector_module.log.name)
    for _ in range(3):
        r._sync(threading.Event())
    said = [rec.levelname for rec in caplog.records if "refused a streaming list" in rec.message]
    assert said == ["INFO", "DEBUG", "DEBUG"]


def test_a_namespaced_reflector_lists_and_watches_its_namespace_only() -> None:
    store = Store()
    pages: list[dict[str, Any] | Exception] = [page("7", "a"), page("9", "a")]
    rest = FakeRest([FakeStream([]), FakeStream([])], pages)
    r = Reflector(
        rest,  # type: ignore[arg-type]
        CONFIG_MAP,
        store,
        Sink(store),
        namespace="ns",
        list_timeout=7.0,
        clock=full_length_watches(),
    )
    r._watch_list = False
    r._sync(threading.Event())
    r._sync(threading.Event())
    path = "/api/v1/namespaces/ns/configmaps"
    assert rest.requests == [("GET", path, 7.0), ("GET", path, 7.0)], "a LIST has a deadline"
    assert rest.watch_paths == [path, path]
    assert (r.listed_syncs, r.resource_version) == (2, "9")


@pytest.mark.usefixtures("no_backoff")
def test_a_forbidden_verb_is_logged_once_per_message_naming_the_verb_and_the_resource(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A missing RBAC verb: one ERROR that says what to grant, repeats at DEBUG, a new
    message or verb again at ERROR (docs/operations.md)."""

    def forbidden(message: str) -> errors.ApiError:
        return errors.api_error(403, {"message": message})

    pages: list[dict[str, Any] | Exception] = [
        forbidden("no list"),
        forbidden("no list"),
        forbidden("no list, still"),
        page("7", "a"),
    ]
    store = Store()
    rest = FakeRest([forbidden("no watch")], pages)
    r = Reflector(rest, JOB, store, Sink(store), watch_list=False)  # type: ignore[arg-type]
    caplog.set_level("DEBUG", logger=reflector_module.log.name)
    r.run(rest.stop)
    said = [
        (rec.levelname, rec.getMessage())
        for rec in caplog.records
        if "forbidden to" in rec.getMessage()
    ]
    grant = (
        "grant the verb to the operator's service account "
        "(retrying with backoff; not ready until it succeeds)"
    )
    assert said == [
        ("ERROR", f"{JOB}: forbidden to list jobs.batch; {grant}: no list"),
        ("DEBUG", f"{JOB}: still forbidden to list jobs.batch, retrying in 0.0s"),
        ("ERROR", f"{JOB}: forbidden to list jobs.batch; {grant}: no list, still"),
        ("ERROR", f"{JOB}: forbidden to watch jobs.batch; {grant}: no watch"),
    ]


class ReselectingStream(FakeStream):
    """Yields its events, then, as the watch goes on, the selector changes: ``reselect``
    closes this stream, which ends its iteration as a closed connection does."""

    def __init__(self, events: list[dict[str, Any]], reselect: Any) -> None:
        super().__init__(events)
        self.reselect = reselect

    def __iter__(self) -> Any:
        yield from self.events
        self.reselect()


@pytest.mark.usefixtures("no_backoff")
def test_a_new_selector_syncs_again_from_the_last_version_and_drops_what_left_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = Store()
    sink = Sink(store)
    generations: list[int] = []
    rest = FakeRest([], [])
    selecting = Reflector(rest, CONFIG_MAP, store, sink, label_selector="s=a")  # type: ignore[arg-type]
    rest.watches += [
        ReselectingStream(
            [event("ADDED", "a", "1"), end_bookmark("4")],
            lambda: generations.append(selecting.reselect("s=b")),
        ),
        FakeStream([event("ADDED", "b", "5"), end_bookmark("6")]),
    ]
    caplog.set_level("INFO", logger=reflector_module.log.name)
    selecting.run(rest.stop)
    assert [(p["labelSelector"], p["resourceVersion"]) for p in rest.watch_params] == [
        ("s=a", ""),
        ("s=b", "4"),  # from the last version seen: no quorum read for a new selector
    ]
    assert all(p.get("sendInitialEvents") for p in rest.watch_params)
    assert [objects.name_of(obj) for obj in store.list()] == ["b"]
    assert sink.events == [
        ("add", "a", True),
        ("synced", "", True),
        ("add", "b", True),
        ("delete", "a", False),
        ("synced", "", True),
    ]
    assert (generations, selecting.synced_generation) == ([1], 1)
    warnings = [rec.getMessage() for rec in caplog.records if rec.levelname == "WARNING"]
    assert warnings == [f"{CONFIG_MAP}: list/watch failed, retrying in 0.0s: the script is over"]


def test_a_reselection_during_a_paged_list_opens_no_watch_under_the_old_selector() -> None:
    r, _store, _, rest = streaming([], [page("3", "a")], watch_list=False)
    original = r._list

    def list_then_reselect(resource_version: str) -> None:
        original(resource_version)
        r.reselect("s=b")

    r._list = list_then_reselect  # type: ignore[method-assign]
    r._sync(threading.Event())
    assert rest.watch_params == []  # the watch saw the new selection pending and returned
    assert r.synced_generation == 0  # what is stored is the old selection's
    assert r.generation == 1


@pytest.mark.parametrize("watch_list", [True, False], ids=["streamed", "paged"])
def test_a_sync_keeps_the_stored_copy_of_an_object_at_the_version_it_holds(
    watch_list: bool,
) -> None:
    # A reselection or a relist brings every kept object again: at the stored version
    # it must not be decoded and frozen a second time (memory and CPU of a sync).
    r, store, sink, rest = streaming([], watch_list=watch_list)
    r._handle(event("ADDED", "same", "1"))
    r._handle(event("ADDED", "changed", "2"))
    same, changed = store.get("ns/same"), store.get("ns/changed")
    sink.events.clear()
    again = [event("", "same", "1")["object"], event("", "changed", "3")["object"]]
    if watch_list:
        initial: dict[str, objects.Obj] = {}
        for raw in again:
            r._collect({"type": "ADDED", "object": raw}, initial)
        r._collect(end_bookmark("4"), initial)
    else:
        rest.pages = [{"metadata": {"resourceVersion": "4"}, "items": again}]
        r._list("1")
    assert store.get("ns/same") is same
    fresh = store.get("ns/changed")
    assert fresh is not None
    assert fresh is not changed
    assert fresh["metadata"]["resourceVersion"] == "3"
    assert sink.events == [("update", "changed", True), ("synced", "", True)]


def poisoning(names: set[str]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A transform that fails on the objects named ``names``, as freezing a 600-deep one
    did before it stopped recursing: any object that cannot be decoded."""

    def transform(obj: dict[str, Any]) -> dict[str, Any]:
        if objects.name_of(obj) in names:
            raise RecursionError("maximum recursion depth exceeded")
        return reflector_module.strip_managed_fields(obj)

    return transform


def skipping(
    watches: list[FakeStream | Exception], poison: set[str]
) -> tuple[Reflector, Store, Sink, list[tuple[objects.Obj, Exception]], Metrics]:
    store, metrics = Store(), Metrics()
    sink, skipped = Sink(store), []
    reflector = Reflector(
        FakeRest(watches, []),  # type: ignore[arg-type]
        CONFIG_MAP,
        store,
        sink,
        transform=poisoning(poison),
        metrics=metrics,
        on_skip=lambda ref, exc: skipped.append((ref, exc)),
        clock=full_length_watches(),
    )
    return reflector, store, sink, skipped, metrics


def skipped_count(metrics: Metrics) -> float | None:
    return metrics.registry.get_sample_value(
        "informer_objects_skipped_total", {"kind": str(CONFIG_MAP)}
    )


def test_an_object_that_cannot_be_decoded_is_skipped_and_every_other_synced(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stream = FakeStream([event("ADDED", "a", "1"), event("ADDED", "bad", "2"), end_bookmark("3")])
    r, store, sink, skipped, metrics = skipping([stream], {"bad"})
    r._sync(threading.Event())  # raised RecursionError before: the informer never synced
    assert sorted(store.keys()) == ["ns/a"]
    assert ("synced", "", True) in sink.events
    assert skipped_count(metrics) == 1
    [(reference, error)] = skipped
    assert reference == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "bad", "namespace": "ns", "resourceVersion": "2"},
    }
    assert isinstance(error, RecursionError)
    [record] = [rec for rec in caplog.records if rec.levelname == "ERROR"]
    assert "ns/bad" in record.getMessage()
    assert "RecursionError" in record.getMessage()


def test_a_watched_object_that_cannot_be_decoded_leaves_the_store_and_the_watch_goes_on() -> None:
    r, store, sink, skipped, metrics = skipping([], {"bad"})
    r._handle(event("ADDED", "bad", "1"))
    r._handle(event("ADDED", "a", "2"))
    assert sorted(store.keys()) == ["ns/a"]
    assert r.resource_version == "2"
    r._transform = poisoning({"a"})  # a version that can be decoded no more
    r._handle(event("MODIFIED", "a", "3"))
    assert store.keys() == []
    assert r.resource_version == "3"
    assert sink.events == [("add", "a", True), ("delete", "a", False)]
    assert skipped_count(metrics) == 2
    assert len(skipped) == 2


def test_a_listed_object_that_cannot_be_decoded_is_left_out_of_the_list() -> None:
    store, metrics = Store(), Metrics()
    rest = FakeRest([], [page("5", "a", "bad", "c")])
    r = Reflector(
        rest,  # type: ignore[arg-type]
        CONFIG_MAP,
        store,
        Sink(store),
        transform=poisoning({"bad"}),
        metrics=metrics,
    )
    r._list("0")
    assert sorted(store.keys()) == ["ns/a", "ns/c"]
    assert r.resource_version == "5"
    assert skipped_count(metrics) == 1


def short_watches(
    clock: Callable[[], float], count: int
) -> tuple[Reflector, FakeRest, list[float]]:
    """A reflector that syncs, then meets ``count`` watches the server ends with no event;
    it records the backoff delays it waits instead of sleeping."""
    streams: list[FakeStream | Exception] = [FakeStream([end_bookmark("4")])]
    streams += [FakeStream([]) for _ in range(count)]
    rest = FakeRest(streams, [])
    waited: list[float] = []

    def wait(stop: threading.Event, delay: float) -> bool:
        waited.append(delay)
        return stop.is_set()

    store = Store()
    reflector = Reflector(rest, CONFIG_MAP, store, Sink(store), clock=clock, wait=wait)  # type: ignore[arg-type]
    return reflector, rest, waited


def test_a_watch_that_ends_at_once_with_no_event_backs_off_as_client_go_does(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(random, "uniform", lambda low, high: low)  # no jitter: exact delays
    r, rest, waited = short_watches(lambda: 100.0, count=7)  # no time passes: every watch short
    r.run(rest.stop)  # before: 7 watches at once, no wait at all
    assert waited[:7] == pytest.approx([0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0])
    assert len(rest.watch_params) == 8, "the sync, then each short watch after its backoff"
    assert "very short watch" in caplog.text


def test_a_watch_that_lasted_a_second_is_watched_again_at_once() -> None:
    r, rest, waited = short_watches(itertools.count(0, reflector_module.SHORT_WATCH).__next__, 5)
    r.run(rest.stop)
    assert len(rest.watch_params) == 6
    assert len(waited) == 1, "only the end of the script (a failed watch request) waits"


def test_a_watch_cut_by_stop_or_reselect_is_no_very_short_watch() -> None:
    stop = threading.Event()
    r, rest, _ = short_watches(lambda: 100.0, count=0)  # no time passes: every watch short

    class CutStream(FakeStream):
        """Ends with no event because the reflector's own stop or reselect closed it."""

        def __init__(self, cut: Callable[[], object]) -> None:
            super().__init__([])
            self.cut = cut

        def __iter__(self) -> Any:
            self.cut()
            return iter(())

    rest.watches = [CutStream(stop.set), CutStream(lambda: r.reselect("app=web"))]
    r._watch(stop)  # both raised "very short watch" before stop and reselect were checked
    r._watch(threading.Event())


def asked_to_retry(code: int = 429) -> errors.ApiError:
    """The API server's "try again" (a just-created CRD's storage starting): Retry-After 1."""
    reason = "TooManyRequests" if code == 429 else "ServiceUnavailable"
    status = {"message": "storage is (re)initializing", "reason": reason}
    return errors.api_error(code, status, retry_after=1.0)


def timed(
    monkeypatch: pytest.MonkeyPatch, watches: list[FakeStream | Exception]
) -> tuple[Reflector, FakeRest]:
    """A reflector whose clock moves only by the backoff delays it waits (no jitter)."""
    monkeypatch.setattr(random, "uniform", lambda low, high: low)
    now = [1_000.0]

    def wait(stop: threading.Event, delay: float) -> bool:
        now[0] += delay
        return stop.is_set()

    rest = FakeRest(watches, [])
    store = Store()
    reflector = Reflector(
        rest,  # type: ignore[arg-type]
        CONFIG_MAP,
        store,
        Sink(store),
        clock=lambda: now[0],
        wait=wait,
    )
    return reflector, rest


def said(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    """What the reflector logged, but the end of the test's script."""
    return [
        (rec.levelname, rec.getMessage())
        for rec in caplog.records
        if rec.name == reflector_module.log.name and "the script is over" not in rec.getMessage()
    ]


def test_a_retry_the_server_asked_for_is_no_warning_while_it_is_short(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The README's first screen: a just-created CRD's storage answers 429 for a moment."""
    answers: list[FakeStream | Exception] = [asked_to_retry(), asked_to_retry()]
    r, rest = timed(monkeypatch, [*answers, FakeStream([end_bookmark("4")])])
    caplog.set_level("DEBUG", logger=reflector_module.log.name)
    r.run(rest.stop)  # before: two WARNING lines, "list/watch failed, retrying in ..."
    asked = "the API server asked to retry the list/watch"
    reason = "storage is (re)initializing (HTTP 429, TooManyRequests)"
    assert said(caplog) == [
        ("INFO", f"{CONFIG_MAP}: {asked}; retrying in 0.8s: {reason}"),
        ("DEBUG", f"{CONFIG_MAP}: {asked} again; retrying in 1.6s: {reason}"),
    ]
    assert r.streamed_syncs == 1


def test_a_retry_the_server_asks_for_too_long_is_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Failures at 0, 0.8, 2.4, 5.6, 12.0, 24.8, 50.4 s: the last is past the quiet 30 s
    # (and its backoff at client-go's cap).
    r, rest = timed(monkeypatch, [asked_to_retry() for _ in range(7)])
    caplog.set_level("DEBUG", logger=reflector_module.log.name)
    r.run(rest.stop)
    levels = [level for level, _ in said(caplog)]
    assert levels == ["INFO", *["DEBUG"] * 5, "WARNING"]
    assert said(caplog)[-1][1] == (
        f"{CONFIG_MAP}: list/watch failed, retrying in 30.0s: storage is (re)initializing "
        "(HTTP 429, TooManyRequests) (the API server has asked to retry for 50s)"
    )


def test_a_watch_that_opens_ends_the_servers_asking(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Asked again long after a sync: a new episode, quiet again (not 'asked for 60 s')."""
    answers: list[FakeStream | Exception] = [asked_to_retry()]
    answers += [FakeStream([end_bookmark("4")]), asked_to_retry(), asked_to_retry(503)]
    r, rest = timed(monkeypatch, answers)
    r._clock = itertools.count(0.0, 60.0).__next__  # every reading a minute later
    caplog.set_level("DEBUG", logger=reflector_module.log.name)
    r.run(rest.stop)
    assert [level for level, _ in said(caplog)] == ["INFO", "INFO", "WARNING"]


@pytest.mark.parametrize(
    "error",
    [
        errors.api_error(503, {"message": "etcd is down"}),  # no Retry-After: not asked
        errors.api_error(500, {"message": "internal error"}),
        errors.TransportError("connection refused"),
    ],
    ids=["503", "500", "transport"],
)
def test_a_failure_the_server_did_not_ask_to_retry_is_a_warning_at_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, error: Exception
) -> None:
    r, rest = timed(monkeypatch, [error])
    caplog.set_level("DEBUG", logger=reflector_module.log.name)
    r.run(rest.stop)
    assert said(caplog) == [
        ("WARNING", f"{CONFIG_MAP}: list/watch failed, retrying in 0.8s: {error}")
    ]
