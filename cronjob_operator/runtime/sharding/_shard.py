"""One member of a shard group: its own Lease, its fence, and the controllers it runs.

A ``Shard`` is a manager Runnable on every replica (it does not need the leader Lease).
It stands in for the manager as the ``ControllerHost`` of the sharded controllers: a
builder given the shard registers its controller here, and the shard starts it once
it holds its own Lease and the caches have synced. ``run``:

1. creates the member's Lease (named after the member, labelled with the group, the
   member already its holder, so the assigner sees it live from the first read), then
   keeps it with the leader elector's loop (``LeaderElector`` on that Lease);
2. once held and synced, starts the controllers (their reconciles under the shard's
   context) and the shard's event recorder;
3. on ``stop`` (SIGTERM): stops the controllers, letting in-flight reconciles finish,
   then releases the Lease: the assigner moves the objects only once it sees the
   release, so they are never reconciled here and elsewhere at once;
4. on losing the Lease (a renewal failed past the renew deadline, or the assigner took
   it over): cancels the shard's context at once and raises ``ShardLeaseLost``, which
   stops the manager (exit 1), as losing the leader Lease does.

Writes of the sharded controllers go through ``client`` and ``recorder`` (user agent
``.../shard`` and ``.../shard/events``, a token bucket of their own), fenced by the
member Lease's ``write_refusal``: refused before they are sent once ``renew_deadline``
has passed since the last successful renewal began, before the assigner (which waits
``lease_duration`` on its own clock) can have taken the Lease over.

Owned objects: the informers of the owned kinds select the buckets of the member's share
(``_selection``), and follow it as CronJobs come and go; an object whose bucket the
cache does not hold yet is not reconciled, and is enqueued once it does.

Drains: every controller the shard runs first asks ``DrainAcknowledger``. An object
carrying the drain label is not reconciled; instead its shard and drain labels are
removed (and the member recorded in the previous-shard annotation) with the
resourceVersion read: the acknowledgement. The work queue never runs two reconciles of
one key at once, so the acknowledgement is sent only after the reconcile in flight for
that object has returned; after it, the object leaves this member's cache (it no
longer matches the label selector) and every later request for it finds nothing.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Iterable
from datetime import UTC, datetime

from cronjob_operator.runtime import context, errors, kinds, objects
from cronjob_operator.runtime.cache import Cache, CacheSyncTimeoutError
from cronjob_operator.runtime.client import Client, ObjectWriter, Reader, RestClient, Writer
from cronjob_operator.runtime.controller import (
    Builder,
    Controller,
    ControllerOptions,
    Reconciler,
    Request,
    Result,
)
from cronjob_operator.runtime.events import EventRecorder
from cronjob_operator.runtime.kinds import Kind
from cronjob_operator.runtime.leaderelection import LeaderElector, acquired_record, lease_spec
from cronjob_operator.runtime.metrics import Metrics
from cronjob_operator.runtime.sharding._config import ShardingConfig
from cronjob_operator.runtime.sharding._labels import (
    DRAIN_LABEL,
    GROUP_LABEL,
    PREVIOUS_ANNOTATION,
    SHARD_LABEL,
    bucket_of_object,
    labels_of,
    shard_selector,
)
from cronjob_operator.runtime.sharding._metrics import ShardingMetrics
from cronjob_operator.runtime.sharding._selection import OwnedSelection

log = logging.getLogger(__name__)

_POLL = 0.5
"""How often the shard looks at its Lease state and refreshes its owned-objects gauge."""


class ShardLeaseLost(RuntimeError):
    """This member's Lease was lost: the manager stops, the orchestrator restarts it."""


def _always_ready(obj: objects.Obj) -> bool:
    return True


