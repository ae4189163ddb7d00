"""A small controller-runtime for Python: what a controller author needs, in one import.

This facade is the library's front door, pinned by a test (tests/unit/test_architecture.py):
the reconcile types, the manager and its options, the controller with its map functions
and predicates, the client protocols and the cache, the typed errors a reconcile
catches, objects and kinds, the controllerutil helpers, the event recorder, the clock
and the fake client builder for tests. Everything else is reachable from its package,
each a short public ``__init__`` over private ``_`` modules:

``client`` (the typed client over the REST transport), ``cache`` (informers, the indexed
store, per-kind options), ``controller`` (reconcile types, sources, handlers,
predicates, the work queue, the builder), ``controllerutil`` (ownership,
create-or-update, status writes, conditions), ``events``, ``leaderelection``,
``manager`` (with the ``Runnable`` protocol), ``serving`` (the hardened HTTP server,
certificates, probes and authenticated metrics), ``webhook`` (admission and conversion
serving), ``sharding`` and ``fake``. The small shared vocabulary stays at the top:
``clock``, ``context``, ``errors``, ``kinds``, ``objects``, ``logs``, ``metrics`` and
``runnable``. The packages import each other in one direction only (docs/architecture.md
draws the graph), and nothing here imports ``api``, ``controllers``, ``webhooks`` or
``cli``: what is specific to an application is passed in by the caller.

Importing the facade imports nothing: each name loads its package on first use (PEP 562,
``cronjob_operator._lazy``), so ``import cronjob_operator.runtime.kinds`` (say, from the
kubectl plugin) loads ``kinds`` alone, not the manager, the REST client and
prometheus_client. The ``TYPE_CHECKING`` imports below are what mypy reads, and where
each name is loaded from (``_lazy.type_checking_homes``).
"""

from typing import TYPE_CHECKING

from cronjob_operator._lazy import exports, type_checking_homes

if TYPE_CHECKING:
    from cronjob_operator.runtime.cache import Cache
    from cronjob_operator.runtime.client import (
        ClientInterface,
        Reader,
        RestClient,
        load_configuration,
    )
    from cronjob_operator.runtime.clock import Clock
    from cronjob_operator.runtime.controller import (
        Controller,
        MapFunc,
        Predicate,
        Reconciler,
        Request,
        Result,
        TerminalError,
        generation_changed,
        resource_version_changed,
    )
    from cronjob_operator.runtime.controllerutil import (
        create_or_patch,
        create_or_update,
        is_controlled_by,
        set_condition,
        set_controller_reference,
        write_status,
    )
    from cronjob_operator.runtime.errors import AlreadyExists, ApiError, Conflict, NotFound
    from cronjob_operator.runtime.events import Recorder
    from cronjob_operator.runtime.fake import FakeClientBuilder
    from cronjob_operator.runtime.kinds import Kind
    from cronjob_operator.runtime.leaderelection import LeaderElectionConfig
    from cronjob_operator.runtime.manager import Manager, Options
    from cronjob_operator.runtime.objects import Obj, thaw

__all__ = [
    "AlreadyExists",
    "ApiError",
    "Cache",
    "ClientInterface",
    "Clock",
    "Conflict",
    "Controller",
    "FakeClientBuilder",
    "Kind",
    "LeaderElectionConfig",
    "Manager",
    "MapFunc",
    "NotFound",
    "Obj",
    "Options",
    "Predicate",
    "Reader",
    "Reconciler",
    "Recorder",
    "Request",
    "RestClient",
    "Result",
    "TerminalError",
    "create_or_patch",
    "create_or_update",
    "generation_changed",
    "is_controlled_by",
    "load_configuration",
    "resource_version_changed",
    "set_condition",
    "set_controller_reference",
    "thaw",
    "write_status",
]


if not TYPE_CHECKING:  # mypy reads the imports above, so a misspelt name stays an error
    __getattr__, __dir__ = exports(globals(), type_checking_homes(globals()))
