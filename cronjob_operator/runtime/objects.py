"""Objects as plain JSON, frozen in the cache so reads never need a deep copy.

Everything the runtime handles is the JSON the API server sent, parsed into dicts and
lists: no generated model classes (they cost several times the parse). The informer
freezes each object once when it arrives (``freeze``): dicts become ``FrozenDict`` and
lists become tuples, so the cache can hand the same object to every reader without a
copy, and a reader that tries to change it gets a ``TypeError`` instead of silently
corrupting the cache. A reader that wants to change an object asks for ``thaw`` (a
deep, mutable copy), which is what controller-runtime pays on every read.

The free text the runtime writes into an object (an Event's message, a condition's) is
cut to one bound, ``MAX_MESSAGE_LENGTH``, by ``clipped_message``: such a message often
repeats what a tenant wrote (a container name, a schedule), and one over the schema's
bound (32,768 characters for a condition) makes every status write of the object fail.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, NoReturn

__all__ = [
    "MAX_MESSAGE_LENGTH",
    "FrozenDict",
    "Obj",
    "clipped_message",
    "controller_ref",
    "freeze",
    "name_of",
    "namespace_of",
    "object_key",
    "thaw",
]

Obj = Mapping[str, Any]
"""An object as read from the cache: a frozen mapping of JSON values."""

MAX_MESSAGE_LENGTH = 1024
"""The most characters of an Event's or a condition's message (client-go cuts an Event's
message at 1,024; a condition's schema allows 32,768, and a human reads far less)."""


class FrozenDict(dict[str, Any]):
    """A dict that refuses mutation; JSON encoders still see a plain dict."""

    __slots__ = ()

    def _refuse(self, *_args: object, **_kwargs: object) -> NoReturn:
        raise TypeError("objects from the cache are read-only; use thaw() for a mutable copy")

    __setitem__ = _refuse
    __delitem__ = _refuse
    clear = _refuse
    pop = _refuse
    popitem = _refuse
    setdefault = _refuse
    update = _refuse
    __ior__ = _refuse

    def __copy__(self) -> FrozenDict:
        return self

    def __deepcopy__(self, _memo: object) -> dict[str, Any]:
        return thaw(self)  # type: ignore[no-any-return]

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenDict, (dict(self),))


_LEAF_TYPES = frozenset({str, int, float, bool, type(None)})
"""JSON scalars: frozen as they are, tested inline so ``freeze`` is not called per leaf."""

_SHARED_BY_THAW = _LEAF_TYPES | {datetime}
"""What ``thaw`` keeps rather than copies: JSON scalars, and the datetimes a controller's
parsed status holds (immutable too; the CronJob decision thaws its stored status, whose
times ``view.stored_status`` parsed, at every decision)."""

_EMPTY = FrozenDict()
"""The one frozen empty dict (managedFields are mostly ``{}``): shared, as ``()`` is."""


_intern = sys.intern
_set_item = dict.__setitem__
"""Fills a ``FrozenDict`` under construction (its own ``__setitem__`` refuses)."""


def freeze(value: Any) -> Any:
    """Return ``value`` with every dict frozen and every list turned into a tuple.

    The hot path of every watch event (see bench/ingest.py): exact JSON types are
    dispatched on ``type()`` and scalars are never recursed into, which halves the cost
    of the obvious ``isinstance`` recursion; subclasses take the general path.

    Any depth: the API server stores free-form fields (a pod template's ``affinity``)
    nested up to 10,000 levels, and one such object must not stop an informer. Real
    objects are under 20 levels and take the recursive fast path; one deep enough to
    exhaust Python's stack is frozen again by ``_freeze_iteratively``, which uses no
    recursion at all.

    String values are interned: namespaces, kinds, owner names and uids, label values,
    images, condition reasons and messages repeat across thousands of cached objects, and
    sharing one copy cut the RSS of a cached Job from 4,870 to 2,959 B (``slim_job``) and
    from 8,868 to 5,400 B (stripped; ``python -m bench.memory --jobs 20k``) for about 5 µs
    more per frozen Job.
    """
    try:
        return _freeze_recursively(value)
    except RecursionError:
        return _freeze_iteratively(value)


def _freeze_recursively(value: Any) -> Any:
    cls = type(value)
    if cls is dict:
        if not value:
            return _EMPTY
        return FrozenDict(
            {
                k: _intern(v)
                if type(v) is str
                else v
                if type(v) in _LEAF_TYPES
                else _freeze_recursively(v)
                for k, v in value.items()
            }
        )
    if cls is list or cls is tuple:
        return tuple(
            [
                _intern(v)
                if type(v) is str
                else v
                if type(v) in _LEAF_TYPES
                else _freeze_recursively(v)
                for v in value
            ]
        )
    if cls is FrozenDict or cls in _LEAF_TYPES:
        return value
    return _freeze_iteratively(value)


def _freeze_iteratively(value: Any) -> Any:
    """``freeze`` without recursion: a stack of containers still to copy.

    Each container becomes a shell (a ``FrozenDict`` filled in place, or a list that
    becomes a tuple) whose nested containers are pushed; once every shell exists, they
    are finished in reverse order of creation, so each child is final (a tuple) before
    its parent takes it. A container inside itself raises ``ValueError`` (``_Path``).
    """
    root: list[Any] = [None]
    pending: list[Any] = [(root, 0, value)]
    shells: list[tuple[Any, Any, Any]] = []
    path = _Path()
    while pending:
        entry = pending.pop()
        if path.left(entry):
            continue
        holder, slot, source = entry
        if isinstance(source, dict | list | tuple):
            path.enter(source, pending)
        shells.append((holder, slot, _frozen_shell(source, pending)))
    for holder, slot, shell in reversed(shells):
        final = tuple(shell) if type(shell) is list else shell
        if type(holder) is FrozenDict:
            _set_item(holder, slot, final)
        else:
            holder[slot] = final
    return root[0]


