"""Server-side apply, modelled in memory for the fake client.

A real API server tracks, per object, which field manager owns which fields
(``metadata.managedFields``) and merges an applied configuration by those sets: fields
the manager applies are set (taking ownership), fields it applied before and leaves out
now are removed unless another manager owns them too, and a field another manager owns
with a different value is a conflict unless the apply is forced (then ownership moves).

This module is that rule as pure functions over plain dicts, so ``fake.FakeClient`` can
offer ``apply`` with the semantics a reconciler depends on. It is a model, smaller than
structured-merge-diff: every list is atomic (owned and replaced whole, as
``x-kubernetes-list-type: atomic``; the server merges lists of map-type by key), and
ownership is tracked for apply managers only (fields written by create, update or patch
belong to nobody here, so they never conflict with an apply; on a server they belong to
the writer's manager and can).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Path = tuple[str, ...]
"""A field's place in an object: ("spec", "replicas")."""

Ownership = dict[str, frozenset[Path]]
"""Which fields each field manager applied: manager name -> its leaf paths."""

_IDENTITY: frozenset[Path] = frozenset(
    {
        ("apiVersion",),
        ("kind",),
        ("metadata", "name"),
        ("metadata", "namespace"),
        ("metadata", "resourceVersion"),
        ("metadata", "uid"),
    }
)
"""Fields that name the object rather than configure it: nobody owns them."""


class ApplyConflict(Exception):
    """Fields the apply would change that other managers own (``force`` takes them)."""

    def __init__(self, conflicts: tuple[tuple[str, Path], ...]) -> None:
        self.conflicts = conflicts
        listed = "; ".join(
            f'conflict with "{manager}": .{".".join(path)}' for manager, path in conflicts
        )
        super().__init__(f"Apply failed with {len(conflicts)} conflict(s): {listed}")


def leaf_paths(config: Mapping[str, Any], prefix: Path = ()) -> frozenset[Path]:
    """Every field ``config`` sets: nested maps are walked, anything else is one field."""
    paths: set[Path] = set()
    for key, value in config.items():
        path = (*prefix, str(key))
        if isinstance(value, Mapping) and value:
            paths |= leaf_paths(value, path)
        elif path not in _IDENTITY:
            paths.add(path)
    return frozenset(paths)


def apply_configuration(
    current: Mapping[str, Any],
    config: Mapping[str, Any],
    *,
    manager: str,
    owners: Mapping[str, frozenset[Path]],
    force: bool = False,
) -> tuple[dict[str, Any], Ownership]:
    """The object after ``manager`` applies ``config`` to ``current``, and the new owners.

    Raises ``ApplyConflict`` when another manager owns a field ``config`` sets to a
    different value, unless ``force``. ``current`` is not changed.
    """
    applied = leaf_paths(config)
    conflicts = tuple(
        (other, path)
        for other, paths in sorted(owners.items())
        if other != manager
        for path in sorted(paths & applied)
        if _get(current, path) != _get(config, path)
    )
    if conflicts and not force:
        raise ApplyConflict(conflicts)
    taken = {path for _, path in conflicts}
    new_owners: Ownership = {
        other: paths - taken for other, paths in owners.items() if other != manager
    }
    kept_by_others = frozenset().union(*new_owners.values())
    result = _copy(current)
    for path in sorted(owners.get(manager, frozenset()) - applied - kept_by_others):
        _remove(result, path)
    for path in sorted(applied | (_NAMING & _set_paths(config))):
        value = _get(config, path)
        if value == {} and isinstance(_get(result, path), Mapping):
            continue  # an empty map owns the field, not the keys others set in it
        _set(result, path, _copy(value))
    new_owners[manager] = applied
    return result, {name: paths for name, paths in new_owners.items() if paths}


_NAMING: frozenset[Path] = frozenset(
    {("apiVersion",), ("kind",), ("metadata", "name"), ("metadata", "namespace")}
)
"""Identity fields the configuration carries over (they name a new object)."""

_MISSING = object()


def _set_paths(config: Mapping[str, Any]) -> frozenset[Path]:
    return frozenset(path for path in _NAMING if _get(config, path) is not _MISSING)


def _get(obj: Any, path: Path) -> Any:
    for key in path:
        if not isinstance(obj, Mapping) or key not in obj:
            return _MISSING
        obj = obj[key]
    return obj


def _set(obj: dict[str, Any], path: Path, value: Any) -> None:
    for key in path[:-1]:
        child = obj.get(key)
        if not isinstance(child, dict):
            child = obj[key] = {}
        obj = child
    obj[path[-1]] = value


def _remove(obj: dict[str, Any], path: Path) -> None:
    """Delete the field at ``path``, then every map on the way that it left empty."""
    parents: list[dict[str, Any]] = []
    for key in path[:-1]:
        child = obj.get(key)
        if not isinstance(child, dict):
            return
        parents.append(obj)
        obj = child
    obj.pop(path[-1], None)
    for parent, key in zip(reversed(parents), reversed(path[:-1]), strict=True):
        if parent[key]:
            break
        del parent[key]


def _copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_copy(v) for v in value]
    return value
