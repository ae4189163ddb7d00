"""Per-kind cache options without a server: what goes on the list and the watch, what is kept.

``KindOptions`` choose, per kind, the label and field selectors the API server filters
by, the namespaces (one reflector each, filling one store), the transform and
``metadata_only`` (``PartialObjectMetadata`` asked for with an Accept header, stored as
the kind it is of). tests/integration/test_cache_options.py runs the same on a cluster.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from kubernetes import client as k8s_client

from cronjob_operator.runtime import objects
from cronjob_operator.runtime.cache import Cache, Informer, KindOptions, Reflector, Store
from cronjob_operator.runtime.client import JSON, METADATA, METADATA_LIST, RestClient
from cronjob_operator.runtime.kinds import CONFIG_MAP, NAMESPACE, POD


class Stream:
    """A watch stream that yields what it was given, then ends as a server timeout does."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self._events = events

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self._events)

    def close(self) -> None:
        pass


class RecordingRest(RestClient):
    """Answers lists with ``page`` and watches with ``events``, recording every call."""

    def __init__(self, page: Mapping[str, Any], events: list[dict[str, Any]] = []) -> None:  # noqa: B006
        super().__init__(k8s_client.Configuration())
        self.page = page
        self.events = events
        self.calls: list[tuple[str, str, dict[str, Any], str]] = []

    def request(  # type: ignore[override]
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        timeout: float | None = None,
        accept: str = JSON,
        **_: Any,
    ) -> Any:
        self.calls.append(("list", path, dict(params or {}), accept))
        return self.page

    def watch(  # type: ignore[override]
        self, path: str, params: Mapping[str, Any], *, read_timeout: float, accept: str = JSON
    ) -> Any:
        self.calls.append(("watch", path, dict(params), accept))
        return Stream(self.events)


class Sink:
    def __init__(self) -> None:
        self.synced = 0

    def on_add(self, obj: objects.Obj) -> None:
        pass

    def on_update(self, old: objects.Obj, new: objects.Obj) -> None:
        pass

    def on_delete(self, obj: objects.Obj) -> None:
        pass

    def on_synced(self) -> None:
        self.synced += 1


def pod(name: str, namespace: str = "a", **extra: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, "resourceVersion": "1"}, **extra}


def partial(name: str, namespace: str = "a") -> dict[str, Any]:
    """What the API server sends for a metadata-only list item or watch object."""
    return {"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", **pod(name, namespace)}


EMPTY_PAGE = {"items": [], "metadata": {"resourceVersion": "7"}}
BOOKMARK = {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "8"}}}
"""A watch with an event in it: one that ends at once without any is a failure."""


def test_selectors_go_on_the_list_and_on_the_watch() -> None:
    rest = RecordingRest(EMPTY_PAGE, [BOOKMARK])
    reflector = Reflector(
        rest, POD, Store(), Sink(), label_selector="app=web", field_selector="status.phase=Running"
    )
    reflector._list("0")
    reflector._watch(threading.Event())
    for verb, _, params, accept in rest.calls:
        assert params["labelSelector"] == "app=web", verb
        assert params["fieldSelector"] == "status.phase=Running", verb
        assert accept == JSON, verb


def test_no_selector_sends_no_selector_parameter() -> None:
    rest = RecordingRest(EMPTY_PAGE)
    Reflector(rest, POD, Store(), Sink())._list("0")
    [(_, _, params, _)] = rest.calls
    assert "labelSelector" not in params
    assert "fieldSelector" not in params


def test_metadata_only_asks_for_partial_object_metadata_on_list_and_watch() -> None:
    rest = RecordingRest(
        {"items": [partial("p1")], "metadata": {"resourceVersion": "7"}}, [BOOKMARK]
    )
    reflector = Reflector(rest, POD, Store(), Sink(), metadata_only=True)
    reflector._list("0")
    reflector._watch(threading.Event())
    assert [(verb, accept) for verb, _, _, accept in rest.calls] == [
        ("list", METADATA_LIST),
        ("watch", METADATA),
    ]


def test_a_metadata_only_object_is_stored_as_the_kind_it_is_of() -> None:
    store = Store()
    rest = RecordingRest({"items": [partial("p1")], "metadata": {"resourceVersion": "7"}})
    Reflector(rest, POD, store, Sink(), metadata_only=True)._list("0")
    cached = store.get("a/p1")
    assert cached is not None
    assert (cached["apiVersion"], cached["kind"]) == ("v1", "Pod")
    assert set(cached) == {"apiVersion", "kind", "metadata"}


