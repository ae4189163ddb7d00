"""Which buckets a member's owned-object informers select: the buckets of its share.

A member's informer of the sharded kind selects on its shard label, so its store is its
share. The owned objects (Jobs) carry their owner's bucket instead (``_labels``), so
the member's owned-object informers select ``bucket in (...)`` over the buckets of the
objects in its share, and follow the share as it changes (``Cache.reselect``):

* a bucket is added as soon as an object of it is in the share (each ``follow``);
* a bucket that no object of the share needs any more is dropped only once the share
  has been without it for ``shrink_after`` seconds, so that a quick move back and forth
  does not cost two syncs;
* one reselection at a time: changes seen while one syncs wait for it.

An object of the share may be reconciled only once its bucket is *ready*: selected and
synced, so the cache holds every owned object of that bucket. While a reselection
syncs, the buckets it keeps stay ready (their cache lags as any watch may; the
controller tolerates that), the new ones become ready when it has synced, and
``follow`` returns them so the member can enqueue their objects.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

from cronjob_operator.runtime import objects
from cronjob_operator.runtime.cache import Cache
from cronjob_operator.runtime.kinds import Kind
from cronjob_operator.runtime.sharding._labels import bucket_of_object, bucket_selector

log = logging.getLogger(__name__)

SHRINK_AFTER = 20.0
"""Seconds a bucket stays selected after the share stopped needing it."""


class OwnedSelection:
    """The buckets a member's owned-object informers select, following its share."""

    def __init__(
        self,
        cache: Cache,
        sharded: Kind,
        owned: Iterable[Kind],
        *,
        shrink_after: float = SHRINK_AFTER,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._cache = cache
        self._sharded = sharded
        self._owned = tuple(owned)
        self._shrink_after = shrink_after
        self._clock = clock
        self._selected: frozenset[int] = frozenset()
        self._ready: frozenset[int] = frozenset()
        self._syncing = False
        self._needed_since = self._clock()
        self.reselections = 0
        """How many times the owned informers were asked to select anew."""

    @property
    def selector(self) -> str:
        """The owned informers' selector now (at first: one that matches nothing)."""
        return bucket_selector(self._selected)

    @property
    def ready_buckets(self) -> frozenset[int]:
        return self._ready

    def ready(self, obj: objects.Obj) -> bool:
        """Whether the cache holds every owned object of ``obj``'s bucket."""
        return bucket_of_object(obj) in self._ready

    def follow(self) -> frozenset[int]:
        """Select what the share needs (module doc); returns the buckets newly ready."""
        newly_ready: frozenset[int] = frozenset()
        if self._syncing:
            if not all(self._cache.informer(k).has_synced_selection() for k in self._owned):
                return newly_ready
            self._syncing = False
            newly_ready = self._selected - self._ready
            self._ready = self._selected
            log.info(
                "owned objects cached",
                extra={"buckets": len(self._ready), "new_buckets": len(newly_ready)},
            )
        share = self._cache.informer(self._sharded).store.list()
        needed = frozenset(bucket_of_object(obj) for obj in share)
        now = self._clock()
        if needed >= self._selected:
            self._needed_since = now  # the last moment every selected bucket was needed
        missing = needed - self._selected
        shrink_due = now - self._needed_since >= self._shrink_after
        if missing or (shrink_due and needed != self._selected):
            target = needed if shrink_due else self._selected | needed
            self._reselect(target)
        return newly_ready

    def _reselect(self, target: frozenset[int]) -> None:
        self._selected = target
        self._ready = self._ready & target
        self._syncing = True
        self.reselections += 1
        log.info(
            "selecting owned objects",
            extra={"buckets": len(target), "syncing": len(target - self._ready)},
        )
        for kind in self._owned:
            self._cache.reselect(kind, bucket_selector(target))
