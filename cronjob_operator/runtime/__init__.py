"""A small controller-runtime for Python: the layer our controllers are written against.

One concept per module, as controller-runtime has one per package: ``rest`` (transport,
typed errors in ``errors``), ``reflector``/``informer``/``store``/``cache`` (the indexed
informer cache), ``client`` (cached reads, live writes), ``workqueue``, ``handlers``,
``predicates``, ``reconcile``, ``controller``, ``builder``, ``manager``,
``leaderelection``, ``events``, ``metrics``, ``serving`` (on ``httpserver``, with
``certwatcher``, ``selfsigned`` and ``metrics_auth`` for TLS and authenticated metrics)
and ``logs``. This package imports nothing from ``api``, ``controllers`` or ``cli``. The
names below are the ones controllers need; everything else is reached through its module.
"""

from cronjob_operator.runtime.builder import Builder
from cronjob_operator.runtime.cache import Cache, UnindexedFieldError
from cronjob_operator.runtime.client import Client, PatchType, Propagation
from cronjob_operator.runtime.controller import Controller
from cronjob_operator.runtime.kinds import Kind
from cronjob_operator.runtime.manager import Manager, Options
from cronjob_operator.runtime.objects import Obj, freeze, thaw
from cronjob_operator.runtime.reconcile import Reconciler, Request, Result, TerminalError
from cronjob_operator.runtime.rest import RestClient, load_configuration

__all__ = [
    "Builder",
    "Cache",
    "Client",
    "Controller",
    "Kind",
    "Manager",
    "Obj",
    "Options",
    "PatchType",
    "Propagation",
    "Reconciler",
    "Request",
    "RestClient",
    "Result",
    "TerminalError",
    "UnindexedFieldError",
    "freeze",
    "load_configuration",
    "thaw",
]
