"""The ConfigDeployment reconciler on the fake client: create, roll, missing sources, no-ops.

The same behaviours run on the real control plane in
tests/integration/test_configdeployment.py; these call ``reconcile`` directly and read
back what the API would hold, so each branch costs milliseconds. The fake client holds
ConfigMaps as the manager's cache does (through the controller's digest transform) and
Secrets as the API server does: the reconciler reads a named one by name and keeps only
its digest (``configdeployment.secrets``).
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

from cronjob_operator.api.apps_v1 import CONFIG_DEPLOYMENT
from cronjob_operator.controllers.configdeployment import (
    CONFIG_MAP_INDEX,
    SECRETS_INDEX,
    ConfigDeploymentReconciler,
    config_map_index,
    config_map_requests,
    decide,
    secret_requests,
    sources,
)
from cronjob_operator.controllers.configdeployment.secrets import NamedSecrets
from cronjob_operator.runtime import errors, objects
from cronjob_operator.runtime.controller import Request, Result
from cronjob_operator.runtime.controllerutil import find_condition
from cronjob_operator.runtime.fake import Action, FakeClient, FakeClientBuilder, FakeRecorder
from cronjob_operator.runtime.kinds import CONFIG_MAP, DEPLOYMENT, SECRET

NS = "ns1"
NAME = "web"


def config_deployment(config_map: str = "settings", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": CONFIG_DEPLOYMENT.api_version,
        "kind": "ConfigDeployment",
        "metadata": {"name": NAME, "namespace": NS},
        "spec": {
            "configMap": config_map,
            "template": {"spec": {"containers": [{"name": "app", "image": "nginx"}]}},
            **spec,
        },
    }


def config_map(name: str = "settings", **data: str) -> dict[str, Any]:
    """A ConfigMap as the cache holds it (digested)."""
    return sources.digest_config_map(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": NS},
            "data": data or {"color": "blue"},
        }
    )


SECRET_VALUE = "s3cr3t-value"


def secret(name: str = "db", uid: str = "db-uid", **values: str) -> dict[str, Any]:
    """A Secret as the API server holds it (the reconciler reads it by name)."""
    data = {
        k: base64.b64encode(v.encode()).decode()
        for k, v in (values or {"pw": SECRET_VALUE}).items()
    }
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": NS, "uid": uid},
        "data": data,
    }


class Harness:
    """A reconciler wired to a fake client and recorder."""

    def __init__(self, *initial: dict[str, Any]) -> None:
        self.client: FakeClient = (
            FakeClientBuilder()
            .with_kinds(CONFIG_DEPLOYMENT)
            .with_index(CONFIG_DEPLOYMENT, CONFIG_MAP_INDEX, config_map_index)
            .with_index(CONFIG_DEPLOYMENT, SECRETS_INDEX, sources.secret_names)
            .with_objects(*initial)
            .build()
        )
        self.recorder = FakeRecorder()
        self.reconciler = ConfigDeploymentReconciler(self.client, self.recorder)

    def reconcile(self) -> Result:
        return self.reconciler.reconcile(Request(NS, NAME))

    def deployment(self) -> objects.Obj:
        return self.client.get(DEPLOYMENT, NAME, NS)

    def rolled_out(self) -> str | None:
        return decide.rolled_out_hash(self.deployment())

    def status(self) -> objects.Obj:
        return self.client.get(CONFIG_DEPLOYMENT, NAME, NS).get("status") or {}

    def condition(self, type_: str) -> dict[str, Any]:
        found = find_condition(objects.thaw(self.status().get("conditions") or []), type_)
        assert found is not None, f"no {type_} condition in {self.status()}"
        return found

    def set_data(self, **data: str) -> None:
        self._replace(CONFIG_MAP, config_map(**data))

    def set_secret(self, **values: str) -> None:
        self._replace(SECRET, secret(**values))

    def _replace(self, kind: Any, body: dict[str, Any]) -> None:
        current = self.client.get(kind, body["metadata"]["name"], NS)
        body["metadata"] = objects.thaw(current["metadata"])
        self.client.update(kind, body)

    def new_reconciler(self) -> None:
        """A fresh reconciler over the same objects: the operator restarted, or a new leader."""
        self.recorder = FakeRecorder()
        self.reconciler = ConfigDeploymentReconciler(self.client, self.recorder)


def test_creates_an_owned_deployment_with_the_config_hash() -> None:
    world = Harness(config_deployment(), config_map())
    assert world.reconcile() == Result()
    deployment = world.deployment()
    owner = objects.controller_ref(deployment)
    assert owner is not None
    assert owner["uid"] == world.client.get(CONFIG_DEPLOYMENT, NAME, NS)["metadata"]["uid"]
    expected = world.client.get(CONFIG_MAP, "settings", NS)[sources.CONTENT_HASH]
    assert world.rolled_out() == expected
    assert world.status()["configMapHash"] == decide.short_hash(expected)
    assert world.recorder.reasons() == ["DeploymentCreated"]
    assert world.condition("Degraded")["status"] == "False"


def test_content_change_rolls_the_deployment() -> None:
    world = Harness(config_deployment(), config_map())
    world.reconcile()
    before = world.rolled_out()
    world.set_data(color="green")
    world.reconcile()
    assert world.rolled_out() != before
    assert world.rolled_out() == world.client.get(CONFIG_MAP, "settings", NS)[sources.CONTENT_HASH]
    assert world.recorder.reasons()[-1] == "RolledOut"
    assert world.deployment()["metadata"]["generation"] == 2


def test_nothing_changed_means_no_writes() -> None:
    world = Harness(config_deployment(), config_map())
    world.reconcile()
    writes = len(world.client.writes)
    world.reconcile()
    assert world.client.writes[writes:] == []


def test_spec_change_updates_the_deployment_without_a_roll_event() -> None:
    world = Harness(config_deployment(), config_map())
    world.reconcile()
    body = objects.thaw(world.client.get(CONFIG_DEPLOYMENT, NAME, NS))
    body["spec"]["replicas"] = 3
    world.client.update(CONFIG_DEPLOYMENT, body)
    world.reconcile()
    assert world.deployment()["spec"]["replicas"] == 3
    assert world.recorder.reasons()[-1] == "DeploymentUpdated"


def test_missing_config_map_is_degraded_and_keeps_the_running_deployment() -> None:
    world = Harness(config_deployment(), config_map())
    world.reconcile()
    before = world.rolled_out()
    world.client.delete(CONFIG_MAP, "settings", namespace=NS)
    world.reconcile()
    assert world.rolled_out() == before
    degraded = world.condition("Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "ConfigMapNotFound")
    assert "keeps running" in degraded["message"]


def test_missing_config_map_before_any_deployment() -> None:
    world = Harness(config_deployment("absent"))
    world.reconcile()
    with pytest.raises(errors.NotFound):
        world.deployment()
    assert world.condition("Available")["reason"] == "ConfigMapNotFound"
    assert world.recorder.events[-1].message.startswith("spec.configMap: ConfigMap 'absent'")


def stranger() -> dict[str, Any]:
    """A Deployment of the ConfigDeployment's name that it does not control."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": NAME, "namespace": NS},
        "spec": {"replicas": 5},
    }