class DrainAcknowledger:
    """A reconciler that acknowledges drains, holds back objects whose owned objects the
    cache does not hold yet (``ready``), and hands everything else to ``inner``."""

    def __init__(
        self,
        inner: Reconciler,
        *,
        kind: Kind,
        reader: Reader,
        writer: ObjectWriter,
        member: str,
        ready: Callable[[objects.Obj], bool] = _always_ready,
    ) -> None:
        self.inner = inner
        self._kind = kind
        self._reader = reader
        self._writer = writer
        self._member = member
        self._ready = ready

    def reconcile(self, request: Request) -> Result:
        try:
            obj = self._reader.get(self._kind, request.name, request.namespace)
        except errors.NotFound:
            return self.inner.reconcile(request)  # gone, or moved: the reconciler forgets it
        if DRAIN_LABEL in labels_of(obj):
            self._acknowledge(obj)
            return Result()
        if not self._ready(obj):
            # The member enqueues it again once its bucket has synced: no requeue here.
            log.debug("owned objects not cached yet; waiting", extra={"object": str(request)})
            return Result()
        return self.inner.reconcile(request)

    def _acknowledge(self, obj: objects.Obj) -> None:
        """Give the object up; a Conflict (it changed) is retried from the newer version."""
        metadata = obj["metadata"]
        patch = {
            "metadata": {
                "resourceVersion": metadata.get("resourceVersion"),
                "labels": {SHARD_LABEL: None, DRAIN_LABEL: None},
                "annotations": {PREVIOUS_ANNOTATION: self._member},
            }
        }
        self._writer.patch(self._kind, metadata["name"], patch, namespace=metadata.get("namespace"))
        log.info(
            "acknowledged drain",
            extra={
                "shard": self._member,
                "object": f"{metadata.get('namespace')}/{metadata['name']}",
            },
        )


