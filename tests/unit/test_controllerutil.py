"""controllerutil, the clock and the metadata predicates: ownership, create-or-update, patches.

The helpers are tested against a minimal recording client (a dict of objects and the
list of writes made), because what matters here is which writes are made; the full
fake client with API semantics lives in its own module.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cronjob_operator.runtime import (
    Kind,
    NotFound,
    Obj,
    create_or_patch,
    create_or_update,
    is_controlled_by,
    set_controller_reference,
    thaw,
)
from cronjob_operator.runtime.client import PatchType
from cronjob_operator.runtime.clock import FakeClock
from cronjob_operator.runtime.controller import and_, annotations_changed, labels_changed, not_, or_
from cronjob_operator.runtime.controllerutil import (
    AlreadyOwnedError,
    OperationResult,
    add_finalizer,
    contains_finalizer,
    merge_patch,
    remove_finalizer,
)
from cronjob_operator.runtime.fake import FakeClientBuilder
from cronjob_operator.runtime.kinds import CONFIG_MAP
from cronjob_operator.runtime.objects import freeze

OWNER = freeze(
    {
        "apiVersion": "example.io/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "namespace": "ns", "uid": "uid-w"},
    }
)


class RecordingClient:
    """Objects by (namespace, name) and every write made, in order."""

    def __init__(self, *existing: dict[str, Any]) -> None:
        self.objects = {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in existing}
        self.writes: list[tuple[str, Any]] = []

    def get(self, kind: Kind, name: str, namespace: str | None = None) -> Obj:
        try:
            return freeze(self.objects[(namespace or "", name)])  # type: ignore[no-any-return]
        except KeyError:
            raise NotFound({"reason": "NotFound"}, code=404) from None

    def create(self, kind: Kind, obj: Any) -> dict[str, Any]:
        self.writes.append(("create", thaw(obj)))
        return thaw(obj)  # type: ignore[no-any-return]

    def update(self, kind: Kind, obj: Any) -> dict[str, Any]:
        self.writes.append(("update", thaw(obj)))
        return thaw(obj)  # type: ignore[no-any-return]

    def patch(
        self,
        kind: Kind,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        patch_type: PatchType = PatchType.MERGE,
        subresource: str = "",
    ) -> dict[str, Any]:
        self.writes.append((f"patch{'/' + subresource if subresource else ''}", patch))
        return {"metadata": {"name": name, "namespace": namespace}}


def config_map(**data: str) -> dict[str, Any]:
    return {"metadata": {"name": "cm", "namespace": "ns"}, "data": dict(data)}


def set_data(**data: str) -> Any:
    def mutate(obj: dict[str, Any]) -> None:
        obj["data"] = dict(data)

    return mutate


class TestControllerReference:
    def test_sets_the_owner_as_controller(self) -> None:
        obj = config_map()
        set_controller_reference(OWNER, obj)
        [ref] = obj["metadata"]["ownerReferences"]
        assert ref == {
            "apiVersion": "example.io/v1",
            "kind": "Widget",
            "name": "w",
            "uid": "uid-w",
            "controller": True,
            "blockOwnerDeletion": True,
        }
        assert is_controlled_by(obj, OWNER)

    def test_setting_it_twice_keeps_one_reference_and_other_owners(self) -> None:
        obj = config_map()
        other = {"apiVersion": "v1", "kind": "Thing", "name": "t", "uid": "u"}
        obj["metadata"]["ownerReferences"] = [other]
        set_controller_reference(OWNER, obj)
        set_controller_reference(OWNER, obj)
        assert [r["name"] for r in obj["metadata"]["ownerReferences"]] == ["t", "w"]

    def test_refuses_to_take_an_object_another_controller_owns(self) -> None:
        obj = config_map()
        obj["metadata"]["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Thing", "name": "t", "uid": "u", "controller": True}
        ]
        with pytest.raises(AlreadyOwnedError, match="already controlled by Thing t"):
            set_controller_reference(OWNER, obj)

    def test_refuses_an_owner_in_another_namespace(self) -> None:
        obj = {"metadata": {"name": "cm", "namespace": "elsewhere"}}
        with pytest.raises(ValueError, match="same namespace"):
            set_controller_reference(OWNER, obj)

    def test_an_owner_without_uid_is_named_in_the_error(self) -> None:
        owner = {"apiVersion": "v1", "kind": "Widget", "metadata": {"name": "w", "namespace": "ns"}}
        with pytest.raises(ValueError, match=r"ns/w: it has no metadata\.uid"):
            set_controller_reference(owner, config_map())

    def test_another_object_of_the_same_name_is_not_the_controller(self) -> None:
        obj = config_map()
        set_controller_reference(OWNER, obj)
        replaced = freeze({**OWNER, "metadata": {**OWNER["metadata"], "uid": "uid-new"}})
        assert not is_controlled_by(obj, replaced)


class TestCreateOrUpdate:
    def test_creates_a_missing_object(self) -> None:
        client = RecordingClient()
        result, obj = create_or_update(client, CONFIG_MAP, config_map(), set_data(a="1"))
        assert result is OperationResult.CREATED
        assert client.writes == [("create", {**config_map(), "data": {"a": "1"}})]
        assert obj["data"] == {"a": "1"}

    def test_updates_only_when_mutate_changes_something(self) -> None:
        client = RecordingClient({**config_map(a="1"), "metadata": {**config_map()["metadata"]}})
        result, _ = create_or_update(client, CONFIG_MAP, config_map(), set_data(a="1"))
        assert result is OperationResult.UNCHANGED
        assert client.writes == []
        result, _ = create_or_update(client, CONFIG_MAP, config_map(), set_data(a="2"))
        assert result is OperationResult.UPDATED
        assert client.writes == [("update", config_map(a="2"))]

    def test_mutate_may_not_rename_the_object(self) -> None:
        client = RecordingClient(config_map())

        def rename(obj: dict[str, Any]) -> None:
            obj["metadata"]["name"] = "other"

        with pytest.raises(ValueError, match="changed the name"):
            create_or_update(client, CONFIG_MAP, config_map(), rename)


class TestCreateOrPatch:
    def test_patches_only_the_changed_fields(self) -> None:
        existing = {**config_map(a="1", b="2"), "spec": {"keep": True}}
        client = RecordingClient(existing)
        result, _ = create_or_patch(client, CONFIG_MAP, config_map(), set_data(a="1", c="3"))
        assert result is OperationResult.UPDATED
        assert client.writes == [("patch", {"data": {"b": None, "c": "3"}})]

    def test_a_status_change_goes_to_the_status_subresource(self) -> None:
        client = RecordingClient({**config_map(a="1"), "status": {"phase": "old"}})

        def mutate(obj: dict[str, Any]) -> None:
            obj["data"] = {"a": "2"}
            obj["status"] = {"phase": "new"}

        create_or_patch(client, CONFIG_MAP, config_map(), mutate)
        assert client.writes == [
            ("patch", {"data": {"a": "2"}}),
            ("patch/status", {"status": {"phase": "new"}}),
        ]

    def test_nothing_changed_is_no_write(self) -> None:
        client = RecordingClient(config_map(a="1"))
        result, _ = create_or_patch(client, CONFIG_MAP, config_map(), set_data(a="1"))
        assert (result, client.writes) == (OperationResult.UNCHANGED, [])


def test_merge_patch_replaces_lists_and_nulls_removed_keys() -> None:
    old = {"a": {"x": 1, "y": 2}, "l": [1, 2], "gone": 1}
    new = {"a": {"x": 1, "y": 3}, "l": [1], "new": None}
    assert merge_patch(old, new) == {"a": {"y": 3}, "l": [1], "gone": None, "new": None}
    assert merge_patch(new, new) == {}


def test_fake_clock_moves_only_when_told() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    clock = FakeClock(start)
    assert clock() == start == clock.now
    clock.advance(timedelta(minutes=5))
    assert clock() == start + timedelta(minutes=5)
    clock.set(start)
    assert clock() == start
    with pytest.raises(ValueError, match="timezone-aware"):
        clock.set(datetime(2026, 1, 1))


def test_fake_clock_sleep_moves_it_at_once_and_is_remembered() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    clock = FakeClock(start)
    clock.sleep(0.25)
    clock.sleep(3)
    assert clock.slept == [0.25, 3]
    assert clock() == start + timedelta(seconds=3.25)
    assert clock.monotonic() == 3.25


def _meta(**metadata: Any) -> Obj:
    return freeze({"metadata": metadata})  # type: ignore[no-any-return]


def test_labels_and_annotations_changed() -> None:
    old = _meta(labels={"a": "1"}, annotations={"n": "1"}, resourceVersion="1")
    relabelled = _meta(labels={"a": "2"}, annotations={"n": "1"}, resourceVersion="2")
    annotated = _meta(labels={"a": "1"}, annotations={"n": "2"}, resourceVersion="2")
    assert labels_changed().update(old, relabelled)
    assert not labels_changed().update(old, annotated)
    assert annotations_changed().update(old, annotated)
    assert not annotations_changed().update(old, relabelled)
    assert not labels_changed().update(_meta(), _meta(labels={}))  # absent == empty
    assert labels_changed().create(old)
    assert labels_changed().delete(old)


def test_predicates_compose() -> None:
    old = _meta(labels={"a": "1"}, annotations={"n": "1"})
    relabelled = _meta(labels={"a": "2"}, annotations={"n": "1"})
    either = or_(labels_changed(), annotations_changed())
    both = and_(labels_changed(), annotations_changed())
    assert either.update(old, relabelled)
    assert not both.update(old, relabelled)
    assert not_(labels_changed()).update(old, old)
    assert not not_(labels_changed()).create(old)


def test_finalizers_are_added_and_removed_once_and_report_a_change() -> None:
    obj: dict[str, Any] = {"metadata": {"name": "a"}}
    assert not contains_finalizer(obj, "example.com/cleanup")
    assert add_finalizer(obj, "example.com/cleanup") is True
    assert add_finalizer(obj, "example.com/cleanup") is False
    assert add_finalizer(obj, "example.com/other") is True
    assert obj["metadata"]["finalizers"] == ["example.com/cleanup", "example.com/other"]
    assert contains_finalizer(obj, "example.com/cleanup")
    assert remove_finalizer(obj, "example.com/cleanup") is True
    assert remove_finalizer(obj, "example.com/cleanup") is False
    assert obj["metadata"]["finalizers"] == ["example.com/other"]
    assert remove_finalizer(obj, "example.com/other") is True
    assert "finalizers" not in obj["metadata"]


def test_a_finalizer_holds_deletion_until_the_controller_removes_it() -> None:
    client = FakeClientBuilder().with_kinds(CONFIG_MAP).build()
    finalizer = "example.com/cleanup"
    configmap = {"metadata": {"name": "held", "namespace": "ns"}, "data": {"k": "v"}}
    result, _ = create_or_patch(
        client, CONFIG_MAP, configmap, lambda obj: add_finalizer(obj, finalizer)
    )
    assert result is OperationResult.CREATED
    client.delete(CONFIG_MAP, "held", namespace="ns")
    held = client.get(CONFIG_MAP, "held", "ns")
    assert held["metadata"]["deletionTimestamp"]
    assert contains_finalizer(held, finalizer)
    result, _ = create_or_patch(
        client, CONFIG_MAP, held, lambda obj: remove_finalizer(obj, finalizer)
    )
    assert result is OperationResult.UPDATED
    with pytest.raises(NotFound):
        client.get(CONFIG_MAP, "held", "ns")
