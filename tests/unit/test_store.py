"""The indexed store: indexes follow every write, survive bad index functions, stay consistent."""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Iterable
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from cronjob_operator.runtime import objects
from cronjob_operator.runtime.cache import NAMESPACE_INDEX, IndexFunc, Store

OWNER_INDEX = "owner"


def make(
    name: str,
    namespace: str = "default",
    *,
    owner: str | None = None,
    labels: Iterable[str] = (),
    boom: bool = False,
    rv: int = 1,
) -> objects.Obj:
    metadata: dict[str, Any] = {"name": name, "resourceVersion": str(rv), "labels": list(labels)}
    if namespace:
        metadata["namespace"] = namespace
    if owner:
        metadata["ownerReferences"] = [{"name": owner, "controller": True}]
    if boom:
        metadata["annotations"] = {"boom": "yes"}
    return objects.freeze({"apiVersion": "v1", "kind": "Thing", "metadata": metadata})  # type: ignore[no-any-return]


def by_owner(obj: objects.Obj) -> list[str]:
    """controller-runtime's field index convention: "<ns>/v" and "__all_namespaces/v"."""
    ref = objects.controller_ref(obj)
    if ref is None:
        return []
    return [f"{objects.namespace_of(obj)}/{ref['name']}", f"__all_namespaces/{ref['name']}"]


def by_label(obj: objects.Obj) -> list[str]:
    return list(obj["metadata"]["labels"])


def explosive(obj: objects.Obj) -> list[str]:
    if (obj["metadata"].get("annotations") or {}).get("boom"):
        raise RuntimeError("boom")
    return [objects.name_of(obj)]


def names(objs: Iterable[objects.Obj]) -> list[str]:
    return sorted(objects.object_key(obj) for obj in objs)


class TestReadsAndWrites:
    def test_upsert_returns_the_previous_object(self) -> None:
        store = Store()
        first, second = make("a", rv=1), make("a", rv=2)
        assert store.upsert(first) is None
        assert store.upsert(second) is first
        assert store.get("default/a") is second
        assert len(store) == 1

    def test_reads_hand_out_the_stored_objects(self) -> None:
        store = Store()
        obj = make("a")
        store.upsert(obj)
        assert store.get("default/a") is obj
        assert store.list()[0] is obj
        assert store.by_index(NAMESPACE_INDEX, "default")[0] is obj

    def test_keys_and_cluster_scoped_objects(self) -> None:
        store = Store()
        store.upsert(make("a"))
        store.upsert(make("node-1", namespace=""))
        assert sorted(store.keys()) == ["default/a", "node-1"]
        assert names(store.by_index(NAMESPACE_INDEX, "")) == ["node-1"]
        assert names(store.by_index(NAMESPACE_INDEX, "default")) == ["default/a"]

    def test_delete_returns_the_object_and_unindexes_it(self) -> None:
        store = Store({OWNER_INDEX: by_owner})
        obj = make("a", owner="o")
        store.upsert(obj)
        assert store.delete("default/a") is obj
        assert store.delete("default/a") is None
        assert store.get("default/a") is None
        assert store.by_index(OWNER_INDEX, "default/o") == []
        assert store.by_index(NAMESPACE_INDEX, "default") == []
        assert len(store) == 0

    def test_get_of_a_missing_key_is_none(self) -> None:
        assert Store().get("nope") is None


