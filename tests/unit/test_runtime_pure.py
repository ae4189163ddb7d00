"""Pure runtime pieces: frozen objects, selectors, predicates, owner mapping, index keys."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

import pytest
import urllib3
from kubernetes import client as k8s_client

from cronjob_operator.runtime import errors, objects
from cronjob_operator.runtime.cache import Cache, UnindexedFieldError, parse_selector
from cronjob_operator.runtime.client import LiveReader, RestClient
from cronjob_operator.runtime.client._rest import METADATA_LIST
from cronjob_operator.runtime.controller import Request
from cronjob_operator.runtime.controller import _handlers as handlers
from cronjob_operator.runtime.controller import _predicates as predicates
from cronjob_operator.runtime.kinds import JOB, POD, Kind
from tests.unit.test_cache_options import RecordingRest

OWNER = Kind("batch.tutorial.kubebuilder.io", "v1", "CronJob", "cronjobs")


def job(name: str, namespace: str, owner: str | None, **extra: Any) -> objects.Obj:
    refs = []
    if owner is not None:
        refs.append(
            {
                "apiVersion": "batch.tutorial.kubebuilder.io/v1",
                "kind": "CronJob",
                "name": owner,
                "uid": "u",
                "controller": True,
            }
        )
    meta = {
        "name": name,
        "namespace": namespace,
        "ownerReferences": refs,
        "labels": {"app": name[:1]},
        **extra,
    }
    return objects.freeze({"apiVersion": "batch/v1", "kind": "Job", "metadata": meta})


def test_frozen_objects_refuse_mutation_and_thaw_copies() -> None:
    obj = objects.freeze({"metadata": {"labels": {"a": "b"}}, "list": [{"x": 1}]})
    with pytest.raises(TypeError):
        obj["metadata"]["labels"]["a"] = "c"
    with pytest.raises(TypeError):
        obj["metadata"].update(name="x")
    with pytest.raises(AttributeError):
        obj["list"].append(1)
    mutable = objects.thaw(obj)
    mutable["metadata"]["labels"]["a"] = "c"
    assert obj["metadata"]["labels"]["a"] == "b"
    assert copy.deepcopy(obj) == mutable | {"metadata": {"labels": {"a": "b"}}}


def test_thaw_keeps_datetimes_on_its_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    # Failed before (a datetime was not a leaf of the recursive path): every datetime
    # in a parsed status went through ``_thaw_iteratively``, which raised here.
    def refused(value: Any) -> Any:
        raise AssertionError(f"the iterative path thawed {value!r}")

    monkeypatch.setattr(objects, "_thaw_iteratively", refused)
    moment = datetime(2026, 12, 6, tzinfo=UTC)
    status = {"active": objects.freeze([{"name": "j"}]), "last": moment, "times": (moment,)}
    thawed = objects.thaw(status)
    assert thawed == {"active": [{"name": "j"}], "last": moment, "times": [moment]}
    assert thawed["last"] is moment


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ("app=web", {"app": "web"}, True),
        ("app==web,tier!=db", {"app": "web", "tier": "db"}, False),
        ("app in (web, api)", {"app": "api"}, True),
        ("app notin (web)", {}, True),
        ("app", {"app": ""}, True),
        ("!app", {"app": "x"}, False),
        ({"app": "web"}, {"app": "web", "x": "y"}, True),
    ],
)
def test_label_selectors(selector: Any, labels: dict[str, str], expected: bool) -> None:
    assert parse_selector(selector)(labels) is expected


def test_label_selector_rejects_garbage() -> None:
    with pytest.raises(ValueError, match="invalid label selector"):
        parse_selector("app in web")


def test_predicates() -> None:
    old = objects.freeze({"metadata": {"resourceVersion": "1", "generation": 1}})
    same_gen = objects.freeze({"metadata": {"resourceVersion": "2", "generation": 1}})
    assert predicates.resource_version_changed().update(old, same_gen)
    assert not predicates.resource_version_changed().update(old, old)
    assert not predicates.generation_changed().update(old, same_gen)
    both = predicates.and_(predicates.resource_version_changed(), predicates.generation_changed())
    assert not both.update(old, same_gen)
    assert predicates.or_(
        predicates.resource_version_changed(), predicates.generation_changed()
    ).update(old, same_gen)
    assert predicates.not_(predicates.generation_changed()).update(old, same_gen)


def test_owner_mapping_ignores_version_and_non_controllers() -> None:
    owned = job("j", "ns", "parent")
    assert list(handlers.for_owner(OWNER)(owned)) == [Request("ns", "parent")]
    other = Kind("batch.tutorial.kubebuilder.io", "v2", "CronJob", "cronjobs")
    assert list(handlers.for_owner(other)(owned)) == [Request("ns", "parent")]
    assert list(handlers.for_owner(JOB)(owned)) == []
    not_controller = objects.freeze(
        {
            "metadata": {
                "namespace": "ns",
                "ownerReferences": [
                    {
                        "apiVersion": "batch.tutorial.kubebuilder.io/v1",
                        "kind": "CronJob",
                        "name": "p",
                    }
                ],
            }
        }
    )
    assert list(handlers.for_owner(OWNER)(not_controller)) == []


def owner_index(obj: objects.Obj) -> list[str]:
    ref = objects.controller_ref(obj)
    return [ref["name"]] if ref else []


@pytest.fixture
def cache() -> Cache:
    cache = Cache(RestClient(k8s_client.Configuration()))
    cache.index_field(JOB, ".metadata.controller", owner_index)
    informer = cache.informer(JOB)
    for obj in [
        job("a1", "ns1", "a"),
        job("a2", "ns1", "a"),
        job("a3", "ns2", "a"),
        job("b1", "ns1", "b"),
        job("orphan", "ns1", None),
    ]:
        informer.store.upsert(obj)
    informer.on_synced()
    return cache


def names(objs: list[objects.Obj]) -> list[str]:
    return sorted(objects.name_of(o) for o in objs)


def test_field_index_uses_controller_runtime_keying(cache: Cache) -> None:
    assert names(
        cache.list(JOB, namespace="ns1", matching_fields={".metadata.controller": "a"})
    ) == ["a1", "a2"]
    assert names(cache.list(JOB, matching_fields={".metadata.controller": "a"})) == [
        "a1",
        "a2",
        "a3",
    ]
    assert (
        names(cache.list(JOB, namespace="ns2", matching_fields={".metadata.controller": "b"})) == []
    )
    store = cache.informer(JOB).store
    assert names(store.by_index("field:.metadata.controller", "__all_namespaces/a")) == [
        "a1",
        "a2",
        "a3",
    ]
    assert names(store.by_index("field:.metadata.controller", "ns2/a")) == ["a3"]


def test_unindexed_field_raises_instead_of_scanning(cache: Cache) -> None:
    with pytest.raises(UnindexedFieldError, match=r"spec\.foo"):
        cache.list(JOB, namespace="ns1", matching_fields={"spec.foo": "x"})


def test_namespace_and_label_reads(cache: Cache) -> None:
    assert names(cache.list(JOB, namespace="ns2")) == ["a3"]
    assert names(cache.list(JOB, namespace="ns1", label_selector="app=b")) == ["b1"]
    assert objects.name_of(cache.get(JOB, "a1", "ns1")) == "a1"


def test_cached_reads_cannot_corrupt_the_cache(cache: Cache) -> None:
    got = cache.get(JOB, "a1", "ns1")
    with pytest.raises(TypeError):
        got["metadata"]["name"] = "evil"
    mine = objects.thaw(got)
    mine["metadata"]["name"] = "mine"
    assert objects.name_of(cache.get(JOB, "a1", "ns1")) == "a1"


@pytest.mark.parametrize(
    "name", ["../../../../api/v1/namespaces/kube-system/secrets/s", "g?watch=true", "g#x", "a/b"]
)
def test_an_object_path_keeps_any_name_one_segment_of_its_collection(name: str) -> None:
    """A name from a spec field (spec.concurrencyGroup.name stored past the webhook) is
    one escaped segment, even after urllib3 resolves the URL as it sends it. Failed
    before: the dot segments climbed to /api/v1/namespaces/kube-system/secrets/s, and
    '?watch=true' became the query."""
    resolved = urllib3.util.parse_url("https://api:6443" + JOB.object_path("team", name, "status"))
    collection, segment, subresource = resolved.path.rsplit("/", 2)
    assert (collection, unquote(segment), subresource) == (
        "/apis/batch/v1/namespaces/team/jobs",
        name,
        "status",
    )
    assert resolved.query is None
    assert resolved.fragment is None


@pytest.mark.parametrize("name", [".", ".."])
def test_an_object_path_refuses_a_dot_segment_before_urllib3_resolves_it(name: str) -> None:
    """Issue 47: quoting leaves "." and "..", which urllib3 resolves: a GET of the group
    named ".." became a GET of the namespace, "." a LIST of every group in it. No object
    can have such a name: the path is refused, naming the kind and the name, unsent."""
    with pytest.raises(errors.InvalidName) as refused:
        JOB.object_path("team", name, "status")
    assert isinstance(refused.value, errors.NotFound), "read as: no such object"
    assert f'jobs.batch "{name}"' in str(refused.value)
    assert "not sent" in str(refused.value)


@pytest.mark.parametrize("namespace", [".", "..", "a/b"])
def test_a_collection_path_refuses_a_namespace_that_is_no_segment(namespace: str) -> None:
    with pytest.raises(errors.InvalidName, match="namespace"):
        JOB.collection_path(namespace)


def test_an_object_path_of_a_valid_name_is_unchanged() -> None:
    assert JOB.object_path("team", "nightly-1772452800.x") == (
        "/apis/batch/v1/namespaces/team/jobs/nightly-1772452800.x"
    )


def test_list_page_asks_for_one_page_and_keeps_at_most_its_limit() -> None:
    """Issue 47: a read that needs a few objects asks for one page of them, however many
    the collection holds, and never follows ``continue``."""
    page = {
        "items": [{"metadata": {"name": f"p{index}"}} for index in range(5)],
        "metadata": {"continue": "more"},
    }
    rest = RecordingRest(page)
    items = LiveReader(rest).list_page(
        POD,
        limit=3,
        namespace="ns",
        label_selector={"job": "u"},
        field_selector="status.phase!=Pending",
        metadata_only=True,
    )
    assert [objects.name_of(item) for item in items] == ["p0", "p1", "p2"]
    assert {item["kind"] for item in items} == {"Pod"}
    assert rest.calls == [
        (
            "list",
            "/api/v1/namespaces/ns/pods",
            {"limit": 3, "labelSelector": "job=u", "fieldSelector": "status.phase!=Pending"},
            METADATA_LIST,
        )
    ]