def test_deployment_we_do_not_control_is_never_touched() -> None:
    world = Harness(config_deployment(), config_map(), stranger())
    world.reconcile()
    assert world.deployment()["spec"] == {"replicas": 5}
    assert world.condition("Degraded")["reason"] == "DeploymentNotOwned"
    assert world.client.writes_of("update", DEPLOYMENT) == []


def stale_cache(world: Harness) -> None:
    """The first Deployment read misses, as a cache that has not seen it yet does."""
    misses = [errors.api_error(404, {"reason": "NotFound", "message": "not in the cache"})]

    def miss(action: Action) -> BaseException | None:
        return misses.pop() if misses else None

    world.client.prepend_reactor("get", DEPLOYMENT, miss)


def test_create_that_finds_an_up_to_date_deployment_keeps_it() -> None:
    world = Harness(config_deployment(), config_map())
    world.reconcile()
    world.recorder.clear()
    stale_cache(world)
    world.reconcile()
    assert world.client.writes_of("create", DEPLOYMENT) != []
    assert world.client.writes_of("update", DEPLOYMENT) == []
    assert world.recorder.reasons() == []
    assert world.condition("Degraded")["status"] == "False"
    assert world.condition("Available")["reason"] != "NoDeployment"  # the one found is ours


def test_create_that_finds_a_deployment_we_do_not_control_leaves_it() -> None:
    world = Harness(config_deployment(), config_map(), stranger())
    stale_cache(world)
    world.reconcile()
    assert world.deployment()["spec"] == {"replicas": 5}
    assert world.recorder.reasons() == ["DeploymentNotOwned"]
    assert world.client.writes_of("update", DEPLOYMENT) == []