class TestIndexes:
    def test_update_moves_the_key_between_values(self) -> None:
        store = Store({OWNER_INDEX: by_owner})
        store.upsert(make("a", owner="o1"))
        store.upsert(make("b", owner="o1"))
        store.upsert(make("a", owner="o2", rv=2))
        assert names(store.by_index(OWNER_INDEX, "default/o1")) == ["default/b"]
        assert names(store.by_index(OWNER_INDEX, "default/o2")) == ["default/a"]
        assert names(store.by_index(OWNER_INDEX, "__all_namespaces/o1")) == ["default/b"]
        assert store.index_values(OWNER_INDEX, "default/a") == (
            "default/o2",
            "__all_namespaces/o2",
        )

    def test_update_to_no_value_removes_the_key(self) -> None:
        store = Store({OWNER_INDEX: by_owner})
        store.upsert(make("a", owner="o1"))
        store.upsert(make("a", rv=2))
        assert store.by_index(OWNER_INDEX, "default/o1") == []
        assert store.index_values(OWNER_INDEX, "default/a") == ()

    def test_all_namespaces_value_spans_namespaces(self) -> None:
        store = Store({OWNER_INDEX: by_owner})
        store.upsert(make("a", "ns1", owner="o"))
        store.upsert(make("a", "ns2", owner="o"))
        assert names(store.by_index(OWNER_INDEX, "__all_namespaces/o")) == ["ns1/a", "ns2/a"]
        assert names(store.by_index(OWNER_INDEX, "ns1/o")) == ["ns1/a"]

    def test_multiple_and_repeated_values(self) -> None:
        store = Store({"label": by_label})
        store.upsert(make("a", labels=["x", "y", "x"]))
        assert store.index_values("label", "default/a") == ("x", "y")
        store.upsert(make("a", labels=["y", "z"], rv=2))
        assert store.by_index("label", "x") == []
        assert names(store.by_index("label", "y")) == ["default/a"]
        assert names(store.by_index("label", "z")) == ["default/a"]
        store.delete("default/a")
        assert store.by_index("label", "y") == []

    def test_unknown_index_is_a_key_error_naming_it(self) -> None:
        store = Store()
        with pytest.raises(KeyError, match="no index named 'owner'"):
            store.by_index(OWNER_INDEX, "x")
        with pytest.raises(KeyError, match="no index named 'owner'"):
            store.index_values(OWNER_INDEX, "x")

    def test_namespace_index_always_exists(self) -> None:
        store = Store({OWNER_INDEX: by_owner})
        assert store.has_index(NAMESPACE_INDEX)
        assert store.has_index(OWNER_INDEX)
        assert not store.has_index("other")

    def test_add_indexer_indexes_existing_objects(self) -> None:
        store = Store()
        store.upsert(make("a", owner="o"))
        store.add_indexer(OWNER_INDEX, by_owner)
        assert names(store.by_index(OWNER_INDEX, "default/o")) == ["default/a"]
        store.upsert(make("b", owner="o"))
        assert names(store.by_index(OWNER_INDEX, "default/o")) == ["default/a", "default/b"]

    @pytest.mark.parametrize("name", [NAMESPACE_INDEX, OWNER_INDEX])
    def test_duplicate_index_name_is_refused(self, name: str) -> None:
        store = Store({OWNER_INDEX: by_owner})
        with pytest.raises(ValueError, match=f"already has an index named '{name}'"):
            store.add_indexer(name, by_owner)