def test_a_namespaced_replace_keeps_the_other_namespaces() -> None:
    store = Store()
    store.replace([pod("x", "a"), pod("y", "a"), pod("z", "b")])
    vanished = store.replace([pod("x", "a")], namespace="a")
    assert sorted(store.keys()) == ["a/x", "b/z"]
    assert [objects.name_of(obj) for obj in vanished] == ["y"]


def test_a_relist_of_one_namespace_leaves_the_other_reflectors_objects() -> None:
    store = Store()
    store.upsert(objects.freeze(pod("kept", "b")))
    rest = RecordingRest({"items": [pod("p1", "a")], "metadata": {"resourceVersion": "7"}})
    Reflector(rest, POD, store, Sink(), namespace="a")._list("0")
    assert sorted(store.keys()) == ["a/p1", "b/kept"]


def test_an_informer_of_several_namespaces_lists_each_and_syncs_when_all_have() -> None:
    rest = RecordingRest(EMPTY_PAGE)
    informer = Informer(rest, POD, namespace=("a", "b"))
    first, second = informer._reflectors
    first._list("0")
    assert not informer.has_synced, "one namespace of two has synced"
    second._list("0")
    assert informer.has_synced
    assert [path for _, path, _, _ in rest.calls] == [
        "/api/v1/namespaces/a/pods",
        "/api/v1/namespaces/b/pods",
    ]


def test_an_informer_needs_at_least_one_namespace_when_given_several() -> None:
    with pytest.raises(ValueError, match="at least one"):
        Informer(RecordingRest(EMPTY_PAGE), POD, namespace=())


def test_kind_options_name_at_least_one_namespace() -> None:
    with pytest.raises(ValueError, match="at least one namespace"):
        KindOptions(namespaces=())


def test_the_cache_builds_each_informer_from_its_kind_options() -> None:
    rest = RecordingRest(EMPTY_PAGE)
    options = KindOptions(
        label_selector="app=web",
        field_selector="spec.nodeName=n1",
        namespaces=("a", "b"),
        metadata_only=True,
    )
    cache = Cache(rest, namespace="ignored", kind_options={POD: options})
    informer = cache.informer(POD)
    for reflector in informer._reflectors:
        reflector._list("0")
    assert [(path, accept) for _, path, _, accept in rest.calls] == [
        ("/api/v1/namespaces/a/pods", METADATA_LIST),
        ("/api/v1/namespaces/b/pods", METADATA_LIST),
    ]
    assert all(params["fieldSelector"] == "spec.nodeName=n1" for _, _, params, _ in rest.calls)


def test_a_kind_without_options_uses_the_cache_namespace() -> None:
    rest = RecordingRest(EMPTY_PAGE)
    Cache(rest, namespace="only").informer(CONFIG_MAP)._reflector._list("0")
    assert [path for _, path, _, _ in rest.calls] == ["/api/v1/namespaces/only/configmaps"]


def test_a_cluster_scoped_kind_ignores_namespaces() -> None:
    rest = RecordingRest(EMPTY_PAGE)
    cache = Cache(rest, kind_options={NAMESPACE: KindOptions(namespaces=("a",))})
    cache.informer(NAMESPACE)._reflector._list("0")
    assert [path for _, path, _, _ in rest.calls] == ["/api/v1/namespaces"]


def test_set_transform_and_set_label_selector_add_to_the_kinds_options() -> None:
    cache = Cache(RecordingRest(EMPTY_PAGE), kind_options={POD: KindOptions(metadata_only=True)})

    def keep(obj: dict[str, Any]) -> dict[str, Any]:
        return obj

    cache.set_transform(POD, keep)
    cache.set_label_selector(POD, "shard=1")
    assert cache.kind_options(POD) == KindOptions(
        label_selector="shard=1", transform=keep, metadata_only=True
    )


def test_the_constructors_transforms_fold_into_the_kind_options() -> None:
    def keep(obj: dict[str, Any]) -> dict[str, Any]:
        return obj

    cache = Cache(
        RecordingRest(EMPTY_PAGE),
        transforms={POD: keep},
        kind_options={POD: KindOptions(label_selector="app=web")},
    )
    assert cache.kind_options(POD) == KindOptions(label_selector="app=web", transform=keep)


def test_options_cannot_change_once_the_informer_exists() -> None:
    cache = Cache(RecordingRest(EMPTY_PAGE))
    cache.informer(POD)
    with pytest.raises(RuntimeError, match="after its informer was created"):
        cache.set_kind_options(POD, KindOptions(metadata_only=True))
    with pytest.raises(RuntimeError, match="after its informer was created"):
        cache.set_label_selector(POD, "app=web")
