"""The manager: owns the cache, client, event recorder, metrics and every Runnable's lifecycle.

Everything the manager runs is a ``Runnable`` (see ``runnable``): the cache and the
event recorder (added by the manager itself), each controller (added by the builder),
the probe and metrics servers (built from ``Options`` when ``run`` starts) and whatever
the application adds with ``add`` (a webhook server, say). ``Manager.run`` is the
process's main loop, as controller-runtime's ``mgr.Start``:

1. run every runnable that does not need the lease, each on its own thread: the probe
   and metrics servers first (metrics over HTTPS with authn/authz when
   ``metrics_secure``: see ``serving.MetricsAuthorizer``), then the others in the order they were
   added (the cache lists and watches on followers too: a warm standby);
2. with leader election, block until this process holds the Lease; without it, go on;
3. wait for the caches to sync (a timeout is logged with the kinds and the last error,
   e.g. a 403 naming the missing verb, and readiness stays false; the manager keeps
   waiting instead of crash-looping), then run the runnables that need the lease;
4. on SIGTERM/SIGINT: fail /readyz and call the ``on_shutdown`` hooks (the webhook
   server closes each connection after its answer), keep everything running for
   ``shutdown_delay`` so a Service stops sending this replica requests, then stop the
   leader runnables (controllers stop intake and let
   in-flight reconciles finish, within the graceful shutdown timeout), then cancel the
   leader context (a reconcile still running past the timeout fails its next REST
   call), flush the event recorder, release the Lease, stop the other runnables in
   reverse order, exit 0.

Each manager has its own ``Metrics`` registry (its REST client, controllers and
elector count into it, and its /metrics serves it), so two managers in one process
never share a counter.

A runnable that raises stops the manager (``run`` returns 1). Losing the Lease stops
everything at once, as controller-runtime's ``OnStoppedLeading`` (graceful shutdown
timeout 0): the leader context is cancelled, so every REST call of a reconcile in
flight fails from then on, nothing is drained or awaited, and ``run`` returns 1; the
orchestrator restarts the process as a follower.

With leader election, the client that controllers and the event recorder write
through is fenced by the elector's ``write_refusal``: a write is refused inside the
process, before it is sent, once the Lease may have expired by our own clock, even in
the instant before the elector notices. The elector and the event recorder each have
their own REST client (``RestClient.for_component``): their own token bucket, so a busy
controller never delays a renewal. So has the metrics authorizer, with its own rate
(``Options.metrics_review_limits``), so a flood of tokens on /metrics never takes the
controllers' tokens.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from cronjob_operator.runtime import context, objects
from cronjob_operator.runtime.cache import Cache, CacheSyncTimeoutError, KindOptions, Transform
from cronjob_operator.runtime.client import Client, RestClient, Writer
from cronjob_operator.runtime.controller import (
    Builder,
    Controller,
    ControllerOptions,
    RetryLimits,
)
from cronjob_operator.runtime.events import EventRecorder
from cronjob_operator.runtime.kinds import Kind
from cronjob_operator.runtime.leaderelection import LeaderElectionConfig, LeaderElector
from cronjob_operator.runtime.metrics import Metrics
from cronjob_operator.runtime.runnable import Runnable
from cronjob_operator.runtime.serving import (
    ApiReviewer,
    CertWatcher,
    Check,
    HttpServer,
    MetricsAuthorizer,
    ReviewLimits,
    TLSContext,
    parse_address,
    self_signed_context,
)

log = logging.getLogger(__name__)

_MIN_STOP_WAIT = 5.0
"""How long each non-leader runnable gets to stop even when the controllers used the grace."""
SKIPPED_REASON = "NotCached"
"""The reason of the Warning event on an object the cache cannot decode and skips."""


@dataclass(frozen=True, slots=True)
class Options:
    """What a manager does; the CLI fills this from flags."""

    namespace: str | None = None
    leader_election: LeaderElectionConfig | None = None
    metrics_bind_address: str = "0"
    metrics_secure: bool = False
    """HTTPS metrics with TokenReview/SubjectAccessReview (the CLI's default is on)."""
    metrics_cert_dir: str | None = None
    """tls.crt/tls.key for secure metrics, reloaded on change; None: self-signed."""
    metrics_review_limits: ReviewLimits = field(default_factory=ReviewLimits)
    """What reviewing the tokens of metrics requests may cost (its own client budget)."""
    health_probe_bind_address: str = ":8081"
    graceful_shutdown_timeout: float = 30.0
    cache_sync_timeout: float = 120.0
    max_concurrent_reconciles: int = 1
    reconcile_timeout: float | None = None
    """A deadline for each reconcile's REST calls (None: only the client's retry budget)."""
    retry_limits: RetryLimits = field(default_factory=RetryLimits)
    """How fast every controller retries failed requests (controller-runtime's defaults)."""
    component: str = "controller-manager"
    """The event source (``reportingComponent``); an application passes its own name."""
    shutdown_delay: float = 0.0
    """Seconds between SIGTERM and the start of the shutdown, with /readyz failing and
    everything still running: time for a Service to stop sending this replica requests
    (its webhooks) before its servers close."""


class Manager:
    """Runs Runnables over a shared cache; see the module docstring for the sequence."""

    def __init__(
        self,
        rest: RestClient,
        options: Options | None = None,
        *,
        transforms: Mapping[Kind, Transform] | None = None,
        kind_options: Mapping[Kind, KindOptions] | None = None,
    ) -> None:
        """``transforms`` and ``kind_options`` say what the cache keeps of each kind
        (``cache.KindOptions``; a transform given both ways is the ``transforms`` one)."""
        self.options = options or Options()
        self.metrics = Metrics()
        self.rest = rest.with_metrics(self.metrics)
        self.cache = Cache(
            self.rest,
            namespace=self.options.namespace,
            transforms=transforms,
            kind_options=kind_options,
            sync_timeout=self.options.cache_sync_timeout,
            metrics=self.metrics,
            on_skip=self._report_skipped,
        )
        self.elector = self._build_elector()
        leader_rest = self.rest.fenced(self._write_refusal)
        self.client = Client(leader_rest, self.cache)
        self.recorder = EventRecorder(
            Writer(leader_rest.for_component("events")), component=self.options.component
        )
        self._runnables: list[Runnable] = [self.cache, self.recorder]
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._stop_leaders = threading.Event()
        self._release_lease = threading.Event()
        self._lost_lease = threading.Event()
        self._failed = threading.Event()
        self._leader_context = context.Context()
        self._leader_threads: list[tuple[threading.Thread, threading.Event]] = []
        self._health: dict[str, Check] = {"ping": lambda: None}
        self._ready: dict[str, Check] = {
            "shutdown": self._not_shutting_down,
            "cache-sync": self._cache_ready,
        }
        self._shutting_down = threading.Event()
        self._shutdown_hooks: list[Callable[[], None]] = []
        self._servers: list[HttpServer] = []

    @property
    def leader_context(self) -> context.Context:
        """What every reconcile runs under: cancelled when the Lease is lost, or when
        the graceful shutdown timeout has passed."""
        return self._leader_context

    @property
    def controller_options(self) -> ControllerOptions:
        """What every controller built on this manager gets unless its builder says else."""
        return ControllerOptions(
            max_concurrent_reconciles=self.options.max_concurrent_reconciles,
            drain_timeout=self.options.graceful_shutdown_timeout,
            reconcile_timeout=self.options.reconcile_timeout,
            base_context=self._leader_context,
            retry_limits=self.options.retry_limits,
        )

    def builder(self, name: str) -> Builder:
        """Start declaring a controller named ``name``."""
        return Builder(self, name)

    def add(self, runnable: Runnable) -> None:
        """Run ``runnable`` with the manager (call before ``run``)."""
        self._runnables.append(runnable)

    def add_controller(self, controller: Controller) -> None:
        """Register a controller (the builder does this); it is a leader runnable."""
        self.add(controller)

    def add_health_check(self, name: str, check: Check) -> None:
        """Add a named /healthz check."""
        self._health[name] = check

    def add_ready_check(self, name: str, check: Check) -> None:
        """Add a named /readyz check."""
        self._ready[name] = check

    @property
    def servers(self) -> list[HttpServer]:
        """The HTTP servers (probes first, then metrics when separate), once ``run`` began."""
        return list(self._servers)

    def stop(self) -> None:
        """Ask ``run`` to shut down gracefully (what SIGTERM does)."""
        self._stop.set()

    def run(self, *, install_signal_handlers: bool = True) -> int:
        """Run until stopped; exit code 0, or 1 if the Lease was lost or a runnable failed."""
        if install_signal_handlers:
            self._install_signal_handlers()
        self._servers = self._build_servers()
        others = [*self._servers, *(r for r in self._runnables if not r.needs_leader_election)]
        started = [self._spawn(runnable, threading.Event()) for runnable in others]
        leader_thread = self._start_leader_election()
        if self.elector is None:
            # On a thread, as with a Lease: a SIGTERM must not wait for a cache that cannot sync.
            self._on_started_leading()
        self._stop.wait()
        self._delay_shutdown()
        return self._shutdown(leader_thread, started)

    def on_shutdown(self, hook: Callable[[], None]) -> None:
        """Call ``hook`` when a shutdown begins, before the ``shutdown_delay`` (a server
        that should stop keeping connections alive)."""
        self._shutdown_hooks.append(hook)

    def _delay_shutdown(self) -> None:
        """Fail readiness, then keep serving for ``shutdown_delay`` (not after a lost Lease)."""
        self._shutting_down.set()
        for hook in self._shutdown_hooks:
            hook()
        if self.options.shutdown_delay and not self._lost_lease.is_set():
            log.info("not ready; shutting down in %gs", self.options.shutdown_delay)
            self._lost_lease.wait(self.options.shutdown_delay)

    def _not_shutting_down(self) -> str | None:
        return "shutting down" if self._shutting_down.is_set() else None

    def _spawn(
        self, runnable: Runnable, stop: threading.Event
    ) -> tuple[threading.Thread, threading.Event]:
        def target() -> None:
            try:
                runnable.run(stop)
            except Exception:
                log.exception("runnable %r failed; stopping the manager", runnable)
                self._failed.set()
                self._stop.set()

        name = f"runnable-{type(runnable).__name__}-{getattr(runnable, 'name', id(runnable))}"
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        return thread, stop

    def _report_skipped(self, reference: objects.Obj, error: Exception) -> None:
        """A Warning event on an object the cache skipped: its owner reads why nothing
        reconciles it (the log and ``informer_objects_skipped_total`` tell the operator)."""
        self.recorder.event(
            reference,
            "Warning",
            SKIPPED_REASON,
            f"cronjob-operator cannot cache this object and ignores it until it changes "
            f"({type(error).__name__}: {str(error)[:200]}); fix or simplify it",
        )

    def _cache_ready(self) -> str | None:
        if self.cache.synced:
            return None
        return "informer caches have not synced"

    def _install_signal_handlers(self) -> None:
        def handle(signum: int, _frame: FrameType | None) -> None:
            log.info("received %s, shutting down", signal.Signals(signum).name)
            self._stop.set()

        signal.signal(signal.SIGTERM, handle)
        signal.signal(signal.SIGINT, handle)

    def _build_servers(self) -> list[HttpServer]:
        probe = parse_address(self.options.health_probe_bind_address)
        metrics_address = parse_address(self.options.metrics_bind_address)
        servers: list[HttpServer] = []
        if probe is not None:
            servers.append(
                HttpServer(
                    probe,
                    health=self._health,
                    ready=self._ready,
                    serve_metrics=metrics_address == probe,
                    registry=self.metrics.registry,
                )
            )
        if self.options.metrics_secure and metrics_address is not None and metrics_address == probe:
            raise ValueError(
                "secure metrics need their own address: set metrics_bind_address "
                f"({self.options.metrics_bind_address}) apart from the probes' port"
            )
        if metrics_address is not None and metrics_address != probe:
            servers.append(self._metrics_server(metrics_address))
        return servers

    def _metrics_server(self, address: tuple[str, int]) -> HttpServer:
        """The metrics server, serving this manager's own registry; with ``metrics_secure``
        over HTTPS, each request authenticated and authorized against the API server."""
        registry = self.metrics.registry
        if not self.options.metrics_secure:
            return HttpServer(address, serve_metrics=True, registry=registry)
        tls: TLSContext
        if self.options.metrics_cert_dir:
            tls = CertWatcher(Path(self.options.metrics_cert_dir), purpose="metrics").context
        else:
            context = self_signed_context()
            tls = lambda: context  # noqa: E731
        authorize = self._metrics_authorizer().check
        return HttpServer(
            address, serve_metrics=True, registry=registry, tls=tls, authorize=authorize
        )

    def _metrics_authorizer(self) -> MetricsAuthorizer:
        """The authorizer of metrics requests, reviewing through a client of its own: its
        own token bucket (``Options.metrics_review_limits``), never the controllers'."""
        limits = self.options.metrics_review_limits
        reviews = self.rest.for_component("metrics-auth", rate_limiter=limits.bucket())
        return MetricsAuthorizer(ApiReviewer(reviews), limits=limits, metrics=self.metrics)

    def _build_elector(self) -> LeaderElector | None:
        config = self.options.leader_election
        if config is None:
            return None
        return LeaderElector(
            self.rest.for_component("leader-election"),
            config,
            on_started_leading=self._on_started_leading,
            on_stopped_leading=self._on_stopped_leading,
            metrics=self.metrics,
        )

    def _write_refusal(self) -> str | None:
        """The fence of controller and event writes: the elector's (none without one)."""
        return None if self.elector is None else self.elector.write_refusal()

    def _start_leader_election(self) -> threading.Thread | None:
        if self.elector is None:
            return None
        thread = threading.Thread(
            target=self.elector.run,
            args=(self._release_lease,),
            name="leader-election",
            daemon=True,
        )
        thread.start()
        return thread

    def _on_started_leading(self) -> None:
        threading.Thread(
            target=self._start_leader_runnables, name="start-leader-runnables", daemon=True
        ).start()

    def _on_stopped_leading(self) -> None:
        if self._release_lease.is_set():
            return  # the end of a graceful shutdown: we released the Lease ourselves
        log.error("lost the leader election lease; stopping at once, without draining")
        self._lost_lease.set()
        self._leader_context.stop.set()
        self._stop.set()

    def _start_leader_runnables(self) -> None:
        while not self._stop.is_set():
            try:
                self.cache.wait_for_sync()
                break
            except CacheSyncTimeoutError as exc:
                log.error("%s; not ready, still waiting", exc)
        leaders = [r for r in self._runnables if r.needs_leader_election]
        with self._lock:
            if self._stop.is_set():
                return
            self._leader_threads = [self._spawn(r, self._stop_leaders) for r in leaders]
        names = sorted(str(getattr(r, "name", r)) for r in leaders)
        log.info("leader runnables started", extra={"runnables": names})

    def _shutdown(
        self,
        leader_thread: threading.Thread | None,
        others: list[tuple[threading.Thread, threading.Event]],
    ) -> int:
        if self._lost_lease.is_set():
            return self._abandon(others)
        timeout = self.options.graceful_shutdown_timeout
        deadline = time.monotonic() + timeout
        with self._lock:
            leader_threads = [thread for thread, _ in self._leader_threads]
        self._stop_leaders.set()
        for thread in leader_threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        if any(thread.is_alive() for thread in leader_threads):
            log.warning("leader runnables did not stop within %.0fs; cancelling them", timeout)
        self._leader_context.stop.set()
        self.recorder.stop(max(_MIN_STOP_WAIT, deadline - time.monotonic()))  # still the leader
        self._release_lease.set()  # only now: never a second leader while we still reconcile
        if leader_thread is not None:
            leader_thread.join(timeout)
        for thread, stop in reversed(others):  # one at a time: the reverse of the start order
            stop.set()
            thread.join(max(_MIN_STOP_WAIT, deadline - time.monotonic()))
        log.info("manager stopped")
        return 1 if self._lost_lease.is_set() or self._failed.is_set() else 0

    def _abandon(self, others: list[tuple[threading.Thread, threading.Event]]) -> int:
        """The lost-Lease exit: signal every runnable to stop and wait for none of them.

        controller-runtime sets the graceful shutdown timeout to 0 here; the leader
        context is already cancelled and the fence refuses every write, so what is still
        running (a reconcile blocked in a call, the event recorder's queue) can do nothing.
        """
        self._stop_leaders.set()
        self._release_lease.set()
        for _, stop in others:
            stop.set()
        log.info("manager stopped without draining: the Lease was lost")
        return 1