def _frozen_shell(source: Any, pending: list[Any]) -> Any:
    """``source``'s frozen copy with its scalars in place; each nested container is left
    as None and pushed to ``pending`` as (shell, slot, container)."""
    if isinstance(source, FrozenDict) or not isinstance(source, dict | list | tuple):
        return source
    if isinstance(source, dict):
        if not source:
            return _EMPTY
        frozen = FrozenDict()
        for key, item in source.items():
            _set_item(frozen, key, _frozen_scalar(item, frozen, key, pending))
        return frozen
    items: list[Any] = [None] * len(source)
    for index, item in enumerate(source):
        items[index] = _frozen_scalar(item, items, index, pending)
    return items


def _frozen_scalar(item: Any, shell: Any, slot: Any, pending: list[Any]) -> Any:
    """``item`` frozen if it is a scalar (or frozen already); else None, and it is pushed."""
    cls = type(item)
    if cls is str:
        return _intern(item)
    if cls in _LEAF_TYPES or cls is FrozenDict:
        return item
    pending.append((shell, slot, item))
    return None


class _Leave:
    """Pushed by ``_Path.enter`` under a container's children: popped after them."""

    __slots__ = ("container",)

    def __init__(self, container: int) -> None:
        self.container = container


class _Path:
    """The containers an iterative copy is inside. One met again while it is open
    contains itself: ``ValueError``, where the copy would otherwise never end (the
    recursive path's ``RecursionError`` is what sends such a value here)."""

    __slots__ = ("_open",)

    def __init__(self) -> None:
        self._open: set[int] = set()

    def enter(self, container: object, pending: list[Any]) -> None:
        """Open ``container`` until the marker pushed now is popped, after everything
        pushed later (its children)."""
        if id(container) in self._open:
            raise ValueError(f"cannot copy a {type(container).__name__} that contains itself")
        self._open.add(id(container))
        pending.append(_Leave(id(container)))

    def left(self, entry: object) -> bool:
        """Whether ``entry`` is a marker (its container is closed now) rather than work."""
        if type(entry) is not _Leave:
            return False
        self._open.remove(entry.container)
        return True


def thaw(value: Any) -> Any:
    """Return a deep, mutable copy of ``value`` (dicts and lists all the way down).

    Every reconcile thaws the status it edits, so the exact JSON types take a fast path
    dispatched on ``type()``, as ``freeze`` does; other mappings and sequences, and
    anything deep enough to exhaust Python's stack, take ``_thaw_iteratively``.
    """
    try:
        return _thaw_recursively(value)
    except RecursionError:
        return _thaw_iteratively(value)


def _thaw_recursively(value: Any) -> Any:
    cls = type(value)
    if cls is FrozenDict or cls is dict:
        return {
            k: v if type(v) in _SHARED_BY_THAW else _thaw_recursively(v) for k, v in value.items()
        }
    if cls is tuple or cls is list:
        return [v if type(v) in _SHARED_BY_THAW else _thaw_recursively(v) for v in value]
    if cls in _SHARED_BY_THAW:
        return value
    return _thaw_iteratively(value)


def _thaw_iteratively(value: Any) -> Any:
    """``thaw`` without recursion: the copies are mutable, so each is filled in place. A
    container inside itself raises ``ValueError`` (``_Path``)."""
    root: list[Any] = [value]
    pending: list[Any] = [(root, 0)]
    path = _Path()
    while pending:
        entry = pending.pop()
        if path.left(entry):
            continue
        holder, slot = entry
        source = holder[slot]
        copy: Any
        if isinstance(source, Mapping):
            copy = dict(source)
            slots: Iterable[Any] = copy
        elif isinstance(source, list | tuple):
            copy = list(source)
            slots = range(len(copy))
        else:
            continue
        path.enter(source, pending)
        pending.extend((copy, child) for child in slots)
        holder[slot] = copy
    return root[0]


def namespace_of(obj: Obj) -> str:
    """The object's namespace, or "" for a cluster-scoped object."""
    return str(obj.get("metadata", {}).get("namespace") or "")


def name_of(obj: Obj) -> str:
    """The object's name."""
    return str(obj.get("metadata", {}).get("name") or "")


def object_key(obj: Obj) -> str:
    """The store key: ``namespace/name``, or ``name`` for a cluster-scoped object."""
    namespace = namespace_of(obj)
    return f"{namespace}/{name_of(obj)}" if namespace else name_of(obj)


def controller_ref(obj: Obj) -> Mapping[str, Any] | None:
    """The owner reference with ``controller: true``, if the object has one."""
    for ref in obj.get("metadata", {}).get("ownerReferences") or ():
        if ref.get("controller"):
            return ref  # type: ignore[no-any-return]
    return None


def clipped_message(message: str) -> str:
    """``message`` whole when at most ``MAX_MESSAGE_LENGTH`` characters, else its start,
    ``…`` and its full length, within ``MAX_MESSAGE_LENGTH`` in all."""
    if len(message) <= MAX_MESSAGE_LENGTH:
        return message
    tail = f"… ({len(message)} characters)"
    return message[: MAX_MESSAGE_LENGTH - len(tail)] + tail
