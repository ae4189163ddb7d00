"""Server-side apply: the real API server and the fake client agree on the field rules.

Each scenario runs twice, once through ``client.Writer`` against the local control plane
and once on ``fake.FakeClient``, and asserts the same outcome, so the fake's model
(``runtime/controllerutil/_apply.py``) cannot drift from the server unnoticed. The
model's own corner cases are unit tested in tests/unit/test_server_side_apply.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

import pytest

from cronjob_operator.envtest import ControlPlane
from cronjob_operator.runtime import Conflict, NotFound
from cronjob_operator.runtime.client import (
    Applier,
    LiveReader,
    RestClient,
    Writer,
    load_configuration,
)
from cronjob_operator.runtime.fake import FakeClientBuilder
from cronjob_operator.runtime.kinds import CONFIG_MAP, DEPLOYMENT, Kind


class ApplyClient(Applier, Protocol):
    def get(self, kind: Kind, name: str, namespace: str | None = None) -> Any: ...
    def update(self, kind: Kind, obj: Any) -> dict[str, Any]: ...


class ServerClient(Writer):
    """The real writer with live reads, for one namespace."""

    def __init__(self, rest: RestClient) -> None:
        super().__init__(rest)
        self._reader = LiveReader(rest)

    def get(self, kind: Kind, name: str, namespace: str | None = None) -> Any:
        return self._reader.get(kind, name, namespace)


@pytest.fixture(params=["server", "fake"])
def client(request: pytest.FixtureRequest) -> Iterator[tuple[ApplyClient, str]]:
    if request.param == "fake":
        yield FakeClientBuilder().build(), "ns"
        return
    control_plane: ControlPlane = request.getfixturevalue("control_plane")
    namespace: str = request.getfixturevalue("namespace")
    yield ServerClient(RestClient(load_configuration(str(control_plane.kubeconfig)))), namespace


def config_map(namespace: str, **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "applied", "namespace": namespace},
        "data": data,
    }


def test_apply_creates_then_removes_what_the_manager_stops_applying(
    client: tuple[ApplyClient, str],
) -> None:
    api, ns = client
    created = api.apply(CONFIG_MAP, config_map(ns, a="1", b="2"), field_manager="me")
    assert created["data"] == {"a": "1", "b": "2"}
    applied = api.apply(CONFIG_MAP, config_map(ns, a="1"), field_manager="me")
    assert applied["data"] == {"a": "1"}


def test_a_field_another_manager_applied_too_stays(client: tuple[ApplyClient, str]) -> None:
    api, ns = client
    api.apply(CONFIG_MAP, config_map(ns, a="1", b="2"), field_manager="me")
    api.apply(CONFIG_MAP, config_map(ns, b="2"), field_manager="you")
    assert api.apply(CONFIG_MAP, config_map(ns, a="1"), field_manager="me")["data"] == {
        "a": "1",
        "b": "2",
    }


def test_another_managers_field_conflicts_until_forced(client: tuple[ApplyClient, str]) -> None:
    api, ns = client
    api.apply(CONFIG_MAP, config_map(ns, a="1"), field_manager="you")
    with pytest.raises(Conflict, match="you"):
        api.apply(CONFIG_MAP, config_map(ns, a="2"), field_manager="me")
    assert api.get(CONFIG_MAP, "applied", ns)["data"] == {"a": "1"}
    assert api.apply(CONFIG_MAP, config_map(ns, a="2"), field_manager="me", force=True)["data"] == {
        "a": "2"
    }
    api.apply(CONFIG_MAP, {**config_map(ns), "data": {}}, field_manager="you")
    assert api.get(CONFIG_MAP, "applied", ns)["data"] == {"a": "2"}


def test_an_unchanged_apply_does_not_bump_the_version(client: tuple[ApplyClient, str]) -> None:
    api, ns = client
    first = api.apply(CONFIG_MAP, config_map(ns, a="1"), field_manager="me")
    again = api.apply(CONFIG_MAP, config_map(ns, a="1"), field_manager="me")
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]


def test_a_status_apply_needs_the_object(client: tuple[ApplyClient, str]) -> None:
    api, ns = client
    missing = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "gone", "namespace": ns},
    }
    with pytest.raises(NotFound):
        api.apply_status(DEPLOYMENT, {**missing, "status": {"replicas": 1}}, field_manager="me")