class TestBadIndexFunctions:
    def test_raising_function_files_the_object_under_nothing(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        store = Store({"name": explosive, OWNER_INDEX: by_owner})
        with caplog.at_level(logging.ERROR, logger="cronjob_operator.runtime.cache._store"):
            store.upsert(make("a", owner="o", boom=True))
        assert len(caplog.records) == 1
        assert "'name'" in caplog.records[0].getMessage()
        assert "default/a" in caplog.records[0].getMessage()
        assert store.get("default/a") is not None
        assert store.index_values("name", "default/a") == ()
        assert names(store.by_index(OWNER_INDEX, "default/o")) == ["default/a"]

    def test_object_moves_in_and_out_of_a_failing_index(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        store = Store({"name": explosive})
        store.upsert(make("a"))
        assert names(store.by_index("name", "a")) == ["default/a"]
        with caplog.at_level(logging.ERROR, logger="cronjob_operator.runtime.cache._store"):
            store.upsert(make("a", boom=True, rv=2))
            store.delete("default/a")
        assert len(caplog.records) == 1  # deleting does not call the function again
        assert store.by_index("name", "a") == []
        store.upsert(make("a", rv=3))
        assert names(store.by_index("name", "a")) == ["default/a"]

    @pytest.mark.parametrize(
        "fn",
        [lambda obj: "a-string", lambda obj: [1], lambda obj: None],
        ids=["string", "not-strings", "none"],
    )
    def test_wrong_return_types_are_logged_and_ignored(
        self, fn: IndexFunc, caplog: pytest.LogCaptureFixture
    ) -> None:
        store = Store({"bad": fn})
        with caplog.at_level(logging.ERROR, logger="cronjob_operator.runtime.cache._store"):
            store.upsert(make("a"))
        assert len(caplog.records) == 1
        assert store.index_values("bad", "default/a") == ()
        assert store.by_index("bad", "a-string") == []
        assert store.by_index("bad", "a") == []

    def test_raising_function_in_a_relist(self, caplog: pytest.LogCaptureFixture) -> None:
        store = Store({"name": explosive})
        with caplog.at_level(logging.ERROR, logger="cronjob_operator.runtime.cache._store"):
            store.replace([make("a"), make("b", boom=True)])
        assert len(caplog.records) == 1
        assert names(store.by_index("name", "a")) == ["default/a"]
        assert store.by_index("name", "b") == []
        assert len(store) == 2


class TestReplace:
    def test_returns_vanished_objects_and_rebuilds_indexes(self) -> None:
        store = Store({OWNER_INDEX: by_owner})
        gone = make("gone", owner="o1")
        store.upsert(gone)
        store.upsert(make("kept", owner="o1"))
        vanished = store.replace([make("kept", owner="o2", rv=2), make("new", "other")])
        assert vanished == [gone]
        assert sorted(store.keys()) == ["default/kept", "other/new"]
        assert store.by_index(OWNER_INDEX, "default/o1") == []
        assert names(store.by_index(OWNER_INDEX, "default/o2")) == ["default/kept"]
        assert names(store.by_index(NAMESPACE_INDEX, "other")) == ["other/new"]
        assert names(store.by_index(NAMESPACE_INDEX, "default")) == ["default/kept"]

    def test_replace_with_nothing_empties_the_store(self) -> None:
        store = Store()
        store.upsert(make("a"))
        assert names(store.replace([])) == ["default/a"]
        assert len(store) == 0
        assert store.by_index(NAMESPACE_INDEX, "default") == []

    def test_later_duplicate_wins(self) -> None:
        store = Store()
        second = make("a", rv=2)
        store.replace(iter([make("a", rv=1), second]))
        assert store.list() == [second]


def _expected(model: dict[str, objects.Obj], fn: IndexFunc, value: str) -> list[str]:
    found = []
    for key, obj in model.items():
        try:
            values = list(fn(obj))
        except Exception:
            continue
        if value in values:
            found.append(key)
    return sorted(found)


_INDEXERS: dict[str, IndexFunc] = {
    NAMESPACE_INDEX: lambda obj: [objects.namespace_of(obj)],
    OWNER_INDEX: by_owner,
    "label": by_label,
    "name": explosive,
}
_NAMESPACES = ["", "a", "b"]
_NAMES = ["x", "y", "z"]
_OWNERS = ["o1", "o2"]
_LABELS = ["l1", "l2", "l3"]
_VALUES = sorted(
    {*_NAMESPACES, *_NAMES, *_LABELS}
    | {f"{prefix}/{owner}" for prefix in [*_NAMESPACES, "__all_namespaces"] for owner in _OWNERS}
)

_objects = st.builds(
    make,
    name=st.sampled_from(_NAMES),
    namespace=st.sampled_from(_NAMESPACES),
    owner=st.none() | st.sampled_from(_OWNERS),
    labels=st.lists(st.sampled_from(_LABELS), max_size=3),
    boom=st.booleans(),
    rv=st.integers(1, 5),
)


class StoreMatchesBruteForce(RuleBasedStateMachine):
    """After every write, every index answers exactly what a scan of all objects would."""

    def __init__(self) -> None:
        super().__init__()
        self.store = Store({OWNER_INDEX: by_owner, "label": by_label})
        self.model: dict[str, objects.Obj] = {}

    @rule(obj=_objects)
    def upsert(self, obj: objects.Obj) -> None:
        key = objects.object_key(obj)
        assert self.store.upsert(obj) is self.model.get(key)
        self.model[key] = obj

    @rule(name=st.sampled_from(_NAMES), namespace=st.sampled_from(_NAMESPACES))
    def delete(self, name: str, namespace: str) -> None:
        key = f"{namespace}/{name}" if namespace else name
        assert self.store.delete(key) is self.model.pop(key, None)

    @rule(objs=st.lists(_objects, max_size=8))
    def replace(self, objs: list[objects.Obj]) -> None:
        new = {objects.object_key(obj): obj for obj in objs}
        expected_gone = [obj for key, obj in self.model.items() if key not in new]
        assert names(self.store.replace(objs)) == names(expected_gone)
        self.model = new

    @rule()
    def add_name_index(self) -> None:
        if not self.store.has_index("name"):
            self.store.add_indexer("name", explosive)

    @invariant()
    def indexes_match_a_scan(self) -> None:
        assert sorted(self.store.keys()) == sorted(self.model)
        assert len(self.store) == len(self.model)
        for index, fn in _INDEXERS.items():
            if not self.store.has_index(index):
                continue
            for value in _VALUES:
                assert names(self.store.by_index(index, value)) == _expected(self.model, fn, value)


StoreMatchesBruteForce.TestCase.settings = settings(
    max_examples=100, stateful_step_count=20, deadline=None
)
TestStoreMatchesBruteForce = StoreMatchesBruteForce.TestCase


def test_concurrent_writers_and_readers_leave_consistent_indexes() -> None:
    store = Store({OWNER_INDEX: by_owner})
    failures: list[BaseException] = []
    stop = threading.Event()

    def write(seed: int) -> None:
        rng = random.Random(seed)
        try:
            for rv in range(2000):
                name, namespace = rng.choice(_NAMES), rng.choice(_NAMESPACES)
                step = rng.random()
                if step < 0.6:
                    store.upsert(make(name, namespace, owner=rng.choice(_OWNERS), rv=rv))
                elif step < 0.95:
                    store.delete(f"{namespace}/{name}" if namespace else name)
                else:
                    store.replace(
                        make(rng.choice(_NAMES), ns, owner="o1", rv=rv) for ns in _NAMESPACES
                    )
        except BaseException as error:  # reported below
            failures.append(error)

    def read() -> None:
        try:
            while not stop.is_set():
                for owner in _OWNERS:
                    for obj in store.by_index(OWNER_INDEX, f"__all_namespaces/{owner}"):
                        assert objects.controller_ref(obj) is not None
                store.list()
                store.keys()
        except BaseException as error:  # reported below
            failures.append(error)

    writers = [threading.Thread(target=write, args=(seed,)) for seed in range(4)]
    readers = [threading.Thread(target=read) for _ in range(2)]
    for thread in writers + readers:
        thread.start()
    for thread in writers:
        thread.join()
    stop.set()
    for thread in readers:
        thread.join()

    assert failures == []
    model = {objects.object_key(obj): obj for obj in store.list()}
    for value in _VALUES:
        assert names(store.by_index(OWNER_INDEX, value)) == _expected(model, by_owner, value)
        got = names(store.by_index(NAMESPACE_INDEX, value))
        assert got == _expected(model, _INDEXERS[NAMESPACE_INDEX], value)