class Shard:
    """A member of a shard group, and the host of its controllers (module doc)."""

    def __init__(
        self,
        rest: RestClient,
        cache: Cache,
        config: ShardingConfig,
        *,
        member: str,
        metrics: Metrics,
        sharding_metrics: ShardingMetrics,
        controller_options: ControllerOptions,
        component: str,
    ) -> None:
        self.name = member
        self.config = config
        self._rest = rest
        self._cache = cache
        self._metrics = metrics
        self._owned_gauge = sharding_metrics.owned.labels(config.group, member)
        self._context = context.Context()
        self._controller_options = dataclasses.replace(
            controller_options, base_context=self._context
        )
        self._acquired = threading.Event()
        self._lost = threading.Event()
        self._elector = LeaderElector(
            rest.for_component("shard-lease"),
            config.member_lease(member),
            on_started_leading=self._acquired.set,
            on_stopped_leading=self._lost.set,
            # Its own registry, never served: leader_election_master_status counts the
            # leader Lease only (the dashboards and alerts sum it to 1).
            metrics=Metrics(),
        )
        fenced = rest.for_component("shard").fenced(self._elector.write_refusal)
        self.client = Client(fenced, cache)
        self.recorder = EventRecorder(
            Writer(fenced.for_component("events")), component=component, host=member
        )
        self._controllers: list[Controller] = []
        self.selection = OwnedSelection(cache, config.kind, config.owned)

    @property
    def selector(self) -> str:
        """The label selector of this member's informer of the sharded kind."""
        return shard_selector(self.name)

    @property
    def owned_selector(self) -> str:
        """The label selector of this member's owned-object informers, at first."""
        return self.selection.selector

    @property
    def cache(self) -> Cache:
        return self._cache

    @property
    def metrics(self) -> Metrics:
        return self._metrics

    @property
    def controller_options(self) -> ControllerOptions:
        return self._controller_options

    def builder(self, name: str) -> Builder:
        """Declare a controller this member runs for its share."""
        return Builder(self, name)

    def add_controller(self, controller: Controller) -> None:
        """Run ``controller`` on this member, acknowledging drains before it reconciles."""
        controller.reconciler = DrainAcknowledger(
            controller.reconciler,
            kind=self.config.kind,
            reader=self._cache,
            writer=self.client,
            member=self.name,
            ready=self.selection.ready,
        )
        self._controllers.append(controller)

    def write_refusal(self) -> str | None:
        """Why a write for this member's objects must not be sent now, or None."""
        return self._elector.write_refusal()

    needs_leader_election = False
    """Every replica is a member."""

    def run(self, stop: threading.Event) -> None:
        """Hold the Lease and run the controllers until ``stop`` (module doc)."""
        release = threading.Event()
        self._create_lease(stop)
        elector = threading.Thread(
            target=self._elector.run, args=(release,), name=f"shard-lease-{self.name}", daemon=True
        )
        elector.start()
        try:
            if self._wait_until_held(stop) and self._wait_for_sync(stop):
                self._start()
                self._watch(stop)
        finally:
            self._finish(release, elector)

    def _create_lease(self, stop: threading.Event) -> None:
        record = acquired_record(
            None,
            identity=self.name,
            lease_duration_seconds=int(self.config.lease_duration),
            now=datetime.now(UTC),
        )
        body = {
            "apiVersion": kinds.LEASE.api_version,
            "kind": kinds.LEASE.kind,
            "metadata": {
                "name": self.name,
                "namespace": self.config.namespace,
                "labels": {GROUP_LABEL: self.config.group},
            },
            "spec": lease_spec(record),
        }
        writer = Writer(self._rest.for_component("shard-lease"))
        while not stop.is_set():
            try:
                writer.create(kinds.LEASE, body)
            except errors.AlreadyExists:
                pass  # our own create, whose answer a retry did not get
            except (errors.ApiError, errors.TransportError) as exc:
                log.warning("cannot create the Lease of shard %s, retrying: %s", self.name, exc)
                stop.wait(self.config.retry_period)
                continue
            log.info("joined shard group", extra={"group": self.config.group, "shard": self.name})
            return

    def _wait_until_held(self, stop: threading.Event) -> bool:
        while not (stop.is_set() or self._lost.is_set()):
            if self._acquired.wait(_POLL):
                return True
        return False

    def _wait_for_sync(self, stop: threading.Event) -> bool:
        while not (stop.is_set() or self._lost.is_set()):
            try:
                self._cache.wait_for_sync()
                return True
            except CacheSyncTimeoutError as exc:
                log.error("%s; shard not started, still waiting", exc)
        return False

    def _start(self) -> None:
        self.recorder.start()
        for controller in self._controllers:
            controller.start()
        log.info("shard started", extra={"shard": self.name, "controllers": len(self._controllers)})

    def _watch(self, stop: threading.Event) -> None:
        informer = self._cache.informer(self.config.kind)
        while not stop.wait(_POLL):
            share = informer.store.list()
            self._owned_gauge.set(len(share))
            if self._lost.is_set():
                return
            ready = self.selection.follow()
            if ready:
                self._enqueue(obj for obj in share if bucket_of_object(obj) in ready)

    def _enqueue(self, share: Iterable[objects.Obj]) -> None:
        """Reconcile these objects of the share (their owned objects are cached now)."""
        requests = [Request(objects.namespace_of(obj) or "", objects.name_of(obj)) for obj in share]
        for controller in self._controllers:
            for request in requests:
                controller.queue.add(request)

    def _finish(self, release: threading.Event, elector: threading.Thread) -> None:
        if self._lost.is_set():
            self._context.stop.set()  # every REST call of a reconcile in flight fails now
            for controller in self._controllers:
                controller.stop(0)
            raise ShardLeaseLost(f"lost the Lease of shard {self.name}; stopping at once")
        for controller in self._controllers:
            if not controller.stop(controller.drain_timeout):
                log.warning("controller %s did not drain; cancelling it", controller.name)
        self._context.stop.set()
        self.recorder.stop()
        release.set()  # only now: the assigner moves our objects once it sees the release
        elector.join(self.config.renew_deadline + 1)
        log.info("left shard group", extra={"group": self.config.group, "shard": self.name})
