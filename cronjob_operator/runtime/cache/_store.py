"""The indexed store behind every informer: client-go's ThreadSafeStore and Indexer.

The reflector writes one kind's objects here (``upsert``, ``delete``, ``replace`` after a
relist); the cache and the controllers read them (``get``, ``list``, ``by_index``). Keys
are ``namespace/name`` (``name`` for cluster-scoped objects, see ``objects.object_key``).

An index is a named function from an object to the values it is filed under; the store
keeps, per index, value -> set of keys, so ``by_index`` costs O(len(result)). It also
remembers the values each key was filed under, so an update or delete moves a key
without calling the index function on the old object again: a function that is not
deterministic cannot leave stale entries, and one that raises is called (and logged)
once per object version. A function that raises, or returns something other than an
iterable of strings, is logged and the object is filed under nothing for that index;
the store stays consistent. The ``namespace`` index (cluster-scoped objects under "")
always exists; the cache builds controller-runtime's field indexes on top of this.

One re-entrant lock guards writes and reads. Index functions run under it, on the
reflector's thread (as client-go's ``threadSafeMap.updateIndices``): a slow one delays
the watch and every reader, so an index function must be pure and cheap (read fields,
never call out). Objects are frozen (``objects.freeze``), so
reads hand out the stored objects themselves, never copies.
"""

from __future__ import annotations

import builtins
import logging
import threading
from collections.abc import Callable, Iterable, Mapping

from cronjob_operator.runtime.objects import Obj, namespace_of, object_key

log = logging.getLogger(__name__)

IndexFunc = Callable[[Obj], Iterable[str]]
"""Returns the values an object is filed under in one index (none, one or several)."""

NAMESPACE_INDEX = "namespace"

_NO_VALUES: tuple[str, ...] = ()


def _namespace_values(obj: Obj) -> tuple[str]:
    return (namespace_of(obj),)


class _Index:
    """One index: value -> keys, and key -> the values it is filed under."""

    __slots__ = ("fn", "keys_by_value", "name", "values_by_key")

    def __init__(self, name: str, fn: IndexFunc) -> None:
        self.name = name
        self.fn = fn
        self.keys_by_value: dict[str, set[str]] = {}
        self.values_by_key: dict[str, tuple[str, ...]] = {}

    def values_of(self, key: str, obj: Obj) -> tuple[str, ...]:
        """The values ``obj`` is filed under; none (and one log record) if ``fn`` fails."""
        try:
            result = self.fn(obj)
            if isinstance(result, str):
                raise TypeError(f"returned the string {result!r}, not an iterable of strings")
            values = tuple(result)
            for value in values:
                if type(value) is not str:
                    raise TypeError(f"returned {value!r}, which is not a string")
        except Exception:
            log.exception(
                "index %r failed for object %r; it is indexed under no value", self.name, key
            )
            return _NO_VALUES
        if len(values) > 1:
            values = tuple(dict.fromkeys(values))
        return values

    def file(self, key: str, obj: Obj) -> None:
        """Index ``key`` (new to this index, or just unfiled) under ``obj``'s values."""
        values = self.values_of(key, obj)
        if values:
            self._insert(key, values)

    def refile(self, key: str, obj: Obj) -> None:
        """Move ``key`` from the values it is filed under to ``obj``'s values."""
        values = self.values_of(key, obj)
        old = self.values_by_key.get(key, _NO_VALUES)
        if values == old:
            return
        if old:
            self._remove(key, old)
        if values:
            self._insert(key, values)
        else:
            del self.values_by_key[key]

    def unfile(self, key: str) -> None:
        """Remove ``key`` from this index."""
        old = self.values_by_key.pop(key, None)
        if old:
            self._remove(key, old)

    def rebuilt(self, items: Mapping[str, Obj]) -> _Index:
        """A new index with the same function, filing exactly ``items``."""
        index = _Index(self.name, self.fn)
        for key, obj in items.items():
            index.file(key, obj)
        return index

    def _insert(self, key: str, values: tuple[str, ...]) -> None:
        self.values_by_key[key] = values
        keys_by_value = self.keys_by_value
        for value in values:
            keys = keys_by_value.get(value)
            if keys is None:
                keys_by_value[value] = {key}
            else:
                keys.add(key)

    def _remove(self, key: str, values: tuple[str, ...]) -> None:
        keys_by_value = self.keys_by_value
        for value in values:
            keys = keys_by_value[value]
            keys.discard(key)
            if not keys:
                del keys_by_value[value]


