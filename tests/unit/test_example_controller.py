"""The worked example: it uses only the runtime's public surface, and reconciles on the fake client.

The same controller runs against the local control plane in
tests/integration/test_example_controller.py; if either breaks, the guide
(docs/writing-a-controller.md) is wrong.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path
from typing import Any

import pytest

import cronjob_operator.runtime
from cronjob_operator.runtime import errors, objects
from cronjob_operator.runtime.client import Propagation
from cronjob_operator.runtime.controller import Request, TerminalError
from cronjob_operator.runtime.fake import FakeClient, FakeClientBuilder
from cronjob_operator.runtime.kinds import CONFIG_MAP, DEPLOYMENT
from examples.config_from_annotation import ANNOTATION, ConfigFromAnnotation

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "config_from_annotation.py"
NS = "ns1"


def public_runtime_names() -> set[str]:
    """What ``from cronjob_operator.runtime import X`` may name: the facade, public modules."""
    modules = pkgutil.iter_modules(cronjob_operator.runtime.__path__)
    return set(cronjob_operator.runtime.__all__) | {
        module.name for module in modules if not module.name.startswith("_")
    }


def is_public_runtime_package(module: str) -> bool:
    """A runtime package or module reached without a private (``_``) part."""
    parts = module.split(".")
    return module.startswith("cronjob_operator.runtime.") and not any(
        part.startswith("_") for part in parts
    )


def imports_outside_the_facade(source: str) -> list[str]:
    """Project imports in ``source`` that are neither facade names of
    ``cronjob_operator.runtime`` nor public names of one of its public packages."""
    offenders = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            offenders += [a.name for a in node.names if a.name.startswith("cronjob_operator")]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if module == "cronjob_operator.runtime":
                allowed = public_runtime_names()
                offenders += [f"{module}.{a.name}" for a in node.names if a.name not in allowed]
            elif is_public_runtime_package(module):
                public = set(getattr(importlib.import_module(module), "__all__", ()))
                offenders += [f"{module}.{a.name}" for a in node.names if a.name not in public]
            elif module.startswith("cronjob_operator"):
                offenders.append(module)
    return offenders


def test_example_imports_only_the_runtime_facade() -> None:
    assert imports_outside_the_facade(EXAMPLE.read_text()) == []


@pytest.mark.parametrize(
    "source",
    [
        "from cronjob_operator.runtime.cache._store import Store",
        "from cronjob_operator.runtime.cache import _store",
        "from cronjob_operator.controllers import status",
        "import cronjob_operator.runtime.cache",
        "from cronjob_operator.runtime import no_such_name",
    ],
)
def test_the_import_check_catches_what_it_forbids(source: str) -> None:
    assert imports_outside_the_facade(source) != []


def deployment(annotation: str | None = '{"color": "blue"}') -> dict[str, Any]:
    annotations = {} if annotation is None else {ANNOTATION: annotation}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": NS, "annotations": annotations},
        "spec": {"replicas": 1},
    }


def reconcile(client: FakeClient) -> None:
    ConfigFromAnnotation(client).reconcile(Request(NS, "web"))


def annotate(client: FakeClient, value: str | None) -> None:
    body = objects.thaw(client.get(DEPLOYMENT, "web", NS))
    body["metadata"]["annotations"] = {} if value is None else {ANNOTATION: value}
    client.update(DEPLOYMENT, body)


@pytest.fixture
def client() -> FakeClient:
    return FakeClientBuilder().with_objects(deployment()).build()


def test_creates_the_config_map_controlled_by_the_deployment(client: FakeClient) -> None:
    reconcile(client)
    config_map = client.get(CONFIG_MAP, "web-config", NS)
    assert config_map["data"] == {"color": "blue"}
    owner = objects.controller_ref(config_map)
    assert owner is not None
    assert owner["uid"] == client.get(DEPLOYMENT, "web", NS)["metadata"]["uid"]


def test_follows_the_annotation_and_writes_nothing_when_in_step(client: FakeClient) -> None:
    reconcile(client)
    annotate(client, '{"color": "green"}')
    reconcile(client)
    assert client.get(CONFIG_MAP, "web-config", NS)["data"] == {"color": "green"}
    writes = len(client.writes)
    reconcile(client)
    assert client.writes[writes:] == []


def test_removing_the_annotation_deletes_the_config_map(client: FakeClient) -> None:
    reconcile(client)
    annotate(client, None)
    reconcile(client)
    with pytest.raises(errors.NotFound):
        client.get(CONFIG_MAP, "web-config", NS)


def test_a_deleted_deployment_is_left_to_garbage_collection(client: FakeClient) -> None:
    """The controller's part in the ConfigMap's garbage collection: an owner reference the
    collector follows and waits for, and nothing done once the Deployment is gone (the
    delete orphans here, so only the controller could remove or touch the ConfigMap)."""
    reconcile(client)
    owner = objects.controller_ref(client.get(CONFIG_MAP, "web-config", NS))
    assert owner is not None
    assert (owner["kind"], owner["name"]) == ("Deployment", "web")
    assert owner["blockOwnerDeletion"] is True  # a foreground delete waits for it
    client.delete(DEPLOYMENT, "web", namespace=NS, propagation=Propagation.ORPHAN)
    writes = len(client.writes)
    reconcile(client)
    assert client.writes[writes:] == [], "a gone Deployment: no write"


def test_a_deployment_being_deleted_gets_no_new_config_map(client: FakeClient) -> None:
    """A foreground delete (kubectl delete --cascade=foreground) keeps the Deployment,
    with deletionTimestamp, until the collector deleted the ConfigMap; that delete
    brings a reconcile, which must not create the ConfigMap again."""
    reconcile(client)
    body = objects.thaw(client.get(DEPLOYMENT, "web", NS))
    body["metadata"]["finalizers"] = ["foregroundDeletion"]
    client.update(DEPLOYMENT, body)
    client.delete(DEPLOYMENT, "web", namespace=NS, propagation=Propagation.ORPHAN)
    client.delete(CONFIG_MAP, "web-config", namespace=NS)  # the collector's delete
    writes = len(client.writes)
    reconcile(client)
    assert client.writes[writes:] == []
    assert client.list(CONFIG_MAP) == []


class LaggingCache:
    """The fake client, except that cached reads of the Deployment return it as it was:
    a cache that has seen the ConfigMap's delete but not yet the Deployment's own."""

    def __init__(self, client: FakeClient, deployment: objects.Obj) -> None:
        self._client = client
        self._deployment = deployment
        self.live = client

    def get(self, kind: Any, name: str, namespace: str | None = None) -> objects.Obj:
        if kind == DEPLOYMENT:
            return self._deployment
        return self._client.get(kind, name, namespace)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_a_cache_behind_a_foreground_delete_gets_no_new_config_map(client: FakeClient) -> None:
    """The collector's delete of the ConfigMap can reach the cache before the Deployment's
    deletionTimestamp does (each kind has its own watch); the live read before a create
    sees the delete. Failed before the live read: the ConfigMap was created again."""
    reconcile(client)
    as_cached = client.get(DEPLOYMENT, "web", NS)
    body = objects.thaw(as_cached)
    body["metadata"]["finalizers"] = ["foregroundDeletion"]
    client.update(DEPLOYMENT, body)
    client.delete(DEPLOYMENT, "web", namespace=NS, propagation=Propagation.ORPHAN)
    client.delete(CONFIG_MAP, "web-config", namespace=NS)  # the collector's delete
    writes = len(client.writes)
    lagging = LaggingCache(client, as_cached)
    ConfigFromAnnotation(lagging).reconcile(Request(NS, "web"))  # type: ignore[arg-type]
    assert client.writes[writes:] == []
    assert client.list(CONFIG_MAP) == []


def test_bad_annotation_is_terminal_and_names_the_fix() -> None:
    client = FakeClientBuilder().with_objects(deployment("color=blue")).build()
    with pytest.raises(TerminalError, match=r"metadata\.annotations\['example\.com/config'\]"):
        reconcile(client)


def test_config_map_of_someone_else_is_left_alone(client: FakeClient) -> None:
    client.create(CONFIG_MAP, {"metadata": {"name": "web-config", "namespace": NS}, "data": {}})
    with pytest.raises(TerminalError, match="not ours"):
        reconcile(client)
    assert client.get(CONFIG_MAP, "web-config", NS)["data"] == {}
