"""metav1.Condition handling shared by the reconcilers: set a condition the standard way.

``set_condition`` follows apimachinery's ``meta.SetStatusCondition``: conditions are keyed
by type; ``lastTransitionTime`` changes only when ``status`` changes, so a reconcile that
finds nothing new writes an identical list (and the status write is skipped). A
message is clipped as an Event's is (``objects.clipped_message``): one that repeats what a
tenant wrote can never outgrow the schema and make every status write fail.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from cronjob_operator.runtime import objects


def rfc3339(moment: datetime) -> str:
    """A Kubernetes timestamp: UTC, second precision, trailing Z (``moment`` must be aware)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: str | None) -> datetime | None:
    """Parse a Kubernetes timestamp (RFC 3339, "Z" or an offset) to an aware datetime."""
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)


def find_condition(conditions: list[dict[str, Any]], type_: str) -> dict[str, Any] | None:
    """The condition of ``type_``, if present."""
    return next((c for c in conditions if c.get("type") == type_), None)


def set_condition(
    conditions: list[dict[str, Any]],
    *,
    type_: str,
    status: bool,
    reason: str,
    message: str,
    observed_generation: int,
    now: datetime,
) -> None:
    """Insert or update the condition of ``type_`` in place (``message`` clipped)."""
    value = "True" if status else "False"
    message = objects.clipped_message(message)
    existing = find_condition(conditions, type_)
    if existing is None:
        conditions.append(
            {
                "type": type_,
                "status": value,
                "reason": reason,
                "message": message,
                "observedGeneration": observed_generation,
                "lastTransitionTime": rfc3339(now),
            }
        )
        return
    if existing.get("status") != value:
        existing["lastTransitionTime"] = rfc3339(now)
    existing.update(
        status=value, reason=reason, message=message, observedGeneration=observed_generation
    )


ConditionSetter = Callable[[str, bool, str, str], None]
"""Sets one condition: (type, status, reason, message)."""


def condition_setter(status: dict[str, Any], *, generation: int, now: datetime) -> ConditionSetter:
    """A function that sets conditions in ``status["conditions"]`` for this generation."""
    conditions: list[dict[str, Any]] = status.setdefault("conditions", [])

    def condition(type_: str, ok: bool, reason: str, message: str) -> None:
        set_condition(
            conditions,
            type_=type_,
            status=ok,
            reason=reason,
            message=message,
            observed_generation=generation,
            now=now,
        )

    return condition
