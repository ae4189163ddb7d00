"""The informer against a real API server: list, watch, bookmarks, 410 relists, restarts."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from cronjob_operator.envtest import ControlPlane, wait_for
from cronjob_operator.runtime import objects
from cronjob_operator.runtime.cache import Informer
from cronjob_operator.runtime.client import RestClient, load_configuration
from cronjob_operator.runtime.kinds import CONFIG_MAP


class Events:
    """Records what an informer delivered, by name."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.log: list[tuple[str, str]] = []

    def on_add(self, obj: objects.Obj) -> None:
        self._record("add", obj)

    def on_update(self, old: objects.Obj, new: objects.Obj) -> None:
        self._record("update", new)

    def on_delete(self, obj: objects.Obj) -> None:
        self._record("delete", obj)

    def _record(self, kind: str, obj: objects.Obj) -> None:
        with self.lock:
            self.log.append((kind, objects.name_of(obj)))

    def seen(self, kind: str, name: str) -> bool:
        with self.lock:
            return (kind, name) in self.log


@pytest.fixture
def rest(control_plane: ControlPlane) -> RestClient:
    return RestClient(load_configuration(str(control_plane.kubeconfig)))


@pytest.fixture
def informer(rest: RestClient, namespace: str) -> Iterator[tuple[Informer, Events]]:
    informer = Informer(rest, CONFIG_MAP, namespace=namespace)
    events = Events()
    informer.add_handler(events)
    informer.start()
    assert informer.wait_for_sync(30)
    yield informer, events
    informer.stop()


def configmap(name: str, namespace: str, value: str = "1") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": {"v": value},
    }


def test_lists_then_delivers_add_update_delete(
    rest: RestClient, namespace: str, control_plane: ControlPlane
) -> None:
    rest.request("POST", CONFIG_MAP.collection_path(namespace), body=configmap("before", namespace))
    informer = Informer(rest, CONFIG_MAP, namespace=namespace)
    events = Events()
    informer.add_handler(events)
    informer.start()
    try:
        assert informer.wait_for_sync(30)
        # Synced means the store holds the list; the handler's own thread delivers it.
        wait_for(lambda: events.seen("add", "before"), 10, message="the list delivered as adds")
        rest.request(
            "POST", CONFIG_MAP.collection_path(namespace), body=configmap("live", namespace)
        )
        wait_for(lambda: events.seen("add", "live"), 10)
        rest.request(
            "PATCH",
            CONFIG_MAP.object_path(namespace, "live"),
            body={"data": {"v": "2"}},
            content_type="application/merge-patch+json",
        )
        wait_for(lambda: events.seen("update", "live"), 10)
        assert informer.store.get(f"{namespace}/live")["data"]["v"] == "2"  # type: ignore[index]
        rest.request("DELETE", CONFIG_MAP.object_path(namespace, "live"))
        wait_for(lambda: events.seen("delete", "live"), 10)
        assert informer.store.get(f"{namespace}/live") is None
        assert "managedFields" not in informer.store.get(f"{namespace}/before")["metadata"]  # type: ignore[index]
    finally:
        informer.stop()


class GatedRest:
    """The real RestClient, except that opening a watch waits while the gate is closed."""

    def __init__(self, rest: RestClient) -> None:
        self.rest = rest
        self.open = threading.Event()
        self.open.set()

    def request(self, *args: Any, **kwargs: Any) -> Any:
        return self.rest.request(*args, **kwargs)

    def watch(self, *args: Any, **kwargs: Any) -> Any:
        self.open.wait()
        return self.rest.watch(*args, **kwargs)


def test_relists_after_compaction_and_delivers_missed_deletes(
    rest: RestClient, namespace: str, control_plane: ControlPlane, caplog: pytest.LogCaptureFixture
) -> None:
    for name in ("keep", "doomed"):
        rest.request("POST", CONFIG_MAP.collection_path(namespace), body=configmap(name, namespace))
    caplog.set_level(logging.INFO, logger="cronjob_operator.runtime.cache._reflector")
    gated = GatedRest(rest)
    informer = Informer(gated, CONFIG_MAP, namespace=namespace)  # type: ignore[arg-type]
    events = Events()
    informer.add_handler(events)
    informer.start()
    try:
        assert informer.wait_for_sync(30)
        gated.open.clear()  # the informer cannot re-watch until the test says so
        control_plane.stop_component("kube-apiserver", kill=True)
        control_plane.start_component("kube-apiserver")
        rest.request("DELETE", CONFIG_MAP.object_path(namespace, "doomed"))
        for i in range(5):
            rest.request(
                "POST", CONFIG_MAP.collection_path(namespace), body=configmap(f"new-{i}", namespace)
            )
        control_plane.compact_etcd()
        control_plane.stop_component("kube-apiserver")  # flush the watch cache's history too
        control_plane.start_component("kube-apiserver")
        assert not events.seen("delete", "doomed")
        gated.open.set()
        wait_for(lambda: events.seen("delete", "doomed"), 120, message="missed delete delivered")
        assert any("is gone; syncing again" in record.getMessage() for record in caplog.records)
        server = {
            item["metadata"]["name"]
            for item in rest.request("GET", CONFIG_MAP.collection_path(namespace))["items"]
        }
        wait_for(
            lambda: {objects.name_of(o) for o in informer.store.list()} == server,
            30,
            message="cache equals server",
        )
    finally:
        gated.open.set()
        informer.stop()