def test_deployment_the_api_rejects_is_reported() -> None:
    world = Harness(config_deployment(), config_map())

    def reject(action: Action) -> errors.ApiError:
        return errors.api_error(422, {"reason": "Invalid", "message": f"{action.name}: bad"})

    world.client.prepend_reactor("create", DEPLOYMENT, reject)
    world.reconcile()
    assert world.condition("Degraded")["reason"] == "InvalidTemplate"
    assert world.recorder.reasons() == ["FailedCreate"]


def test_config_map_maps_to_the_config_deployments_that_name_it() -> None:
    other = config_deployment("other-settings")
    other["metadata"]["name"] = "api"
    world = Harness(config_deployment(), other, config_map())
    requests = config_map_requests(world.client)(world.client.get(CONFIG_MAP, "settings", NS))
    assert list(requests) == [Request(NS, NAME)]


def test_deleted_config_deployment_is_done() -> None:
    world = Harness(config_map())
    assert world.reconcile() == Result()
    assert world.client.writes == []


# -- spec.secrets and key filters ------------------------------------------------------------


def with_secret(**spec: Any) -> dict[str, Any]:
    return config_deployment(secrets=[{"name": "db"}], **spec)


def all_event_text(world: Harness) -> str:
    return " ".join(f"{e.reason} {e.message}" for e in world.recorder.events)


def test_a_secret_change_rolls_the_deployment_and_no_event_holds_its_value() -> None:
    world = Harness(with_secret(), config_map(), secret())
    world.reconcile()
    before = world.rolled_out()
    world.set_secret(pw="another-value")
    world.reconcile()
    assert world.rolled_out() != before
    assert world.recorder.reasons() == ["DeploymentCreated", "RolledOut"]
    text = all_event_text(world)
    for value in (SECRET_VALUE, "another-value"):
        assert value not in text
        assert base64.b64encode(value.encode()).decode() not in text


def test_a_secret_only_config_deployment_needs_no_config_map() -> None:
    cd = config_deployment(secrets=[{"name": "db"}])
    del cd["spec"]["configMap"]
    world = Harness(cd, secret())
    world.reconcile()
    assert world.rolled_out() is not None
    assert world.condition("Degraded")["status"] == "False"


