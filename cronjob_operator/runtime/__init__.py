"""A small controller-runtime for Python: the one import a controller author needs.

This facade is the library's public surface, pinned by a test (tests/unit/test_architecture.py):
the client and its cache, the builder, handlers and predicates, the reconcile types,
typed errors, object helpers, events, kinds, controllerutil helpers, the clock, and the
manager with its Runnables. The public modules hold one concept each, as
controller-runtime's packages do: ``client``, ``cache``, ``builder``, ``handlers``,
``predicates``, ``reconcile``, ``controller``, ``controllerutil``, ``clock``,
``manager``, ``runnable``, ``leaderelection``, ``events``, ``errors``, ``objects``,
``kinds``, ``metrics``, ``serving`` (on ``httpserver``, the hardened HTTP server base,
with ``certwatcher``, ``selfsigned`` and ``metrics_auth`` for TLS and authenticated
metrics) and ``logs``; ``fake`` has the test doubles (controller-runtime's
``client/fake``), kept out of the facade as Go keeps it out of ``client``.

The machinery is private by name and may change without notice: ``_rest`` (the HTTP
transport), ``_reflector``/``_informer``/``_store`` (list+watch into an indexed store),
``_workqueue``, ``_labels`` (selector parsing), ``_leaserecord`` (the Lease record
decisions) and ``_correlator`` (event aggregation and spam filter). Nothing in this
package imports ``api``, ``controllers``, ``webhooks`` or ``cli``; what is specific to an
application (its component name, user agent, kinds) is passed in by the caller.
"""

from cronjob_operator.runtime import context
from cronjob_operator.runtime._rest import RestClient, TokenBucket, load_configuration
from cronjob_operator.runtime.builder import Builder, ControllerHost
from cronjob_operator.runtime.cache import (
    Cache,
    CacheSyncTimeoutError,
    FieldIndexFunc,
    Transform,
    UnindexedFieldError,
    strip_managed_fields,
)
from cronjob_operator.runtime.client import (
    Client,
    ClientInterface,
    LiveReader,
    PatchType,
    Propagation,
    Reader,
    Writer,
)
from cronjob_operator.runtime.clock import Clock, FakeClock, utc_now
from cronjob_operator.runtime.conditions import (
    condition_setter,
    find_condition,
    parse_time,
    rfc3339,
    set_condition,
)
from cronjob_operator.runtime.context import Context
from cronjob_operator.runtime.controller import Controller, ControllerOptions
from cronjob_operator.runtime.controllerutil import (
    AlreadyOwnedError,
    OperationResult,
    controller_reference,
    create_or_patch,
    create_or_update,
    is_controlled_by,
    set_controller_reference,
)
from cronjob_operator.runtime.errors import (
    AlreadyExists,
    ApiError,
    BadRequest,
    Conflict,
    DeadlineExceeded,
    Forbidden,
    Gone,
    Invalid,
    NotFound,
    ServerError,
    TooManyRequests,
    TransportError,
    Unauthorized,
)
from cronjob_operator.runtime.events import NORMAL, WARNING, EventRecorder, Recorder
from cronjob_operator.runtime.handlers import MapFunc, for_object, for_owner
from cronjob_operator.runtime.kinds import (
    CONFIG_MAP,
    DEPLOYMENT,
    EVENT,
    JOB,
    LEASE,
    NAMESPACE,
    POD,
    REPLICA_SET,
    SECRET,
    Kind,
)
from cronjob_operator.runtime.leaderelection import LeaderElectionConfig
from cronjob_operator.runtime.manager import Manager, Options
from cronjob_operator.runtime.metrics import Metrics
from cronjob_operator.runtime.objects import (
    Obj,
    controller_ref,
    freeze,
    name_of,
    namespace_of,
    object_key,
    thaw,
)
from cronjob_operator.runtime.predicates import (
    Predicate,
    and_,
    annotations_changed,
    generation_changed,
    labels_changed,
    not_,
    or_,
    resource_version_changed,
)
from cronjob_operator.runtime.reconcile import Reconciler, Request, Result, TerminalError
from cronjob_operator.runtime.runnable import Runnable
from cronjob_operator.runtime.selfsigned import SelfSignedError
from cronjob_operator.runtime.status import merge_status, write_status

__all__ = [
    "CONFIG_MAP",
    "DEPLOYMENT",
    "EVENT",
    "JOB",
    "LEASE",
    "NAMESPACE",
    "NORMAL",
    "POD",
    "REPLICA_SET",
    "SECRET",
    "WARNING",
    "AlreadyExists",
    "AlreadyOwnedError",
    "ApiError",
    "BadRequest",
    "Builder",
    "Cache",
    "CacheSyncTimeoutError",
    "Client",
    "ClientInterface",
    "Clock",
    "Conflict",
    "Context",
    "Controller",
    "ControllerHost",
    "ControllerOptions",
    "DeadlineExceeded",
    "EventRecorder",
    "FakeClock",
    "FieldIndexFunc",
    "Forbidden",
    "Gone",
    "Invalid",
    "Kind",
    "LeaderElectionConfig",
    "LiveReader",
    "Manager",
    "MapFunc",
    "Metrics",
    "NotFound",
    "Obj",
    "OperationResult",
    "Options",
    "PatchType",
    "Predicate",
    "Propagation",
    "Reader",
    "Reconciler",
    "Recorder",
    "Request",
    "RestClient",
    "Result",
    "Runnable",
    "SelfSignedError",
    "ServerError",
    "TerminalError",
    "TokenBucket",
    "TooManyRequests",
    "Transform",
    "TransportError",
    "Unauthorized",
    "UnindexedFieldError",
    "Writer",
    "and_",
    "annotations_changed",
    "condition_setter",
    "context",
    "controller_ref",
    "controller_reference",
    "create_or_patch",
    "create_or_update",
    "find_condition",
    "for_object",
    "for_owner",
    "freeze",
    "generation_changed",
    "is_controlled_by",
    "labels_changed",
    "load_configuration",
    "merge_status",
    "name_of",
    "namespace_of",
    "not_",
    "object_key",
    "or_",
    "parse_time",
    "resource_version_changed",
    "rfc3339",
    "set_condition",
    "set_controller_reference",
    "strip_managed_fields",
    "thaw",
    "utc_now",
    "write_status",
]
