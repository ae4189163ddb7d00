"""Shared helpers for tests that run our manager against the local control plane.

``install_crds`` applies config/crd and waits until the API server serves the kinds;
``conversion_patches`` switch the CronJob CRD to a conversion webhook and back;
``running_manager`` runs a ``Manager`` in a background thread for the length of a
``with`` block (controllers chosen by the caller, clock injectable) and stops it
gracefully at the end. Tests move time with the runtime's ``FakeClock``, so schedule
decisions never depend on the wall clock. ``RunningManager.kick_and_wait`` is how a test
waits for "the reconcile after my action": every reconciler is wrapped in a
``ReconcileWitness`` that numbers reconcile starts per request, so the wait ends only when
a reconcile that started after the call has finished, never on a state an earlier
reconcile already produced. ``RunningManager.settle`` is how a test waits for
quiescence before measuring a quiet window: the controller has observed the API
server's current version of each object (its own last write included), then its event
handlers have passed on every event the cache holds (the store is updated before a
handler's thread sees the event), and it has nothing queued and nothing running; an
empty queue alone is not quiet while the watch event of the controller's own write is
still on its way. ``RunningManager.events`` notes every
event a reconciler asks the recorder for, before the recorder's thread posts it (or the
API server refuses it), so a test can say what the controller reported and when.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cronjob_operator.api import batch_v1, batch_v2, crdgen
from cronjob_operator.envtest import ControlPlane, wait_for
from cronjob_operator.runtime import objects
from cronjob_operator.runtime.client import RestClient, load_configuration
from cronjob_operator.runtime.controller import Controller, Reconciler, Request, Result
from cronjob_operator.runtime.events import Recorder
from cronjob_operator.runtime.kinds import Kind
from cronjob_operator.runtime.manager import Manager, Options

REPO = Path(__file__).resolve().parents[2]
CRD_NAMES = (
    "cronjobs.batch.tutorial.kubebuilder.io",
    "configdeployments.apps.tutorial.kubebuilder.io",
    "concurrencygroups.batch.tutorial.kubebuilder.io",
)


def install_crds(control_plane: ControlPlane) -> None:
    """Apply config/crd (idempotent) and wait until every CRD is established."""
    result = control_plane.kubectl("apply", "-k", str(REPO / "config" / "crd"))
    assert result.returncode == 0, result.stderr
    for name in CRD_NAMES:
        wait_for(
            lambda n=name: (
                control_plane.kubectl(  # type: ignore[misc]
                    "wait", "--for=condition=Established", f"crd/{n}", "--timeout=10s"
                ).returncode
                == 0
            ),
            60,
            message=f"CRD {name} established",
        )


class ReconcileWitness:
    """Wraps a reconciler; counts, per request, the reconciles started and finished."""

    def __init__(self, inner: Reconciler) -> None:
        self.inner = inner
        self._lock = threading.Lock()
        self._started: dict[Request, int] = {}
        self._finished_from: dict[Request, int] = {}
        """The start number of the latest finished reconcile of each request."""
        self._running = 0

    @property
    def running(self) -> int:
        """How many reconciles are running now."""
        with self._lock:
            return self._running

    def reconcile(self, request: Request) -> Result:
        with self._lock:
            number = self._started.get(request, 0) + 1
            self._started[request] = number
            self._running += 1
        try:
            return self.inner.reconcile(request)
        finally:
            with self._lock:
                latest = self._finished_from.get(request, 0)
                self._finished_from[request] = max(latest, number)
                self._running -= 1

    def started(self, request: Request) -> int:
        with self._lock:
            return self._started.get(request, 0)

    def finished_since(self, request: Request, started_before: int) -> bool:
        """Whether a reconcile that started after ``started_before`` starts has finished."""
        with self._lock:
            return self._finished_from.get(request, 0) > started_before


class EventSpy:
    """Wraps the manager's recorder; notes (object name, type, reason) of every event."""

    def __init__(self, inner: Recorder) -> None:
        self.inner = inner
        self._lock = threading.Lock()
        self._asked: list[tuple[str, str, str]] = []

    def event(self, obj: objects.Obj, type_: str, reason: str, message: str) -> None:
        with self._lock:
            self._asked.append((objects.name_of(obj), type_, reason))
        self.inner.event(obj, type_, reason, message)

    def __getattr__(self, name: str) -> Any:
        """Everything else (``start``, ``stop``, ``flush``) is the wrapped recorder's."""
        return getattr(self.inner, name)

    def asked(self) -> list[tuple[str, str, str]]:
        """Every (object name, type, reason) asked for so far, in order."""
        with self._lock:
            return list(self._asked)


