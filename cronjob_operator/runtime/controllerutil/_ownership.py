"""Ownership and create-or-update: the helpers of controller-runtime's ``controllerutil``.

``set_controller_reference(owner, obj)`` makes ``owner`` the controller of ``obj`` (the
reference ``Owns`` watches follow and garbage collection deletes through); an object
already controlled by someone else raises ``AlreadyOwnedError`` instead of being taken.
``is_controlled_by`` is the matching check, by uid.

``add_finalizer``, ``remove_finalizer`` and ``contains_finalizer`` edit and read
``metadata.finalizers`` in place, as controllerutil's AddFinalizer/RemoveFinalizer/
ContainsFinalizer: the first two say whether they changed anything, so a reconcile writes
only when they did (pair them with ``create_or_patch`` or an update carrying the version).

``create_or_update`` and ``create_or_patch`` bring one object to what a ``mutate``
function makes of it and say what that took (``OperationResult``): the object is read
(from the cache), created when missing, otherwise mutated on a copy and written only
when something changed, so a reconcile that finds nothing new makes no write. The update
carries the ``resourceVersion`` it read (a stale cache gives ``Conflict``: the reconcile
is retried); the patch is a JSON merge patch of the fields ``mutate`` changed, without
a version, so it never conflicts and never resets fields other writers own. Errors of
the API server propagate as the typed ``errors``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from cronjob_operator.runtime import errors, objects
from cronjob_operator.runtime.client import ObjectWriter
from cronjob_operator.runtime.kinds import Kind

Mutate = Callable[[dict[str, Any]], object]
"""Edits the object in place to the state the controller wants; what it returns is ignored
(so ``add_finalizer``, which says whether it changed anything, is a mutate function)."""


class OperationResult(enum.StrEnum):
    """What ``create_or_update``/``create_or_patch`` did."""

    CREATED = "created"
    UPDATED = "updated"
    UNCHANGED = "unchanged"


class AlreadyOwnedError(ValueError):
    """The object already has a controller owner other than the one being set."""


class ObjectClient(ObjectWriter, Protocol):
    """The reads and writes the helpers use; ``Client`` (and a fake client) has them."""

    def get(self, kind: Kind, name: str, namespace: str | None = None) -> objects.Obj:
        """The object (from the cache), or ``errors.NotFound``."""
        ...


def controller_reference(owner: objects.Obj) -> dict[str, Any]:
    """The owner reference that names ``owner`` as controller (blocking owner deletion)."""
    metadata = owner.get("metadata") or {}
    missing = [f for f in ("apiVersion", "kind") if not owner.get(f)]
    missing += [f"metadata.{f}" for f in ("name", "uid") if not metadata.get(f)]
    if missing:
        raise ValueError(
            f"cannot reference owner {objects.object_key(owner) or '<unnamed>'}: it has no "
            f"{', '.join(missing)}; use the object as read from the API server"
        )
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": metadata["name"],
        "uid": metadata["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _same_owner(ref: Mapping[str, Any], other: Mapping[str, Any]) -> bool:
    group = str(ref.get("apiVersion", "")).rpartition("/")[0]
    other_group = str(other.get("apiVersion", "")).rpartition("/")[0]
    return (group, ref.get("kind"), ref.get("name")) == (
        other_group,
        other.get("kind"),
        other.get("name"),
    )


def set_controller_reference(owner: objects.Obj, obj: dict[str, Any]) -> None:
    """Make ``owner`` the controller of ``obj`` (in place; a cluster-scoped owner or one in
    the same namespace only, as garbage collection requires)."""
    owner_namespace = objects.namespace_of(owner)
    if owner_namespace and owner_namespace != objects.namespace_of(obj):
        raise ValueError(
            f"{objects.object_key(owner)} cannot own {objects.object_key(obj)}: a namespaced "
            "owner must be in the same namespace as what it owns"
        )
    ref = controller_reference(owner)
    metadata = obj.setdefault("metadata", {})
    refs = [dict(r) for r in metadata.get("ownerReferences") or ()]
    current = objects.controller_ref({"metadata": {"ownerReferences": refs}})
    if current is not None and not _same_owner(current, ref):
        raise AlreadyOwnedError(
            f"{objects.object_key(obj)} is already controlled by {current.get('kind')} "
            f"{current.get('name')}; an object has one controller owner"
        )
    metadata["ownerReferences"] = [r for r in refs if not _same_owner(r, ref)] + [ref]


def is_controlled_by(obj: objects.Obj, owner: objects.Obj) -> bool:
    """True when ``owner`` (this very object, by uid) is ``obj``'s controller owner."""
    ref = objects.controller_ref(obj) or {}
    return bool(ref) and ref.get("uid") == (owner.get("metadata") or {}).get("uid")


