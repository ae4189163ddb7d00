"""The status writer: a status subresource written once, conflict-safe, never overwriting others.

``write_status`` writes a status subresource only when it
changed (a no-op reconcile makes zero API writes) and resolves a 409 Conflict by merging
this reconcile's changes onto a fresh read, so a computed status is never dropped and
another writer's is never overwritten; if the object was replaced by a new one of the
same name (another uid), nothing is written.

``StatusEchoes`` lets a controller skip the watch echo of its own status write: the
update from the object a reconcile decided from to that object with the status it
wrote. Reconciling the echo decides again from what the writing reconcile already
decided from, with the written status stored; when that decision is the same (the
controller checks it: a decision that reads the stored status, say to delete only what
a written status records, may differ), the echo changes nothing. controller-runtime
reconciles it anyway (no predicate of its own tells an echo apart), and at a burst of
due runs it is one reconcile in three (``bench.fire``).
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


class StatusEchoes:
    """The status writes this process is making, so their watch echoes can be skipped.

    ``write_status`` notes a write before sending it (the echo may arrive before the
    response) and drops the note when the write needs a retry: a write merged onto a
    newer object after a Conflict was decided from an older one, so its echo is
    reconciled. ``is_echo`` is true only for an update whose old object has the
    resourceVersion the write was based on, whose new object has exactly the written
    status, and which changed nothing else (but the resourceVersion and managedFields
    the write stamps): only that write can make it (any other write from the same
    object keeps the old status, which differs, since only a changed status is
    written), and the writing reconcile has already acted on everything the new object
    holds. Anything else, including a resync, a relist that skips past the echo (alone
    or with an edit after it), a spec or metadata edit, or another writer, is no echo.

    One note per object, removed by its echo, by the object's deletion, or (``forget``)
    when a reconcile of the object starts before the echo came: that reconcile may read
    the cache before the write reached it and decide from the stale copy, and the echo,
    reconciled, is what puts that right. The reconcile forgets before it reads, so an
    echo skipped before then was already in the cache it reads. The checks are dict
    reads: a controller's predicate may make them on the informer's thread.
    """

    def __init__(self) -> None:
        self._notes: dict[tuple[str, str], tuple[str, objects.FrozenDict]] = {}

    def expect(self, obj: objects.Obj, status: dict[str, Any]) -> None:
        """Note that ``status`` is about to be written to ``obj`` as the cache holds it."""
        version = str(obj["metadata"].get("resourceVersion", ""))
        self._notes[_key(obj)] = (version, objects.freeze(status))

    def forget(self, namespace: str, name: str) -> None:
        """Drop the note of an object: its write is retried, the object is gone, or a
        reconcile of it starts (class doc)."""
        self._notes.pop((namespace, name), None)

    def is_echo(self, old: objects.Obj, new: objects.Obj) -> bool:
        """True when ``old`` -> ``new`` is the noted write and nothing else (class doc)."""
        note = self._notes.get(_key(new))
        if note is None:
            return False
        version, status = note
        if (
            old["metadata"].get("resourceVersion") != version
            or new.get("status") != status
            or _beside_the_status(old) != _beside_the_status(new)
        ):
            return False
        self._notes.pop(_key(new), None)
        return True


def _key(obj: objects.Obj) -> tuple[str, str]:
    return objects.namespace_of(obj), objects.name_of(obj)


_WRITE_STAMPS = frozenset({"resourceVersion", "managedFields"})
"""The metadata a status write changes besides the status."""


def _beside_the_status(obj: objects.Obj) -> tuple[dict[str, Any], dict[str, Any]]:
    """What a status write leaves as it was: the metadata but ``_WRITE_STAMPS``, and the
    rest of the object but its status. A relist delivers one update from the cached
    object to the newest, so our write and an edit after it can come as one."""
    metadata = {k: v for k, v in obj["metadata"].items() if k not in _WRITE_STAMPS}
    return metadata, {k: v for k, v in obj.items() if k not in ("metadata", "status")}


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
    echoes: StatusEchoes | None = None,
) -> dict[str, Any] | None:
    """Write ``status`` to ``obj``'s status subresource if it changed: the object the API
    server returned for the write, None when nothing was written.

    ``status`` was computed from ``obj.status`` (the base). On a Conflict the object is
    read fresh from the API server and this reconcile's changes are merged onto its
    status (``merge_status``), then written again (up to ``attempts`` writes in all):
    a stale cache after our own previous write, or another writer, never makes us drop
    our status or overwrite theirs. Other errors raise. ``echoes``: note the first
    attempt, so the watch echo of its write can be skipped (``StatusEchoes``); pass it
    only when deciding again from the written status would change nothing.
    """
    base = objects.thaw(obj.get("status") or {})
    if status == base:
        return None
    metadata = obj["metadata"]
    # Only the status is new: the rest goes out as the cache holds it (frozen dicts and
    # tuples serialize as JSON objects and arrays), not as a deep copy of the object.
    body = {**obj, "status": status}
    if echoes is not None:
        echoes.expect(obj, status)
    for attempt in range(1, attempts + 1):
        try:
            return client.update_status(kind, body)
        except errors.Conflict:
            if echoes is not None:
                echoes.forget(metadata.get("namespace", ""), metadata["name"])
            if attempt == attempts:
                raise
            fresh = client.live.get(kind, metadata["name"], metadata.get("namespace"))
            if (fresh.get("metadata") or {}).get("uid") != metadata.get("uid"):
                return None
            fresh_status = objects.thaw(fresh.get("status") or {})
            merged = merge_status(base, status, fresh_status)
            if merged == fresh_status:
                return None  # the server already has everything we wanted to write
            body = {**fresh, "status": merged}
    return None
