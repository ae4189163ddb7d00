"""The three-way status merge after a Conflict (``runtime.controllerutil.merge_status``).

A field or condition this reconcile did not change keeps the server's value, one it
set takes ours, and one it removed is removed, whether or not the server still has it.
The end-to-end case (a Conflict on a real reconcile) is in test_cronjob_reconciler.py.
Also what ``write_status`` sends: the cached object as it is, with only the status new.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from cronjob_operator.runtime import objects
from cronjob_operator.runtime.controllerutil import merge_status, write_status
from cronjob_operator.runtime.kinds import CONFIG_MAP, Kind


def statuses(conditions: list[dict[str, Any]]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in conditions}


def test_a_field_we_left_alone_keeps_the_servers_value() -> None:
    merged = merge_status({"a": 1}, {"a": 1, "b": 2}, {"a": 5})
    assert merged == {"a": 5, "b": 2}


def test_a_field_we_removed_is_removed_from_the_fresh_status() -> None:
    assert merge_status({"a": 1, "b": 2}, {"b": 2}, {"a": 1, "b": 2, "c": 3}) == {"b": 2, "c": 3}


def test_a_field_we_removed_that_the_server_dropped_too_stays_absent() -> None:
    assert merge_status({"a": 1}, {}, {"c": 3}) == {"c": 3}


def test_a_condition_we_added_is_kept_beside_the_servers() -> None:
    merged = merge_status(
        {},
        {"conditions": [{"type": "Ready", "status": "True"}]},
        {"conditions": [{"type": "Custom", "status": "False"}]},
    )
    assert statuses(merged["conditions"]) == {"Custom": "False", "Ready": "True"}


def test_a_condition_we_removed_is_removed_from_the_fresh_status() -> None:
    merged = merge_status(
        {"conditions": [{"type": "Ready", "status": "True"}]},
        {"conditions": []},
        {"conditions": [{"type": "Ready", "status": "True"}, {"type": "Custom", "status": "X"}]},
    )
    assert statuses(merged["conditions"]) == {"Custom": "X"}


def test_a_condition_we_removed_that_the_server_dropped_too_stays_absent() -> None:
    merged = merge_status(
        {"conditions": [{"type": "Ready", "status": "True"}]},
        {"conditions": []},
        {"conditions": [{"type": "Custom", "status": "X"}]},
    )
    assert statuses(merged["conditions"]) == {"Custom": "X"}


class _Recording:
    """A status client that keeps the bodies it was given (and never conflicts)."""

    def __init__(self) -> None:
        self.bodies: list[Mapping[str, Any]] = []

    def update_status(self, kind: Kind, obj: Mapping[str, Any]) -> dict[str, Any]:
        self.bodies.append(obj)
        return dict(obj)

    @property
    def live(self) -> Any:
        raise AssertionError("no conflict, no read")


def test_a_status_write_sends_the_cached_object_as_it_is_with_the_new_status() -> None:
    # Failed before: the whole cached object was deep-copied (thawed) for every write.
    cached = objects.freeze(
        {
            "metadata": {"name": "a", "namespace": "ns", "uid": "u", "resourceVersion": "7"},
            "spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": [{}]}}}}},
            "status": {"active": []},
        }
    )
    client = _Recording()
    assert write_status(client, CONFIG_MAP, cached, {"active": [{"name": "j"}]})
    (body,) = client.bodies
    assert body["spec"] is cached["spec"]
    assert body["metadata"] is cached["metadata"]
    assert body["status"] == {"active": [{"name": "j"}]}
    assert orjson.loads(orjson.dumps(body))["spec"] == objects.thaw(cached["spec"])
