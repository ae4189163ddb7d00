"""The builder: declare what a controller reconciles and watches, as controller-runtime's does.

    Builder(manager, "cronjob").for_(CRONJOB).owns(JOB).complete(reconciler)

``for_`` enqueues the reconciled kind itself; ``owns`` enqueues the controller owner of
an owned object (group and kind must match, version ignored, ``controller: true`` only);
``watches`` enqueues whatever a map function returns. Each takes optional predicates.
``complete`` builds the ``Controller`` and registers it with the manager, which starts
it only once the caches have synced (and, with leader election, only on the leader).

The builder needs only a ``ControllerHost`` (the cache, the metrics, the default
controller options and a way to register the controller), not the ``Manager`` itself:
the manager imports the builder, never the other way round.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

from cronjob_operator.runtime.cache import Cache
from cronjob_operator.runtime.controller import _handlers as handlers
from cronjob_operator.runtime.controller._controller import Controller, ControllerOptions
from cronjob_operator.runtime.controller._predicates import Predicate
from cronjob_operator.runtime.controller._reconcile import Reconciler
from cronjob_operator.runtime.controller._source import KindSource
from cronjob_operator.runtime.kinds import Kind
from cronjob_operator.runtime.metrics import Metrics


class ControllerHost(Protocol):
    """What the builder needs from a manager."""

    @property
    def cache(self) -> Cache:
        """The shared informer cache the controller's watches use."""
        ...

    @property
    def metrics(self) -> Metrics:
        """Where the controller and its queue count."""
        ...

    @property
    def controller_options(self) -> ControllerOptions:
        """The defaults for every controller (workers, drain and reconcile timeouts)."""
        ...

    def add_controller(self, controller: Controller) -> None:
        """Register the built controller so the host starts and stops it."""
        ...


class Builder:
    """Collects a controller's watches; ``complete`` creates and registers it."""

    def __init__(self, host: ControllerHost, name: str) -> None:
        self._host = host
        self._name = name
        self._for: tuple[Kind, tuple[Predicate, ...]] | None = None
        self._watches: list[tuple[Kind, handlers.MapFunc, tuple[Predicate, ...]]] = []
        self._options = host.controller_options

    def for_(self, kind: Kind, *predicates: Predicate) -> Builder:
        """Reconcile objects of ``kind``; each event enqueues the object itself."""
        self._for = (kind, predicates)
        return self

    def owns(self, kind: Kind, *predicates: Predicate) -> Builder:
        """Watch ``kind`` and enqueue the controller owner when it is the ``for_`` kind."""
        if self._for is None:
            raise ValueError(f"controller {self._name}: call for_() before owns()")
        self._watches.append((kind, handlers.for_owner(self._for[0]), predicates))
        return self

    def watches(self, kind: Kind, map_fn: handlers.MapFunc, *predicates: Predicate) -> Builder:
        """Watch ``kind`` and enqueue what ``map_fn`` returns for each event."""
        self._watches.append((kind, map_fn, predicates))
        return self

    def with_max_concurrent_reconciles(self, count: int) -> Builder:
        """How many requests may be reconciled at once (distinct objects only)."""
        self._options = dataclasses.replace(self._options, max_concurrent_reconciles=count)
        return self

    def with_reconcile_timeout(self, seconds: float) -> Builder:
        """A deadline for each reconcile's REST calls (they raise ``DeadlineExceeded``)."""
        self._options = dataclasses.replace(self._options, reconcile_timeout=seconds)
        return self

    def complete(self, reconciler: Reconciler) -> Controller:
        """Build the controller, wire its watches to the shared informers, register it."""
        if self._for is None:
            raise ValueError(f"controller {self._name}: for_() is required")
        controller = Controller(
            self._name,
            reconciler,
            max_concurrent_reconciles=self._options.max_concurrent_reconciles,
            rate_limiter=self._options.retry_limits.rate_limiter(),
            drain_timeout=self._options.drain_timeout,
            reconcile_timeout=self._options.reconcile_timeout,
            base_context=self._options.base_context,
            metrics=self._host.metrics,
        )
        cache = self._host.cache
        kind, predicates = self._for
        controller.watch(KindSource(cache, kind), handlers.for_object, predicates)
        for watched, map_fn, watch_predicates in self._watches:
            controller.watch(KindSource(cache, watched), map_fn, watch_predicates)
        self._host.add_controller(controller)
        return controller