def spy_on_events(manager: Manager) -> EventSpy:
    """Put an ``EventSpy`` in front of the manager's recorder; call it before the
    controllers' setup functions read the recorder."""
    events = EventSpy(manager.recorder)
    manager.recorder = events  # type: ignore[assignment]
    return events


@dataclass
class RunningManager:
    """A manager running in a thread, and the controllers the setup functions returned."""

    manager: Manager
    controllers: dict[str, Controller]
    thread: threading.Thread
    events: EventSpy

    def kick(self, controller: str, namespace: str, name: str) -> None:
        """Enqueue a reconcile now (after moving a fake clock, say)."""
        self.controllers[controller].queue.add(Request(namespace, name))

    def kick_and_wait(
        self, controller: str, namespace: str, name: str, timeout: float = 30.0
    ) -> None:
        """Enqueue a reconcile and block until one that started after this call finished
        (whatever its outcome); raises ``TimeoutError`` after ``timeout`` seconds."""
        witness = self.controllers[controller].reconciler
        assert isinstance(witness, ReconcileWitness), "running_manager wraps every reconciler"
        request = Request(namespace, name)
        before = witness.started(request)
        self.kick(controller, namespace, name)
        wait_for(
            lambda: witness.finished_since(request, before),
            timeout,
            message=f"a {controller} reconcile of {namespace}/{name} after the kick",
        )

    def settle(
        self,
        controller: str,
        kind: Kind,
        stored: Callable[[], Mapping[tuple[str, str], str]],
        timeout: float = 60.0,
    ) -> None:
        """Wait until ``controller`` is quiet about the objects ``stored`` returns
        ((namespace, name) -> the resourceVersion the API server has now): first its
        cache holds each at that version (so the watch event of its own last write has
        arrived; a write meanwhile changes the version and the wait goes on), then its
        work queue is empty and no reconcile runs (that event's reconcile is done)."""
        cache = self.manager.cache

        def observed() -> dict[tuple[str, str], tuple[str, str]]:
            behind = {}
            for (namespace, name), version in stored().items():
                cached = cache.get(kind, name, namespace)["metadata"]["resourceVersion"]
                if cached != version:
                    behind[(namespace, name)] = (cached, version)
            return behind

        wait_for(
            lambda: not observed(),
            timeout,
            interval=0.5,
            message=f"the {controller} cache at the stored versions",
            detail=lambda: f"(cached, stored) versions that differ: {observed()}",
        )
        witness = self.controllers[controller].reconciler
        assert isinstance(witness, ReconcileWitness), "running_manager wraps every reconciler"
        queue = self.controllers[controller].queue
        informer = cache.informer(kind)

        def quiet() -> bool:
            # In this order: a handler that is done has enqueued, and an item handed to
            # a worker counts as in flight until its reconcile is done.
            return (
                informer.handlers_idle()
                and len(queue) == 0
                and queue.in_flight() == 0
                and witness.running == 0
            )

        wait_for(
            quiet,
            timeout,
            interval=0.5,
            message=f"the {controller} handlers idle, queue empty and no reconcile running",
        )


RBAC_DENIAL = re.compile(r'forbidden: User ".*" cannot')


class Denials(logging.Handler):
    """Collects every log line that reports an RBAC denial (403 "User ... cannot ...").

    Other 403s (creating in a namespace that is being deleted, left over from an earlier
    test and seen by an all-namespaces manager) are not RBAC's and are not counted.
    """

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if RBAC_DENIAL.search(message):
            self.lines.append(message)


