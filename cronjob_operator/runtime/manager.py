"""The manager: owns the cache, client, event recorder, controllers and their lifecycle.

``Manager.run`` is the process's main loop, as controller-runtime's ``mgr.Start``:

1. start the probe and metrics servers and the event recorder;
2. start the cache (informers list and watch, also on followers: a warm standby);
3. with leader election, block until this process holds the Lease; without it, go on;
4. wait for the controllers' caches to sync (a timeout is logged with the kinds and
   the last error, e.g. a 403 naming the missing verb, and readiness stays false; the
   manager keeps waiting instead of crash-looping), then start the controllers;
5. on SIGTERM/SIGINT: stop intake, let in-flight reconciles finish (up to the graceful
   shutdown timeout), release the Lease, stop the cache, exit 0.

Losing the Lease stops the controllers at once and ``run`` returns 1, so two leaders
never act together; the orchestrator restarts the process as a follower.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from types import FrameType

from cronjob_operator.runtime import metrics
from cronjob_operator.runtime._reflector import Transform
from cronjob_operator.runtime._rest import RestClient
from cronjob_operator.runtime.builder import Builder
from cronjob_operator.runtime.cache import Cache, CacheSyncTimeoutError
from cronjob_operator.runtime.client import Client
from cronjob_operator.runtime.controller import Controller
from cronjob_operator.runtime.events import EventRecorder
from cronjob_operator.runtime.kinds import Kind
from cronjob_operator.runtime.leaderelection import LeaderElectionConfig, LeaderElector
from cronjob_operator.runtime.serving import Check, HttpServer, parse_address

__all__ = ["Manager", "Options"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Options:
    """What a manager does; the CLI fills this from flags."""

    namespace: str | None = None
    leader_election: LeaderElectionConfig | None = None
    metrics_bind_address: str = "0"
    health_probe_bind_address: str = ":8081"
    graceful_shutdown_timeout: float = 30.0
    cache_sync_timeout: float = 120.0
    max_concurrent_reconciles: int = 1
    component: str = "controller-manager"
    """The event source (``reportingComponent``); an application passes its own name."""


class Manager:
    """Runs controllers over a shared cache; see the module docstring for the sequence."""

    def __init__(
        self,
        rest: RestClient,
        options: Options | None = None,
        *,
        transforms: Mapping[Kind, Transform] | None = None,
    ) -> None:
        self.options = options or Options()
        self.rest = rest
        self.cache = Cache(
            rest,
            namespace=self.options.namespace,
            transforms=transforms,
            sync_timeout=self.options.cache_sync_timeout,
        )
        self.client = Client(rest, self.cache)
        self.recorder = EventRecorder(self.client, component=self.options.component)
        self._controllers: list[Controller] = []
        self._stop = threading.Event()
        self._release_lease = threading.Event()
        self._lost_lease = threading.Event()
        self._controllers_started = threading.Event()
        self._health: dict[str, Check] = {"ping": lambda: None}
        self._ready: dict[str, Check] = {"cache-sync": self._cache_ready}
        self._servers: list[HttpServer] = []
        self.elector: LeaderElector | None = None

    @property
    def max_concurrent_reconciles(self) -> int:
        """The default workers per controller (``Options.max_concurrent_reconciles``)."""
        return self.options.max_concurrent_reconciles

    def builder(self, name: str) -> Builder:
        """Start declaring a controller named ``name``."""
        return Builder(self, name)

    def add_controller(self, controller: Controller) -> None:
        """Register a controller (the builder does this)."""
        self._controllers.append(controller)

    def add_health_check(self, name: str, check: Check) -> None:
        """Add a named /healthz check."""
        self._health[name] = check

    def add_ready_check(self, name: str, check: Check) -> None:
        """Add a named /readyz check."""
        self._ready[name] = check

    @property
    def servers(self) -> list[HttpServer]:
        """The running HTTP servers (probes first, then metrics when separate)."""
        return list(self._servers)

    def stop(self) -> None:
        """Ask ``run`` to shut down gracefully (what SIGTERM does)."""
        self._stop.set()

    def run(self, *, install_signal_handlers: bool = True) -> int:
        """Run until stopped; returns the process exit code (0, or 1 if the Lease was lost)."""
        if install_signal_handlers:
            self._install_signal_handlers()
        self._start_servers()
        self.recorder.start()
        self.cache.start()
        leader_thread = self._start_leader_election()
        if self.elector is None:
            # On a thread, as with a Lease: a SIGTERM must not wait for a cache that cannot sync.
            threading.Thread(
                target=self._start_controllers, name="start-controllers", daemon=True
            ).start()
        self._stop.wait()
        return self._shutdown(leader_thread)

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

    def _start_servers(self) -> None:
        probe = parse_address(self.options.health_probe_bind_address)
        metrics_address = parse_address(self.options.metrics_bind_address)
        if probe is not None:
            self._servers.append(
                HttpServer(
                    probe,
                    health=self._health,
                    ready=self._ready,
                    serve_metrics=metrics_address == probe,
                )
            )
        if metrics_address is not None and metrics_address != probe:
            self._servers.append(HttpServer(metrics_address, serve_metrics=True))
        for server in self._servers:
            server.start()
            log.info("serving http", extra={"port": server.port})

    def _start_leader_election(self) -> threading.Thread | None:
        config = self.options.leader_election
        if config is None:
            return None
        self.elector = LeaderElector(
            self.rest,
            config,
            on_started_leading=self._on_started_leading,
            on_stopped_leading=self._on_stopped_leading,
        )
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
            target=self._start_controllers, name="start-controllers", daemon=True
        ).start()

    def _on_stopped_leading(self) -> None:
        if not self._stop.is_set():
            log.error("lost the leader election lease; stopping the controllers")
            self._lost_lease.set()
            self._stop.set()

    def _start_controllers(self) -> None:
        informers = {inf.kind: inf for c in self._controllers for inf in c.informers}
        while not self._stop.is_set():
            try:
                self.cache.wait_for_sync()
                break
            except CacheSyncTimeoutError as exc:
                log.error("%s; not ready, still waiting", exc)
        if self._stop.is_set():
            return
        for controller in self._controllers:
            controller.start()
        self._controllers_started.set()
        log.info("controllers started", extra={"kinds": sorted(str(k) for k in informers)})

    def _shutdown(self, leader_thread: threading.Thread | None) -> int:
        timeout = self.options.graceful_shutdown_timeout
        for controller in self._controllers:
            if not controller.stop(timeout):
                log.warning("controller %s did not drain within %.0fs", controller.name, timeout)
        self._release_lease.set()  # only now: never a second leader while we still reconcile
        if leader_thread is not None:
            leader_thread.join(timeout)
        self.cache.stop()
        self.recorder.stop()
        for server in self._servers:
            server.stop()
        metrics.LEADER_ELECTION_MASTER_STATUS.clear()
        log.info("manager stopped")
        return 1 if self._lost_lease.is_set() else 0