def test_survives_an_api_server_restart(
    informer: tuple[Informer, Events], rest: RestClient, namespace: str, control_plane: ControlPlane
) -> None:
    inf, events = informer
    control_plane.stop_component("kube-apiserver")
    control_plane.start_component("kube-apiserver")
    rest.request(
        "POST", CONFIG_MAP.collection_path(namespace), body=configmap("after-restart", namespace)
    )
    wait_for(
        lambda: events.seen("add", "after-restart"), 120, message="watch resumed after restart"
    )
    assert inf.store.get(f"{namespace}/after-restart") is not None


@pytest.mark.parametrize("watch_list", [True, False], ids=["streamed", "paged"])
def test_a_label_selector_caches_only_matching_objects_and_a_relabel_leaves(
    rest: RestClient, namespace: str, watch_list: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Sharding's filter (Cache.set_label_selector): the API server sends only the
    # member's share, in the first sync (streamed or listed) and in the watch after it.
    from cronjob_operator.runtime.cache import Cache, _reflector

    if not watch_list:
        monkeypatch.setattr(_reflector.Reflector, "_sync", _paged_sync)
    path = CONFIG_MAP.collection_path(namespace)
    mine = {**configmap("mine", namespace), "metadata": {"name": "mine", "labels": {"s": "a"}}}
    rest.request("POST", path, body=mine)
    rest.request("POST", path, body=configmap("other", namespace))
    cache = Cache(rest, namespace=namespace)
    cache.set_label_selector(CONFIG_MAP, "s=a")
    events = Events()
    cache.informer(CONFIG_MAP).add_handler(events)
    cache.start()
    try:
        cache.wait_for_sync(30)
        assert [objects.name_of(obj) for obj in cache.list(CONFIG_MAP)] == ["mine"]
        for name, labels in (("other", {"s": "a"}), ("mine", {"s": "b"})):
            rest.request(
                "PATCH",
                CONFIG_MAP.object_path(namespace, name),
                body={"metadata": {"labels": labels}},
                content_type="application/merge-patch+json",
            )
        wait_for(lambda: events.seen("delete", "mine"), 10, message="the relabelled one to go")
        wait_for(lambda: events.seen("add", "other"), 10, message="the labelled one to come")
        assert [objects.name_of(obj) for obj in cache.list(CONFIG_MAP)] == ["other"]
        with pytest.raises(RuntimeError):
            cache.set_label_selector(CONFIG_MAP, "s=b")  # too late: the informer exists
    finally:
        cache.stop()


def _paged_sync(self: Any, stop: threading.Event) -> None:
    """The reflector's sync with streaming lists off (a server without WatchList)."""
    self._list(self._list_resource_version())
    self._watch(stop)


@pytest.mark.parametrize("watch_list", [True, False], ids=["streamed", "paged"])
def test_a_new_selector_on_a_running_cache_swaps_the_objects_and_says_when_it_holds_them(
    rest: RestClient, namespace: str, watch_list: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A sharded member whose share changed (Cache.reselect): the informer syncs again
    # under the new selector; what left the selection goes as deletes, what entered it
    # comes as adds, and has_synced_selection turns true only once the store holds it.
    from cronjob_operator.runtime.cache import Cache, _reflector

    if not watch_list:
        monkeypatch.setattr(_reflector.Reflector, "_sync", _paged_sync)

    def post(name: str, bucket: str) -> None:
        labelled = {"name": name, "labels": {"b": bucket}}
        body = {**configmap(name, namespace), "metadata": labelled}
        rest.request("POST", CONFIG_MAP.collection_path(namespace), body=body)

    for name, bucket in (("in-1", "1"), ("in-2", "2"), ("in-3", "3")):
        post(name, bucket)
    cache = Cache(rest, namespace=namespace)
    cache.set_label_selector(CONFIG_MAP, "b in (1,2)")
    events = Events()
    informer = cache.informer(CONFIG_MAP)
    informer.add_handler(events)
    cache.start()
    try:
        cache.wait_for_sync(30)
        assert informer.has_synced_selection()
        assert sorted(objects.name_of(o) for o in cache.list(CONFIG_MAP)) == ["in-1", "in-2"]
        cache.reselect(CONFIG_MAP, "b in (2,3)")
        assert cache.kind_options(CONFIG_MAP).label_selector == "b in (2,3)"
        wait_for(informer.has_synced_selection, 20, message="the new selection to sync")
        assert sorted(objects.name_of(o) for o in cache.list(CONFIG_MAP)) == ["in-2", "in-3"]
        wait_for(lambda: events.seen("delete", "in-1"), 10, message="in-1 to leave")
        assert events.seen("add", "in-3")
        # ... and the watch after the new sync runs under the new selector.
        post("in-4", "3")
        post("out-5", "1")
        wait_for(lambda: events.seen("add", "in-4"), 10, message="in-4 to come")
        assert not events.seen("add", "out-5")
        assert informer.last_error is None
    finally:
        cache.stop()
