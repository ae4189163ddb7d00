"""Server-side apply on the fake client: the model's own corner cases.

The rules a reconciler relies on run against both the real API server and the fake in
tests/integration/test_server_side_apply.py; these are the parts only the model has
(its field paths, update-written fields, the status subresource, conflict listings).
"""

from __future__ import annotations

from typing import Any

import pytest

from cronjob_operator.runtime import NotFound
from cronjob_operator.runtime.controllerutil import ApplyConflict, apply_configuration, leaf_paths
from cronjob_operator.runtime.fake import FakeClientBuilder
from cronjob_operator.runtime.kinds import CONFIG_MAP, DEPLOYMENT


def config_map(**data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cm", "namespace": "ns"},
        "data": data,
    }


def test_leaf_paths_walk_maps_and_treat_lists_as_one_field() -> None:
    config = {
        "apiVersion": "v1",
        "kind": "X",
        "metadata": {"name": "a", "labels": {"app": "a"}},
        "spec": {"args": ["x", "y"], "empty": {}},
    }
    assert leaf_paths(config) == {
        ("metadata", "labels", "app"),
        ("spec", "args"),
        ("spec", "empty"),
    }


def test_fields_written_by_an_update_are_left_alone() -> None:
    client = FakeClientBuilder().build()
    client.apply(CONFIG_MAP, config_map(a="1"), field_manager="me")
    current = dict(client.get(CONFIG_MAP, "cm", "ns"))
    client.update(CONFIG_MAP, {**current, "data": {"a": "1", "other": "x"}})
    applied = client.apply(CONFIG_MAP, config_map(a="1"), field_manager="me")
    assert applied["data"] == {"a": "1", "other": "x"}


def test_status_is_applied_through_the_subresource_only() -> None:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "ns"},
        "spec": {"replicas": 1},
        "status": {"replicas": 5},
    }
    client = FakeClientBuilder().build()
    created = client.apply(DEPLOYMENT, deployment, field_manager="me")
    assert "status" not in created
    with_status = client.apply_status(
        DEPLOYMENT, {**deployment, "status": {"readyReplicas": 1}}, field_manager="me"
    )
    assert with_status["status"] == {"readyReplicas": 1}
    assert with_status["spec"] == {"replicas": 1}
    # applying the object again leaves the status this manager applied through the subresource
    again = client.apply(DEPLOYMENT, deployment, field_manager="me")
    assert again["status"] == {"readyReplicas": 1}
    with pytest.raises(NotFound):
        client.apply_status(
            DEPLOYMENT,
            {**deployment, "metadata": {"name": "gone", "namespace": "ns"}},
            field_manager="me",
        )


def test_the_model_empties_no_map_it_did_not_empty() -> None:
    current = {"metadata": {"name": "a", "labels": {"x": "1", "y": "2"}}}
    owners = {"me": frozenset({("metadata", "labels", "x")})}
    result, new_owners = apply_configuration(
        current, {"metadata": {"name": "a"}}, manager="me", owners=owners
    )
    assert result["metadata"]["labels"] == {"y": "2"}
    assert "me" not in new_owners
    only = {"metadata": {"name": "a", "labels": {"x": "1"}}}
    emptied, _ = apply_configuration(only, {"metadata": {"name": "a"}}, manager="me", owners=owners)
    assert "labels" not in emptied["metadata"]


def test_a_conflict_names_every_field_and_manager() -> None:
    owners = {"a": frozenset({("data", "x")}), "b": frozenset({("data", "y")})}
    with pytest.raises(ApplyConflict) as raised:
        apply_configuration(
            {"data": {"x": "1", "y": "1"}},
            {"data": {"x": "2", "y": "2"}},
            manager="me",
            owners=owners,
        )
    assert raised.value.conflicts == (("a", ("data", "x")), ("b", ("data", "y")))
