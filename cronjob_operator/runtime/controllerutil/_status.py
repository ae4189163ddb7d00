"""The status writer: a status subresource written once, conflict-safe, never overwriting others.

``write_status`` writes a status subresource only when it
changed (a no-op reconcile makes zero API writes) and resolves a 409 Conflict by merging
this reconcile's changes onto a fresh read, so a computed status is never dropped and
another writer's is never overwritten; if the object was replaced by a new one of the
same name (another uid), nothing is written.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from cronjob_operator.runtime import errors, objects
from cronjob_operator.runtime.client import Reader
from cronjob_operator.runtime.kinds import Kind

STATUS_WRITE_ATTEMPTS = 5


class StatusClient(Protocol):
    """What ``write_status`` needs: the status write and a live (uncached) reader."""

    @property
    def live(self) -> Reader:
        """Reads that go to the API server, for the fresh object after a Conflict."""
        ...

    def update_status(self, kind: Kind, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Replace the status subresource; a stale ``resourceVersion`` raises Conflict."""
        ...


def merge_status(
    base: dict[str, Any], ours: dict[str, Any], fresh: dict[str, Any]
) -> dict[str, Any]:
    """Apply the changes ``ours`` made to ``base`` onto ``fresh`` (a three-way merge).

    Fields (and conditions, by type) that this reconcile changed take our value; the
    rest keep the server's, so neither our change nor another writer's is lost.
    """
    merged = dict(fresh)
    for key in set(base) | set(ours):
        if key == "conditions":
            merged[key] = _merge_conditions(
                base.get(key) or [], ours.get(key) or [], fresh.get(key) or []
            )
        elif ours.get(key) != base.get(key):
            if key in ours:
                merged[key] = ours[key]
            else:
                merged.pop(key, None)
    return merged


def _merge_conditions(
    base: list[dict[str, Any]], ours: list[dict[str, Any]], fresh: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    def by_type(conditions: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        return {str(c.get("type")): c for c in conditions}

    base_by, ours_by = by_type(base), by_type(ours)
    merged = by_type(fresh)
    for type_ in set(base_by) | set(ours_by):
        if ours_by.get(type_) != base_by.get(type_):
            if type_ in ours_by:
                merged[type_] = ours_by[type_]
            else:
                merged.pop(type_, None)
    return list(merged.values())


def write_status(
    client: StatusClient,
    kind: Kind,
    obj: objects.Obj,
    status: dict[str, Any],
    *,
    attempts: int = STATUS_WRITE_ATTEMPTS,
) -> bool:
    """Write ``status`` to ``obj``'s status subresource if it changed; True if written.

    ``status`` was computed from ``obj.status`` (the base). On a Conflict the object is
    read fresh from the API server and this reconcile's changes are merged onto its
    status (``merge_status``), then written again (up to ``attempts`` writes in all):
    a stale cache after our own previous write, or another writer, never makes us drop
    our status or overwrite theirs. Other errors raise.
    """
    base = objects.thaw(obj.get("status") or {})
    if status == base:
        return False
    metadata = obj["metadata"]
    # Only the status is new: the rest goes out as the cache holds it (frozen dicts and
    # tuples serialize as JSON objects and arrays), not as a deep copy of the object.
    body = {**obj, "status": status}
    for attempt in range(1, attempts + 1):
        try:
            client.update_status(kind, body)
            return True
        except errors.Conflict:
            if attempt == attempts:
                raise
            fresh = client.live.get(kind, metadata["name"], metadata.get("namespace"))
            if (fresh.get("metadata") or {}).get("uid") != metadata.get("uid"):
                return False
            fresh_status = objects.thaw(fresh.get("status") or {})
            merged = merge_status(base, status, fresh_status)
            if merged == fresh_status:
                return False  # the server already has everything we wanted to write
            body = {**fresh, "status": merged}
    return False
