"""The three-way status merge after a Conflict (``runtime.controllerutil.merge_status``).

A field or condition this reconcile did not change keeps the server's value, one it
set takes ours, and one it removed is removed, whether or not the server still has it.
The end-to-end case (a Conflict on a real reconcile) is in test_cronjob_reconciler.py.
"""

from __future__ import annotations

from typing import Any

from cronjob_operator.runtime.controllerutil import merge_status


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