def contains_finalizer(obj: objects.Obj, finalizer: str) -> bool:
    """True when ``finalizer`` is in ``obj``'s ``metadata.finalizers``."""
    return finalizer in ((obj.get("metadata") or {}).get("finalizers") or ())


def add_finalizer(obj: dict[str, Any], finalizer: str) -> bool:
    """Append ``finalizer`` to ``metadata.finalizers`` unless it is there; True if added."""
    metadata = obj.setdefault("metadata", {})
    finalizers = list(metadata.get("finalizers") or ())
    if finalizer in finalizers:
        return False
    metadata["finalizers"] = [*finalizers, finalizer]
    return True


def remove_finalizer(obj: dict[str, Any], finalizer: str) -> bool:
    """Remove every ``finalizer`` entry from ``metadata.finalizers``; True if any was there.

    The key is dropped when the list becomes empty, as the API server stores it."""
    metadata = obj.setdefault("metadata", {})
    finalizers = list(metadata.get("finalizers") or ())
    kept = [f for f in finalizers if f != finalizer]
    if len(kept) == len(finalizers):
        return False
    if kept:
        metadata["finalizers"] = kept
    else:
        metadata.pop("finalizers", None)
    return True


def _read(client: ObjectClient, kind: Kind, obj: Mapping[str, Any]) -> objects.Obj | None:
    try:
        return client.get(kind, objects.name_of(obj), objects.namespace_of(obj) or None)
    except errors.NotFound:
        return None


def _mutated(existing: objects.Obj, mutate: Mutate, kind: Kind) -> dict[str, Any]:
    changed: dict[str, Any] = objects.thaw(existing)
    mutate(changed)
    if (objects.name_of(changed), objects.namespace_of(changed)) != (
        objects.name_of(existing),
        objects.namespace_of(existing),
    ):
        raise ValueError(
            f"mutate changed the name or namespace of {kind.kind} {objects.object_key(existing)}"
        )
    return changed


def create_or_update(
    client: ObjectClient, kind: Kind, obj: Mapping[str, Any], mutate: Mutate
) -> tuple[OperationResult, objects.Obj]:
    """Create ``obj`` mutated, or update the existing object mutated, if that changes it.

    ``obj`` names the object (metadata.name and namespace) and is the starting point
    when it does not exist. Returns what was done and the object as the server (or, when
    unchanged, the cache) has it.
    """
    existing = _read(client, kind, obj)
    if existing is None:
        created: dict[str, Any] = objects.thaw(obj)
        mutate(created)
        return OperationResult.CREATED, client.create(kind, created)
    changed = _mutated(existing, mutate, kind)
    if changed == objects.thaw(existing):
        return OperationResult.UNCHANGED, existing
    return OperationResult.UPDATED, client.update(kind, changed)


def create_or_patch(
    client: ObjectClient, kind: Kind, obj: Mapping[str, Any], mutate: Mutate
) -> tuple[OperationResult, objects.Obj]:
    """As ``create_or_update``, but an existing object gets a merge patch of what changed.

    A changed ``status`` is patched through the status subresource (the main write
    ignores it), so one call can bring both up to date.
    """
    existing = _read(client, kind, obj)
    if existing is None:
        created: dict[str, Any] = objects.thaw(obj)
        mutate(created)
        return OperationResult.CREATED, client.create(kind, created)
    before: dict[str, Any] = objects.thaw(existing)
    changed = _mutated(existing, mutate, kind)
    patch = merge_patch(before, changed)
    if not patch:
        return OperationResult.UNCHANGED, existing
    name, namespace = objects.name_of(existing), objects.namespace_of(existing) or None
    status = patch.pop("status", None)
    result: objects.Obj = existing
    if patch:
        result = client.patch(kind, name, patch, namespace=namespace)
    if status is not None:
        result = client.patch(
            kind, name, {"status": status}, namespace=namespace, subresource="status"
        )
    return OperationResult.UPDATED, result


def merge_patch(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON merge patch (RFC 7386) that turns ``old`` into ``new``; {} when equal.

    Lists are replaced whole, as merge patches do; a removed key becomes ``None``.
    """
    patch: dict[str, Any] = {}
    for key, value in new.items():
        before = old.get(key)
        if key not in old or before != value:
            both_maps = isinstance(before, Mapping) and isinstance(value, Mapping)
            patch[key] = merge_patch(before, value) if both_maps else objects.thaw(value)  # type: ignore[arg-type]
    for key in old:
        if key not in new:
            patch[key] = None
    return patch
