"""Declaring and running a controller: reconcile types, sources, handlers, predicates.

``Reconciler``, ``Request``, ``Result``, ``TerminalError``; a ``Controller`` fed by
``Source`` s (``KindSource`` for a kind's shared informer, ``ChannelSource`` for objects
the application sends), each through a ``MapFunc`` and ``Predicate`` s; the ``Builder``
(``for_``, ``owns``, ``watches``) that wires them on a ``ControllerHost``.

Machinery: ``_reconcile``, ``_source``, ``_handlers``, ``_predicates``, ``_workqueue``
(de-duplicating, rate-limited: ``RetryLimits``), ``_controller``, ``_builder``.
"""

from cronjob_operator.runtime.controller._builder import Builder, ControllerHost
from cronjob_operator.runtime.controller._controller import Controller, ControllerOptions
from cronjob_operator.runtime.controller._handlers import (
    EnqueueHandler,
    MapFunc,
    for_object,
    for_owner,
)
from cronjob_operator.runtime.controller._predicates import (
    Predicate,
    and_,
    annotations_changed,
    generation_changed,
    labels_changed,
    not_,
    or_,
    resource_version_changed,
)
from cronjob_operator.runtime.controller._reconcile import (
    Reconciler,
    Request,
    Result,
    TerminalError,
)
from cronjob_operator.runtime.controller._source import ChannelSource, KindSource, Source
from cronjob_operator.runtime.controller._workqueue import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    RateLimiter,
    RetryLimits,
    WorkQueue,
)

__all__ = [
    "BucketRateLimiter",
    "Builder",
    "ChannelSource",
    "Controller",
    "ControllerHost",
    "ControllerOptions",
    "EnqueueHandler",
    "ItemExponentialFailureRateLimiter",
    "KindSource",
    "MapFunc",
    "MaxOfRateLimiter",
    "Predicate",
    "RateLimiter",
    "Reconciler",
    "Request",
    "Result",
    "RetryLimits",
    "Source",
    "TerminalError",
    "WorkQueue",
    "and_",
    "annotations_changed",
    "for_object",
    "for_owner",
    "generation_changed",
    "labels_changed",
    "not_",
    "or_",
    "resource_version_changed",
]