class Store:
    """A thread-safe map of key -> frozen object, with named indexes kept up to date."""

    def __init__(self, indexers: Mapping[str, IndexFunc] | None = None) -> None:
        self._lock = threading.RLock()
        self._items: dict[str, Obj] = {}
        self._indexes: dict[str, _Index] = {
            NAMESPACE_INDEX: _Index(NAMESPACE_INDEX, _namespace_values)
        }
        for name, fn in (indexers or {}).items():
            self.add_indexer(name, fn)

    def add_indexer(self, name: str, fn: IndexFunc) -> None:
        """Add the index ``name``, filing every object already stored; a duplicate is an error."""
        with self._lock:
            if name in self._indexes:
                raise ValueError(f"the store already has an index named {name!r}")
            self._indexes[name] = _Index(name, fn).rebuilt(self._items)

    def has_index(self, name: str) -> bool:
        """True if an index named ``name`` exists."""
        return name in self._indexes

    def upsert(self, obj: Obj) -> Obj | None:
        """Store ``obj`` under its key; return the object it replaced, or None if it is new."""
        key = object_key(obj)
        with self._lock:
            old = self._items.get(key)
            self._items[key] = obj
            if old is None:
                for index in self._indexes.values():
                    index.file(key, obj)
            else:
                for index in self._indexes.values():
                    index.refile(key, obj)
            return old

    def delete(self, key: str) -> Obj | None:
        """Remove the object stored under ``key``; return it, or None if there was none."""
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                for index in self._indexes.values():
                    index.unfile(key)
            return old

    def replace(self, objs: Iterable[Obj], *, namespace: str | None = None) -> list[Obj]:
        """Make the store hold exactly ``objs`` (a relist); return the objects that vanished.

        With ``namespace``, only that namespace's objects are replaced and the others kept
        (one reflector per namespace fills a store of several).

        The new contents and indexes are built outside the lock and swapped in at once,
        so readers are not blocked by the rebuild and see either the old or the new
        state, never a mix. A write that lands during the rebuild is overwritten, as if
        it had come just before the relist. For a key listed twice, the later object wins.
        """
        items = {object_key(obj): obj for obj in objs}
        if namespace:
            return self._replace_namespace(items, namespace)
        with self._lock:
            current = list(self._indexes.values())
        indexes = {index.name: index.rebuilt(items) for index in current}
        with self._lock:
            for name, index in self._indexes.items():
                if name not in indexes:  # added while we were building
                    indexes[name] = index.rebuilt(items)
            old_items = self._items
            self._items = items
            self._indexes = indexes
        return [obj for key, obj in old_items.items() if key not in items]

    def _replace_namespace(self, items: dict[str, Obj], namespace: str) -> list[Obj]:
        """``replace`` of one namespace, under the lock throughout: another namespace's
        reflector may write meanwhile, and its writes must survive this relist."""
        with self._lock:
            old_items = self._items
            kept = {k: o for k, o in old_items.items() if namespace_of(o) != namespace}
            self._items = kept | items
            self._indexes = {n: i.rebuilt(self._items) for n, i in self._indexes.items()}
        return [o for k, o in old_items.items() if namespace_of(o) == namespace and k not in items]

    def get(self, key: str) -> Obj | None:
        """The object stored under ``key``, or None."""
        with self._lock:
            return self._items.get(key)

    def list(self) -> list[Obj]:
        """Every stored object, in no particular order."""
        with self._lock:
            return list(self._items.values())

    def keys(self) -> builtins.list[str]:
        """Every stored key, in no particular order."""
        with self._lock:
            return list(self._items)

    def by_index(self, index: str, value: str) -> builtins.list[Obj]:
        """The objects filed under ``value`` in ``index``; KeyError if there is no such index."""
        with self._lock:
            found = self._indexes.get(index)
            if found is None:
                raise KeyError(
                    f"the store has no index named {index!r}; known: {sorted(self._indexes)}"
                )
            keys = found.keys_by_value.get(value)
            if not keys:
                return []
            items = self._items
            return [items[key] for key in keys]

    def index_values(self, index: str, key: str) -> tuple[str, ...]:
        """The values ``key`` is filed under in ``index`` (none for an unknown key)."""
        with self._lock:
            found = self._indexes.get(index)
            if found is None:
                raise KeyError(
                    f"the store has no index named {index!r}; known: {sorted(self._indexes)}"
                )
            return found.values_by_key.get(key, _NO_VALUES)

    def __len__(self) -> int:
        return len(self._items)
