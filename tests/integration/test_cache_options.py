"""Per-kind cache options against a real API server: selectors, namespaces, metadata only.

The unit tests (tests/unit/test_cache_options.py) check what goes on the list and the
watch; these check that the API server does what those parameters ask: it filters by
label and field, a cache of two namespaces sees both and no third, and a metadata-only
informer receives ``PartialObjectMetadata`` (no ``data``) on the list and on the watch,
as does the uncached ``LiveReader.list_metadata``, page after page.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import pytest

from cronjob_operator.envtest import ControlPlane, wait_for
from cronjob_operator.runtime import errors, objects
from cronjob_operator.runtime.cache import Cache, KindOptions
from cronjob_operator.runtime.client import LiveReader, RestClient, load_configuration
from cronjob_operator.runtime.kinds import CONFIG_MAP


@pytest.fixture
def rest(control_plane: ControlPlane) -> RestClient:
    return RestClient(load_configuration(str(control_plane.kubeconfig)))


@pytest.fixture
def other_namespace(control_plane: ControlPlane) -> Iterator[str]:
    name = f"test-{secrets.token_hex(4)}"
    control_plane.kubectl("create", "namespace", name, check=True)
    yield name
    control_plane.kubectl("delete", "namespace", name, "--wait=false")


def create(rest: RestClient, name: str, namespace: str, **labels: str) -> None:
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "data": {"payload": "x" * 64},
    }
    rest.request("POST", CONFIG_MAP.collection_path(namespace), body=body)


def names(cache: Cache, namespace: str | None = None) -> set[str]:
    return {objects.name_of(obj) for obj in cache.list(CONFIG_MAP, namespace=namespace)}


def started(rest: RestClient, options: KindOptions, namespace: str | None = None) -> Cache:
    cache = Cache(rest, namespace=namespace, kind_options={CONFIG_MAP: options})
    cache.informer(CONFIG_MAP)
    cache.start()
    cache.wait_for_sync(30)
    return cache


def test_label_and_field_selectors_are_applied_by_the_server(
    rest: RestClient, namespace: str
) -> None:
    create(rest, "web", namespace, app="web")
    create(rest, "skipped", namespace, app="web")
    create(rest, "db", namespace, app="db")
    options = KindOptions(label_selector="app=web", field_selector="metadata.name!=skipped")
    cache = started(rest, options, namespace)
    try:
        assert names(cache) == {"web"}
        create(rest, "web-2", namespace, app="web")
        create(rest, "db-2", namespace, app="db")
        wait_for(lambda: names(cache) == {"web", "web-2"}, 20, message="the watch filtered too")
    finally:
        cache.stop()


def test_a_cache_of_two_namespaces_sees_both_and_no_third(
    rest: RestClient, namespace: str, other_namespace: str, control_plane: ControlPlane
) -> None:
    third = f"test-{secrets.token_hex(4)}"
    control_plane.kubectl("create", "namespace", third, check=True)
    try:
        create(rest, "first", namespace)
        create(rest, "second", other_namespace)
        create(rest, "third", third)
        cache = started(rest, KindOptions(namespaces=(namespace, other_namespace)))
        try:
            assert names(cache) == {"first", "second"}, "both namespaces, not the third"
            assert names(cache, other_namespace) == {"second"}
            create(rest, "later", other_namespace)
            wait_for(lambda: "later" in names(cache, other_namespace), 20, message="watched")
            assert names(cache, namespace) == {"first"}, "the other namespace's watch kept it"
            with pytest.raises(errors.NotFound):
                cache.get(CONFIG_MAP, "third", third)
        finally:
            cache.stop()
    finally:
        control_plane.kubectl("delete", "namespace", third, "--wait=false")


def test_a_metadata_only_cache_holds_metadata_from_the_list_and_the_watch(
    rest: RestClient, namespace: str
) -> None:
    create(rest, "listed", namespace, app="web")
    cache = started(rest, KindOptions(metadata_only=True), namespace)
    try:
        listed = cache.get(CONFIG_MAP, "listed", namespace)
        assert (listed["apiVersion"], listed["kind"]) == ("v1", "ConfigMap")
        assert "data" not in listed
        assert listed["metadata"]["labels"] == {"app": "web"}
        assert "managedFields" not in listed["metadata"]
        create(rest, "watched", namespace)
        wait_for(lambda: "watched" in names(cache), 20, message="the watch delivered it")
        watched = cache.get(CONFIG_MAP, "watched", namespace)
        assert set(watched) == {"apiVersion", "kind", "metadata"}
        assert watched["metadata"]["uid"], "the metadata is whole"
    finally:
        cache.stop()


def test_a_live_list_of_metadata_has_no_data_and_reads_every_page(
    rest: RestClient, namespace: str
) -> None:
    for number in range(503):  # more than one page of 500
        create(rest, f"item-{number}", namespace, app="web" if number % 2 else "db")
    create(rest, "unlabelled", namespace)
    listed = LiveReader(rest).list_metadata(CONFIG_MAP, namespace=namespace, label_selector="app")
    assert len(listed) == 503
    assert {frozenset(item) for item in listed} == {frozenset({"apiVersion", "kind", "metadata"})}
    assert {(item["apiVersion"], item["kind"]) for item in listed} == {("v1", "ConfigMap")}
    web = LiveReader(rest).list_metadata(
        CONFIG_MAP, namespace=namespace, label_selector={"app": "web"}
    )
    assert len(web) == 251
    assert all(item["metadata"]["labels"] == {"app": "web"} for item in web)