def test_a_missing_secret_is_degraded_and_names_the_field() -> None:
    world = Harness(config_deployment(secrets=[{"name": "tls"}, {"name": "db"}]), config_map())
    world.reconcile()
    with pytest.raises(errors.NotFound):
        world.deployment()
    degraded = world.condition("Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "SecretNotFound")
    assert degraded["message"].startswith("spec.secrets[0].name: Secret 'tls' not found")
    assert "spec.secrets[1].name: Secret 'db' not found" in degraded["message"]
    assert world.recorder.reasons() == ["SecretNotFound"]


def test_a_config_map_key_filter_rolls_only_for_its_keys() -> None:
    world = Harness(config_deployment(configMapKeys=["color"]), config_map())
    world.reconcile()
    writes = len(world.client.writes)
    world.set_data(color="blue", size="large")
    world.reconcile()
    assert world.client.writes_of("update", DEPLOYMENT) == []
    assert len(world.client.writes) == writes + 1  # the ConfigMap update, nothing else
    world.set_data(color="green", size="large")
    world.reconcile()
    assert world.recorder.reasons()[-1] == "RolledOut"


def test_a_secret_key_filter_rolls_only_for_its_keys() -> None:
    world = Harness(
        config_deployment(secrets=[{"name": "db", "keys": ["pw"]}]),
        config_map(),
        secret(pw="a", user="x"),
    )
    world.reconcile()
    before = world.rolled_out()
    world.set_secret(pw="a", user="y")
    world.reconcile()
    assert world.rolled_out() == before
    world.set_secret(pw="b", user="y")
    world.reconcile()
    assert world.rolled_out() != before


def secret_gets(world: Harness) -> int:
    """Gets of Secrets: a reconcile's cache read of its metadata, and any read of the
    Secret itself (the fake's ``live`` reads are its own, logged the same)."""
    return len(world.client.reads_of("get", SECRET))


def test_a_named_secret_is_read_again_only_when_its_resource_version_changes() -> None:
    world = Harness(with_secret(), config_map(), secret())
    world.reconcile()
    assert secret_gets(world) == 2  # the metadata, then the Secret itself
    world.reconcile()
    assert secret_gets(world) == 3  # the metadata only: its digest is kept
    world.set_secret(pw="another-value")
    gets = secret_gets(world)
    world.reconcile()
    assert secret_gets(world) == gets + 2
    assert world.recorder.reasons()[-1] == "RolledOut"


def test_the_content_hash_is_computed_again_only_when_a_source_or_the_spec_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hashed: list[sources.Sources] = []
    content_hash = sources.content_hash

    def counted(wanted: sources.Sources, *args: Any) -> str:
        hashed.append(wanted)
        return content_hash(wanted, *args)

    monkeypatch.setattr(sources, "content_hash", counted)
    world = Harness(with_secret(), config_map(), secret())
    world.reconcile()
    world.reconcile()
    assert len(hashed) == 1, "a steady ConfigDeployment hashes its sources once"
    world.set_secret(pw="another-value")
    world.reconcile()
    assert len(hashed) == 2
    assert world.recorder.reasons()[-1] == "RolledOut"
    world.set_data(mode="b")
    world.reconcile()
    assert len(hashed) == 3
    assert world.recorder.reasons()[-1] == "RolledOut"
    edited = objects.thaw(world.client.get(CONFIG_DEPLOYMENT, NAME, NS))
    edited["spec"]["secrets"] = [{"name": "db", "keys": ["pw"]}]
    world.client.update(CONFIG_DEPLOYMENT, edited)
    world.reconcile()
    assert len(hashed) == 4, "the spec changed"
    assert hashed[-1].secrets[0].keys == ("pw",)
    world.client.delete(CONFIG_DEPLOYMENT, NAME, namespace=NS)
    world.reconcile()
    assert world.reconciler._hashes == {}, "a deleted ConfigDeployment's hash is dropped"


def test_a_deleted_secret_is_no_longer_kept_and_degrades() -> None:
    world = Harness(with_secret(), config_map(), secret())
    secrets = NamedSecrets(world.client)
    world.reconciler = ConfigDeploymentReconciler(world.client, world.recorder, secrets=secrets)
    world.reconcile()
    assert secrets.kept == 1
    gone = world.client.get(SECRET, "db", NS)
    world.client.delete(SECRET, "db", namespace=NS)
    secrets.on_delete(gone)  # the Secret informer's delete event
    assert secrets.kept == 0
    world.reconcile()
    assert world.condition("Degraded")["reason"] == "SecretNotFound"


def test_a_secret_maps_to_the_config_deployments_that_name_it() -> None:
    other = config_deployment()
    other["metadata"]["name"] = "api"
    world = Harness(with_secret(), other, config_map(), secret())
    requests = secret_requests(world.client)(world.client.get(SECRET, "db", NS))
    assert list(requests) == [Request(NS, NAME)]


def test_a_restart_rolls_nothing_and_writes_nothing() -> None:
    """A new process (restart, new leader) reconciles everything again: nothing changes."""
    world = Harness(with_secret(configMapKeys=["color"]), config_map(), secret())
    world.reconcile()
    world.reconcile()  # the watch event of its own status write
    writes = len(world.client.writes)
    world.new_reconciler()
    world.reconcile()
    assert world.client.writes[writes:] == []
    assert world.recorder.events == []


def test_a_change_while_no_operator_ran_rolls_once() -> None:
    world = Harness(with_secret(), config_map(), secret())
    world.reconcile()
    world.set_secret(pw="rotated")  # while the operator was down
    world.new_reconciler()
    world.reconcile()
    world.reconcile()
    assert world.recorder.reasons() == ["RolledOut"]
    assert world.deployment()["metadata"]["generation"] == 2
