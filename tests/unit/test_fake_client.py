"""The fake client keeps the API server's rules, so reconciles tested on it hold on a cluster."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from cronjob_operator.runtime import errors, objects
from cronjob_operator.runtime.cache import UnindexedFieldError
from cronjob_operator.runtime.client import PatchType, Propagation
from cronjob_operator.runtime.clock import FakeClock
from cronjob_operator.runtime.fake import (
    DEFAULT_START,
    Action,
    FakeClient,
    FakeClientBuilder,
    FakeRecorder,
)
from cronjob_operator.runtime.kinds import CONFIG_MAP, DEPLOYMENT, JOB, POD, REPLICA_SET, Kind

WIDGET = Kind("example.com", "v1", "Widget", "widgets")
NS = "ns1"


def config_map(name: str = "cm", **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": NS},
        "data": data,
    }


def deployment(name: str = "web", replicas: int = 1, **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS, **metadata},
        "spec": {"replicas": replicas},
    }


def owned_by(owner: objects.Obj, kind: Kind, obj: dict[str, Any], controller: bool = True) -> None:
    obj["metadata"].setdefault("ownerReferences", []).append(
        {
            "apiVersion": kind.api_version,
            "kind": kind.kind,
            "name": objects.name_of(owner),
            "uid": owner["metadata"]["uid"],
            "controller": controller,
        }
    )


@pytest.fixture
def client() -> FakeClient:
    return FakeClientBuilder().build()


class TestCreate:
    def test_sets_server_fields_and_drops_status(self, client: FakeClient) -> None:
        created = client.create(DEPLOYMENT, {**deployment(), "status": {"replicas": 3}})
        metadata = created["metadata"]
        assert metadata["uid"]
        assert metadata["resourceVersion"]
        assert metadata["generation"] == 1
        assert metadata["creationTimestamp"] == "2026-01-01T00:00:00Z"
        assert "status" not in created
        assert client.get(DEPLOYMENT, "web", NS) == created

    def test_taken_name_is_already_exists(self, client: FakeClient) -> None:
        client.create(CONFIG_MAP, config_map())
        with pytest.raises(errors.AlreadyExists, match='configmaps "cm" already exists'):
            client.create(CONFIG_MAP, config_map())

    def test_generate_name_gets_a_unique_suffix(self, client: FakeClient) -> None:
        template = {"metadata": {"generateName": "run-", "namespace": NS}}
        first = client.create(CONFIG_MAP, template)
        second = client.create(CONFIG_MAP, template)
        assert first["metadata"]["name"].startswith("run-")
        assert len(first["metadata"]["name"]) == len("run-") + 5
        assert first["metadata"]["name"] != second["metadata"]["name"]

    def test_no_name_is_invalid(self, client: FakeClient) -> None:
        with pytest.raises(errors.Invalid) as raised:
            client.create(CONFIG_MAP, {"metadata": {"namespace": NS}})
        assert raised.value.causes[0]["field"] == "metadata.name"

    def test_namespaced_kind_needs_a_namespace(self, client: FakeClient) -> None:
        with pytest.raises(errors.Invalid, match=r"metadata\.namespace"):
            client.create(CONFIG_MAP, {"metadata": {"name": "cm"}})

    def test_resource_version_is_refused(self, client: FakeClient) -> None:
        body = config_map()
        body["metadata"]["resourceVersion"] = "7"
        with pytest.raises(errors.BadRequest, match="resourceVersion should not be set"):
            client.create(CONFIG_MAP, body)

    def test_creation_timestamp_follows_the_injected_clock(self) -> None:
        clock = FakeClock(DEFAULT_START)
        client = FakeClientBuilder().with_clock(clock).build()
        clock.advance(timedelta(hours=1))
        created = client.create(CONFIG_MAP, config_map())
        assert created["metadata"]["creationTimestamp"] == "2026-01-01T01:00:00Z"


class TestReads:
    def test_missing_object_is_not_found_as_from_the_server(self, client: FakeClient) -> None:
        with pytest.raises(errors.NotFound, match=r'configmaps.core "ns1/nope" not found'):
            client.get(CONFIG_MAP, "nope", NS)

    def test_reads_are_frozen_like_the_cache(self, client: FakeClient) -> None:
        client.create(CONFIG_MAP, config_map())
        with pytest.raises(TypeError, match="read-only"):
            client.get(CONFIG_MAP, "cm", NS)["metadata"]["name"] = "x"  # type: ignore[index]

    def test_live_reads_the_same_store(self, client: FakeClient) -> None:
        client.create(CONFIG_MAP, config_map())
        assert client.live.get(CONFIG_MAP, "cm", NS) == client.get(CONFIG_MAP, "cm", NS)

    def test_list_by_namespace_and_labels(self) -> None:
        client = (
            FakeClientBuilder()
            .with_objects(
                {
                    **config_map("a"),
                    "metadata": {"name": "a", "namespace": NS, "labels": {"t": "x"}},
                },
                {
                    **config_map("b"),
                    "metadata": {"name": "b", "namespace": NS, "labels": {"t": "y"}},
                },
                {**config_map("c"), "metadata": {"name": "c", "namespace": "other"}},
            )
            .build()
        )
        assert {objects.name_of(o) for o in client.list(CONFIG_MAP, namespace=NS)} == {"a", "b"}
        assert len(client.list(CONFIG_MAP)) == 3
        assert [objects.name_of(o) for o in client.list(CONFIG_MAP, label_selector="t=x")] == ["a"]
        assert [objects.name_of(o) for o in client.list(CONFIG_MAP, label_selector={"t": "y"})] == [
            "b"
        ]

    def test_matching_fields_uses_the_index_per_namespace(self) -> None:
        client = (
            FakeClientBuilder()
            .with_index(CONFIG_MAP, ".data.owner", lambda o: [o["data"]["owner"]])
            .with_objects(
                config_map("a", owner="alice"),
                {**config_map("b", owner="alice"), "metadata": {"name": "b", "namespace": "x"}},
                config_map("c", owner="bob"),
            )
            .build()
        )
        in_ns = client.list(CONFIG_MAP, namespace=NS, matching_fields={".data.owner": "alice"})
        assert [objects.name_of(o) for o in in_ns] == ["a"]
        everywhere = client.list(CONFIG_MAP, matching_fields={".data.owner": "alice"})
        assert {objects.name_of(o) for o in everywhere} == {"a", "b"}

    def test_unindexed_field_raises_as_the_cache_does(self, client: FakeClient) -> None:
        with pytest.raises(UnindexedFieldError, match="index_field"):
            client.list(CONFIG_MAP, namespace=NS, matching_fields={".spec.x": "y"})

    def test_unknown_kind_in_with_objects_names_the_fix(self) -> None:
        widget = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
        with pytest.raises(ValueError, match=r"with_kinds"):
            FakeClientBuilder().with_objects(widget)
        client = FakeClientBuilder().with_kinds(WIDGET).with_objects(widget).build()
        assert client.get(WIDGET, "w")["metadata"]["uid"]


class TestUpdate:
    def test_bumps_resource_version_and_generation_on_spec_change(self, client: FakeClient) -> None:
        created = client.create(DEPLOYMENT, deployment())
        created["spec"]["replicas"] = 2
        updated = client.update(DEPLOYMENT, created)
        assert updated["metadata"]["generation"] == 2
        assert updated["metadata"]["resourceVersion"] != created["metadata"]["resourceVersion"]

    def test_metadata_change_keeps_generation(self, client: FakeClient) -> None:
        created = client.create(DEPLOYMENT, deployment())
        created["metadata"]["labels"] = {"a": "b"}
        assert client.update(DEPLOYMENT, created)["metadata"]["generation"] == 1

    def test_stale_resource_version_is_a_conflict(self, client: FakeClient) -> None:
        created = client.create(DEPLOYMENT, deployment())
        client.update(DEPLOYMENT, {**created, "spec": {"replicas": 2}})
        with pytest.raises(errors.Conflict, match="the object has been modified"):
            client.update(DEPLOYMENT, {**created, "spec": {"replicas": 3}})

    def test_without_resource_version_is_unconditional(self, client: FakeClient) -> None:
        client.create(DEPLOYMENT, deployment())
        updated = client.update(DEPLOYMENT, deployment(replicas=5))
        assert updated["spec"]["replicas"] == 5

    def test_no_op_update_keeps_resource_version(self, client: FakeClient) -> None:
        created = client.create(DEPLOYMENT, deployment())
        assert client.update(DEPLOYMENT, created) == created

    def test_missing_object_is_not_found(self, client: FakeClient) -> None:
        with pytest.raises(errors.NotFound):
            client.update(DEPLOYMENT, deployment())

    def test_other_uid_is_a_conflict(self, client: FakeClient) -> None:
        created = client.create(DEPLOYMENT, deployment())
        created["metadata"]["uid"] = "someone-else"
        with pytest.raises(errors.Conflict, match="Precondition failed: UID"):
            client.update(DEPLOYMENT, created)


class TestStatusSubresource:
    def test_update_ignores_status(self, client: FakeClient) -> None:
        created = client.create(DEPLOYMENT, deployment())
        updated = client.update(DEPLOYMENT, {**created, "status": {"replicas": 9}})
        assert "status" not in updated

    def test_update_status_changes_only_status(self, client: FakeClient) -> None:
        created = client.create(DEPLOYMENT, deployment())
        written = client.update_status(
            DEPLOYMENT, {**created, "spec": {"replicas": 7}, "status": {"replicas": 1}}
        )
        assert written["status"] == {"replicas": 1}
        assert written["spec"] == {"replicas": 1}
        assert written["metadata"]["generation"] == 1

    def test_update_status_with_stale_version_is_a_conflict(self, client: FakeClient) -> None:
        created = client.create(DEPLOYMENT, deployment())
        client.update_status(DEPLOYMENT, {**created, "status": {"replicas": 1}})
        with pytest.raises(errors.Conflict):
            client.update_status(DEPLOYMENT, {**created, "status": {"replicas": 2}})

    def test_kind_without_status_subresource(self, client: FakeClient) -> None:
        created = client.create(CONFIG_MAP, config_map())
        with pytest.raises(errors.NotFound, match="configmaps/status"):
            client.update_status(CONFIG_MAP, created)

    def test_patch_status_merges(self, client: FakeClient) -> None:
        client.create(DEPLOYMENT, deployment())
        client.patch_status(
            DEPLOYMENT, "web", {"status": {"replicas": 1, "ready": 1}}, namespace=NS
        )
        patched = client.patch_status(DEPLOYMENT, "web", {"status": {"ready": None}}, namespace=NS)
        assert patched["status"] == {"replicas": 1}


class TestPatch:
    def test_merge_patch(self, client: FakeClient) -> None:
        client.create(CONFIG_MAP, config_map(a="1", b="2"))
        patched = client.patch(CONFIG_MAP, "cm", {"data": {"a": None, "c": "3"}}, namespace=NS)
        assert patched["data"] == {"b": "2", "c": "3"}

    def test_json_patch(self, client: FakeClient) -> None:
        client.create(CONFIG_MAP, config_map(a="1"))
        patched = client.patch(
            CONFIG_MAP,
            "cm",
            [
                {"op": "test", "path": "/data/a", "value": "1"},
                {"op": "add", "path": "/data/b", "value": "2"},
            ],
            namespace=NS,
            patch_type=PatchType.JSON,
        )
        assert patched["data"] == {"a": "1", "b": "2"}

    def test_failing_json_patch_is_a_bad_request(self, client: FakeClient) -> None:
        client.create(CONFIG_MAP, config_map(a="1"))
        with pytest.raises(errors.BadRequest, match="test failed"):
            client.patch(
                CONFIG_MAP,
                "cm",
                [{"op": "test", "path": "/data/a", "value": "2"}],
                namespace=NS,
                patch_type=PatchType.JSON,
            )

    def test_resource_version_in_patch_is_a_precondition(self, client: FakeClient) -> None:
        client.create(CONFIG_MAP, config_map())
        with pytest.raises(errors.Conflict):
            client.patch(
                CONFIG_MAP,
                "cm",
                {"metadata": {"resourceVersion": "stale"}, "data": {}},
                namespace=NS,
            )

    def test_patch_keeps_status(self, client: FakeClient) -> None:
        created = client.create(DEPLOYMENT, deployment())
        client.update_status(DEPLOYMENT, {**created, "status": {"replicas": 1}})
        patched = client.patch(
            DEPLOYMENT, "web", {"status": None, "spec": {"replicas": 3}}, namespace=NS
        )
        assert patched["status"] == {"replicas": 1}
        assert patched["metadata"]["generation"] == 2

    def test_strategic_merge_is_not_faked(self, client: FakeClient) -> None:
        client.create(CONFIG_MAP, config_map())
        with pytest.raises(NotImplementedError, match="MERGE"):
            client.patch(CONFIG_MAP, "cm", {}, namespace=NS, patch_type=PatchType.STRATEGIC)


class TestDelete:
    def test_removes_the_object(self, client: FakeClient) -> None:
        client.create(CONFIG_MAP, config_map())
        client.delete(CONFIG_MAP, "cm", namespace=NS)
        with pytest.raises(errors.NotFound):
            client.get(CONFIG_MAP, "cm", NS)
        with pytest.raises(errors.NotFound):
            client.delete(CONFIG_MAP, "cm", namespace=NS)

    def test_uid_precondition(self, client: FakeClient) -> None:
        client.create(CONFIG_MAP, config_map())
        with pytest.raises(errors.Conflict, match="UID in precondition: stale"):
            client.delete(CONFIG_MAP, "cm", namespace=NS, uid="stale")
        assert client.get(CONFIG_MAP, "cm", NS)

    def test_finalizers_hold_the_object_until_removed(self, client: FakeClient) -> None:
        client.create(
            CONFIG_MAP,
            {**config_map(), "metadata": {"name": "cm", "namespace": NS, "finalizers": ["x/y"]}},
        )
        client.delete(CONFIG_MAP, "cm", namespace=NS)
        held = client.get(CONFIG_MAP, "cm", NS)
        assert held["metadata"]["deletionTimestamp"] == "2026-01-01T00:00:00Z"
        body = objects.thaw(held)
        body["metadata"]["finalizers"].append("new/one")
        with pytest.raises(errors.Invalid, match="no new finalizers"):
            client.update(CONFIG_MAP, body)
        body["metadata"]["finalizers"] = []
        client.update(CONFIG_MAP, body)
        with pytest.raises(errors.NotFound):
            client.get(CONFIG_MAP, "cm", NS)

    def test_background_collects_dependents_recursively(self, client: FakeClient) -> None:
        owner = client.create(DEPLOYMENT, deployment())
        replica_set = {"metadata": {"name": "web-1", "namespace": NS}}
        owned_by(owner, DEPLOYMENT, replica_set)
        replica_set = client.create(REPLICA_SET, replica_set)
        pod = {"metadata": {"name": "web-1-a", "namespace": NS}}
        owned_by(replica_set, REPLICA_SET, pod)
        client.create(POD, pod)
        client.delete(DEPLOYMENT, "web", namespace=NS, propagation=Propagation.BACKGROUND)
        assert client.list(REPLICA_SET) == []
        assert client.list(POD) == []

    def test_dependent_with_another_live_owner_loses_only_the_reference(
        self, client: FakeClient
    ) -> None:
        first = client.create(DEPLOYMENT, deployment("a"))
        second = client.create(DEPLOYMENT, deployment("b"))
        shared = config_map()
        owned_by(first, DEPLOYMENT, shared)
        owned_by(second, DEPLOYMENT, shared, controller=False)
        client.create(CONFIG_MAP, shared)
        client.delete(DEPLOYMENT, "a", namespace=NS)
        refs = client.get(CONFIG_MAP, "cm", NS)["metadata"]["ownerReferences"]
        assert [ref["name"] for ref in refs] == ["b"]

    def test_orphan_keeps_dependents_without_the_reference(self, client: FakeClient) -> None:
        owner = client.create(DEPLOYMENT, deployment())
        dependent = config_map()
        owned_by(owner, DEPLOYMENT, dependent)
        client.create(CONFIG_MAP, dependent)
        client.delete(DEPLOYMENT, "web", namespace=NS, propagation=Propagation.ORPHAN)
        assert "ownerReferences" not in client.get(CONFIG_MAP, "cm", NS)["metadata"]

    def test_jobs_orphan_by_default_as_on_the_real_api(self, client: FakeClient) -> None:
        job = client.create(JOB, {"metadata": {"name": "j", "namespace": NS}, "spec": {}})
        pod = {"metadata": {"name": "j-a", "namespace": NS}}
        owned_by(job, JOB, pod)
        client.create(POD, pod)
        client.delete(JOB, "j", namespace=NS)
        assert client.get(POD, "j-a", NS)
        job = client.create(JOB, {"metadata": {"name": "k", "namespace": NS}, "spec": {}})
        pod = {"metadata": {"name": "k-a", "namespace": NS}}
        owned_by(job, JOB, pod)
        client.create(POD, pod)
        client.delete(JOB, "k", namespace=NS, propagation=Propagation.BACKGROUND)
        with pytest.raises(errors.NotFound):
            client.get(POD, "k-a", NS)


class TestReactorsAndCallLogs:
    def test_reactor_error_is_raised_and_nothing_changes(self, client: FakeClient) -> None:
        def refuse(action: Action) -> Exception | None:
            return errors.api_error(500, {"message": f"boom on {action.name}"})

        client.prepend_reactor("create", CONFIG_MAP, refuse)
        with pytest.raises(errors.ServerError, match="boom on cm"):
            client.create(CONFIG_MAP, config_map())
        assert client.list(CONFIG_MAP) == []
        client.create(DEPLOYMENT, deployment())  # other kinds are not affected

    def test_writes_are_logged(self, client: FakeClient) -> None:
        created = client.create(DEPLOYMENT, deployment())
        client.update_status(DEPLOYMENT, {**created, "status": {"replicas": 1}})
        assert [(a.verb, a.subresource) for a in client.writes] == [
            ("create", ""),
            ("update", "status"),
        ]
        assert len(client.writes_of("update", DEPLOYMENT)) == 1

    def test_refused_writes_are_logged_too(self, client: FakeClient) -> None:
        client.prepend_reactor("*", None, lambda _: errors.api_error(500, {}))
        with pytest.raises(errors.ServerError):
            client.delete(CONFIG_MAP, "cm", namespace=NS)
        assert [(a.verb, a.name) for a in client.writes] == [("delete", "cm")]

    def test_reads_are_logged_apart_from_writes(self, client: FakeClient) -> None:
        client.create(CONFIG_MAP, config_map())
        client.get(CONFIG_MAP, "cm", NS)
        client.live.get(CONFIG_MAP, "cm", NS)
        client.list(CONFIG_MAP, namespace=NS, label_selector={"a": "b"})
        client.update(CONFIG_MAP, config_map(a="1"))  # the server's own read is not logged
        with pytest.raises(errors.NotFound):
            client.get(CONFIG_MAP, "nope", NS)
        assert [(a.verb, a.namespace, a.name) for a in client.reads] == [
            ("get", NS, "cm"),
            ("get", NS, "cm"),
            ("list", NS, ""),
            ("get", NS, "nope"),
        ]
        assert client.reads_of("list", CONFIG_MAP)[0].body == {"label_selector": {"a": "b"}}
        assert client.reads_of("get", DEPLOYMENT) == []
        assert [a.verb for a in client.writes] == ["create", "update"]

    def test_read_reactors_fail_gets_and_lists(self, client: FakeClient) -> None:
        client.create(CONFIG_MAP, config_map("a"))
        client.create(CONFIG_MAP, config_map("b"))

        def refuse_b(action: Action) -> Exception | None:
            return errors.api_error(500, {"message": "read failed"}) if action.name == "b" else None

        client.prepend_reactor("get", CONFIG_MAP, refuse_b)
        assert client.get(CONFIG_MAP, "a", NS)
        with pytest.raises(errors.ServerError, match="read failed"):
            client.live.get(CONFIG_MAP, "b", NS)
        assert len(client.list(CONFIG_MAP, namespace=NS)) == 2
        client.delete(CONFIG_MAP, "b", namespace=NS)  # writes do not consult read reactors
        client.prepend_reactor("list", None, lambda _: errors.api_error(503, {}))
        with pytest.raises(errors.ApiError) as raised:
            client.list(CONFIG_MAP, namespace=NS)
        assert raised.value.code == 503
        assert [(a.verb, a.name) for a in client.reads] == [
            ("get", "a"),
            ("get", "b"),
            ("list", ""),
            ("list", ""),
        ]

    def test_any_verb_reactor_covers_reads(self, client: FakeClient) -> None:
        client.create(CONFIG_MAP, config_map())
        client.prepend_reactor("*", CONFIG_MAP, lambda _: errors.api_error(500, {}))
        with pytest.raises(errors.ServerError):
            client.get(CONFIG_MAP, "cm", NS)
        with pytest.raises(errors.ServerError):
            client.list(CONFIG_MAP)


class TestDoubles:
    def test_recorder_keeps_events(self) -> None:
        recorder = FakeRecorder()
        recorder.event(deployment(), "Warning", "Broken", "it broke")
        assert recorder.reasons() == ["Broken"]
        assert recorder.events[0].name == "web"

    def test_clock_moves_only_when_told(self) -> None:
        clock = FakeClock(DEFAULT_START)
        assert clock() == DEFAULT_START
        clock.advance(1.5)
        assert clock.monotonic() == 1.5
        clock.set(DEFAULT_START)
        assert clock() == DEFAULT_START
