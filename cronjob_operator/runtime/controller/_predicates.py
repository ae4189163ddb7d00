"""Predicates: which events a watch lets through to the work queue.

The same set controller-runtime offers: ``resource_version_changed`` (drops resync
updates), ``generation_changed`` (spec changes only), ``labels_changed`` and
``annotations_changed`` (metadata a controller keys on), and the combinators ``and_``,
``or_`` and ``not_``. A predicate is a triple of functions, one per event type; the
"changed" predicates filter updates only and let creates and deletes through, as
controller-runtime's do. A predicate marked ``inline`` only reads the objects and never
blocks, so it may run on the informer's thread (``_handlers``); a combination of inline
predicates is inline.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cronjob_operator.runtime.objects import Obj


def _always(*_objs: Obj) -> bool:
    return True


@dataclass(frozen=True, slots=True)
class Predicate:
    """Filters for create, update and delete events; each defaults to letting all through."""

    create: Callable[[Obj], bool] = _always
    update: Callable[[Obj, Obj], bool] = _always
    delete: Callable[[Obj], bool] = _always
    inline: bool = False
    """True when each function only reads the objects and never blocks (module doc)."""


def _metadata(obj: Obj, field: str) -> object:
    return (obj.get("metadata") or {}).get(field)


def resource_version_changed() -> Predicate:
    """Updates pass only when ``metadata.resourceVersion`` changed (not a resync)."""
    return Predicate(
        update=lambda old, new: (
            _metadata(old, "resourceVersion") != _metadata(new, "resourceVersion")
        )
    )


def generation_changed() -> Predicate:
    """Updates pass only when ``metadata.generation`` changed (spec, not status)."""
    return Predicate(
        update=lambda old, new: _metadata(old, "generation") != _metadata(new, "generation")
    )


def labels_changed() -> Predicate:
    """Updates pass only when ``metadata.labels`` changed."""
    return Predicate(
        update=lambda old, new: (_metadata(old, "labels") or {}) != (_metadata(new, "labels") or {})
    )


def annotations_changed() -> Predicate:
    """Updates pass only when ``metadata.annotations`` changed."""
    return Predicate(
        update=lambda old, new: (
            (_metadata(old, "annotations") or {}) != (_metadata(new, "annotations") or {})
        )
    )


def and_(*predicates: Predicate) -> Predicate:
    """All of ``predicates`` must pass."""
    return Predicate(
        create=lambda obj: all(p.create(obj) for p in predicates),
        update=lambda old, new: all(p.update(old, new) for p in predicates),
        delete=lambda obj: all(p.delete(obj) for p in predicates),
        inline=all(p.inline for p in predicates),
    )


def or_(*predicates: Predicate) -> Predicate:
    """Any of ``predicates`` passing is enough."""
    return Predicate(
        create=lambda obj: any(p.create(obj) for p in predicates),
        update=lambda old, new: any(p.update(old, new) for p in predicates),
        delete=lambda obj: any(p.delete(obj) for p in predicates),
        inline=all(p.inline for p in predicates),
    )


def not_(predicate: Predicate) -> Predicate:
    """The opposite of ``predicate``."""
    return Predicate(
        create=lambda obj: not predicate.create(obj),
        update=lambda old, new: not predicate.update(old, new),
        delete=lambda obj: not predicate.delete(obj),
        inline=predicate.inline,
    )
