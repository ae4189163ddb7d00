"""Event handlers: map an object that changed to the requests a controller should process.

``for_object`` enqueues the object itself (``For``); ``for_owner`` enqueues its
controller owner when that owner is of the given group and kind, any version, and the
reference has ``controller: true`` (``Owns``); ``MapFunc`` is any function from an
object to requests (``Watches``). ``EnqueueHandler`` adapts one of these, plus
predicates, to an informer's event handler, adding each request to the queue; on an
update both the old and the new object are mapped, and duplicates collapse in the queue.
The informer calls each ``EnqueueHandler`` on that handler's own thread (``_informer``),
so a slow map function or predicate holds up only its own watch; except one of
``for_object`` or ``for_owner`` whose predicates (if any) are all ``inline``, which only
reads the object and adds to a queue that never blocks: it ``runs_inline``, on the
informer's thread, which saves a thread wake-up per event.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from cronjob_operator.runtime import objects
from cronjob_operator.runtime.controller._predicates import Predicate
from cronjob_operator.runtime.controller._reconcile import Request
from cronjob_operator.runtime.controller._workqueue import WorkQueue
from cronjob_operator.runtime.kinds import Kind

MapFunc = Callable[[objects.Obj], Iterable[Request]]


def for_object(obj: objects.Obj) -> list[Request]:
    """The object itself."""
    return [Request(objects.namespace_of(obj), objects.name_of(obj))]


class _OwnerMap:
    """``for_owner``'s map function (a class, so ``EnqueueHandler`` can tell it is one)."""

    def __init__(self, owner: Kind) -> None:
        self._owner = owner

    def __call__(self, obj: objects.Obj) -> list[Request]:
        ref = objects.controller_ref(obj)
        if ref is None or not self._owner.matches(ref.get("apiVersion", ""), ref.get("kind", "")):
            return []
        return [Request(objects.namespace_of(obj), str(ref.get("name", "")))]


def for_owner(owner: Kind) -> MapFunc:
    """The controller owner of an object, when it is an ``owner`` (version ignored)."""
    return _OwnerMap(owner)


class EnqueueHandler:
    """An informer event handler that filters with predicates and enqueues mapped requests."""

    def __init__(
        self, queue: WorkQueue[Request], map_fn: MapFunc, predicates: Sequence[Predicate] = ()
    ) -> None:
        self._queue = queue
        self._map = map_fn
        self._predicates = tuple(predicates)
        self.runs_inline = all(p.inline for p in self._predicates) and (
            map_fn is for_object or isinstance(map_fn, _OwnerMap)
        )
        """The informer may call it on its own thread (module doc)."""

    def on_add(self, obj: objects.Obj) -> None:
        if all(p.create(obj) for p in self._predicates):
            self._enqueue(obj)

    def on_update(self, old: objects.Obj, new: objects.Obj) -> None:
        if all(p.update(old, new) for p in self._predicates):
            self._enqueue(old, new)

    def on_delete(self, obj: objects.Obj) -> None:
        if all(p.delete(obj) for p in self._predicates):
            self._enqueue(obj)

    def _enqueue(self, *objs: objects.Obj) -> None:
        requests: set[Request] = set()
        for obj in objs:
            requests.update(self._map(obj))
        for request in requests:
            self._queue.add(request)