@contextlib.contextmanager
def running_manager(
    control_plane: ControlPlane,
    setups: dict[str, Callable[[Manager], Controller]],
    *,
    namespace: str | None = None,
    options: Options | None = None,
    kubeconfig: Path | None = None,
) -> Iterator[RunningManager]:
    """Run a manager with the given controllers until the block ends, as the admin or as
    the user of ``kubeconfig`` (a ServiceAccount's token: ``token_kubeconfig``)."""
    rest = RestClient(load_configuration(str(kubeconfig or control_plane.kubeconfig)))
    manager = Manager(
        rest,
        options or Options(namespace=namespace, health_probe_bind_address="0"),
    )
    events = spy_on_events(manager)
    controllers = {name: setup(manager) for name, setup in setups.items()}
    for controller in controllers.values():
        controller.reconciler = ReconcileWitness(controller.reconciler)
    exit_codes: list[int] = []
    thread = threading.Thread(
        target=lambda: exit_codes.append(manager.run(install_signal_handlers=False)),
        name="test-manager",
        daemon=True,
    )
    thread.start()
    try:
        wait_for(
            lambda: manager.cache.synced,
            60,
            message="manager caches to sync",
        )
        yield RunningManager(manager, controllers, thread, events)
    finally:
        manager.stop()
        thread.join(60)
        rest.close()  # no idle connection left for the garbage collector to warn about
        assert not thread.is_alive(), "manager did not stop within 60s"
        assert exit_codes == [0]


def conversion_patches(client_config: dict[str, Any]) -> tuple[str, str]:
    """JSON patches (to the webhook at ``client_config``, and back) for the live CRD.

    Patches rather than ``kubectl apply``/``replace`` of the whole CRD, so the CRD's
    last-applied annotation (which ``install_crds``' ``apply -k config/crd`` relies on) is
    never touched; each patch tests that version 1 is v2 before changing it."""
    versions = (batch_v1.CRONJOB_RESOURCE, batch_v2.CRONJOB_RESOURCE)
    base = crdgen.generate_crd(*versions)
    converted = crdgen.generate_crd(*versions, conversion_client_config=client_config)
    forward = crdgen.conversion_patch(base, converted)
    back = [
        {"op": "replace", "path": "/spec/conversion", "value": {"strategy": "None"}},
        *({**op, "value": False} if op["op"] == "replace" else op for op in forward[1:]),
    ]
    return json.dumps(forward), json.dumps(back)


_SERVER_SET = ("resourceVersion", "uid", "creationTimestamp", "generation", "managedFields")
"""Metadata the API server sets; an edit does not send it back."""


def apply(control_plane: ControlPlane, obj: dict[str, Any]) -> None:
    """``kubectl apply`` one object given as a dict, as a user edits it: an object read
    from the server is sent without its resourceVersion (which would make the apply a
    Conflict whenever the controller wrote status meanwhile: a loaded CI run) or status."""
    metadata = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in _SERVER_SET}
    edit = {k: v for k, v in obj.items() if k != "status"} | {"metadata": metadata}
    result = control_plane.kubectl("apply", "-f", "-", input=json.dumps(edit))
    assert result.returncode == 0, result.stderr


def refused_by_rule(stderr: str, field: str, message: str) -> bool:
    """Whether ``stderr`` (of a refused kubectl write) shows the CRD's CEL rule on
    ``field`` refusing with ``message``. kube-apiserver 1.34 and 1.35 name the refused
    value's type before the message (``spec: Invalid value: "object": ...``); 1.36 and
    later do not (``spec: Invalid value: ...``)."""
    shown = rf'{re.escape(field)}: Invalid value: (?:"\w+": )?{re.escape(message)}'
    return re.search(shown, stderr) is not None


def policy_denying(
    name: str, namespace: str, rule: dict[str, Any], *, expression: str, message: str
) -> list[dict[str, Any]]:
    """A ValidatingAdmissionPolicy ``name`` and its binding: in ``namespace``, a request
    that ``rule`` (a ``resourceRules`` entry) matches is refused with ``message`` unless
    the CEL ``expression`` holds. A refusal from the real API server itself. Its failure
    policy is Ignore: a request in a namespace already gone (another test's, still being
    deleted) cannot be matched against the binding's namespace selector, and with Fail
    every such request would be refused too."""
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": "Ignore",
                "matchConstraints": {"resourceRules": [rule]},
                "validations": [{"expression": expression, "message": message}],
            },
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name},
            "spec": {
                "policyName": name,
                "validationActions": ["Deny"],
                "matchResources": {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
                },
            },
        },
    ]
