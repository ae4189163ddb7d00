"""The operator as the scale benchmarks run it: the real CLI in a subprocess, instrumented.

``python -m bench._runner --stats-port P [--variant indexed] -- run --kubeconfig ...`` runs
``cronjob_operator.cli.main`` with the arguments after ``--`` (so flags, logging, the
manager and ``controllers.cronjob.setup`` are exactly production's), after three
substitutions that only observe:

* the ``RestClient`` counts every request by method and resource (client-side, so the
  counts are this process's alone, beside the API server's own /metrics);
* the ``CronJobReconciler`` times every reconcile (wall and thread CPU) and notes when each
  CronJob was first reconciled;
* its Job lookup (``_owned_jobs``) can be switched at run time to a naive variant:
  ``scan`` lists the namespace's Jobs from the cache and filters by owner, ``live`` sends a
  LIST with a label selector to the API server, as many Python operators do.

One option changes behaviour, as an experiment: ``--consistent-list`` makes the informers'
first LIST ask for ``resourceVersion=""`` instead of ``"0"``. The API server answers
``"0"`` from its watch cache in one response whatever the ``limit``, so the whole kind is
parsed at once; ``""`` is paginated (500 per page), which bounds the decoding peak.

A small HTTP server on 127.0.0.1:P serves ``/stats`` (JSON; ``?reset=1`` starts a new
phase), and ``/kick?variant=V&limit=L`` (switch the variant and enqueue the first L cached
CronJobs at once). ``ManagerProcess`` is the driver's handle on it: start,
read stats, kick, RSS and CPU from /proc, stop with SIGTERM.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Sequence
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

if __package__ in (None, ""):  # run as a file: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import _common
from bench._cluster import OWNER_LABEL
from cronjob_operator.envtest import ControlPlane
from cronjob_operator.envtest._components import free_ports

__all__ = [
    "VARIANTS",
    "ChildProcess",
    "ManagerProcess",
    "cpu_seconds",
    "parse_k8s_time",
    "request_key",
    "rss_kb",
    "terminate",
]

VARIANTS = ("indexed", "scan", "live")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def request_key(method: str, path: str) -> str:
    """``"GET jobs"``, ``"LIST jobs"``, ``"PUT cronjobs/status"``, ... for one request."""
    parts = path.split("?", 1)[0].strip("/").split("/")
    rest = parts[2:] if parts[:1] == ["api"] else parts[3:]
    if len(rest) >= 3 and rest[0] == "namespaces":
        rest = rest[2:]
    if not rest:
        return f"{method} namespaces"
    if method == "GET" and len(rest) == 1:
        method = "LIST"  # a GET of a collection
    return f"{method} {rest[0]}/{rest[2]}" if len(rest) > 2 else f"{method} {rest[0]}"


def rss_kb(pid: int, field: str = "VmRSS") -> int:
    """VmRSS (or another /proc status field in KiB, e.g. VmHWM: the peak RSS) of ``pid``."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    return 0


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds ``pid`` has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def terminate(process: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    """SIGTERM ``process`` and wait for it; kill it after ``timeout`` seconds."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class ChildProcess:
    """A manager that is not ours (a Go binary) in a subprocess, its output in ``log``:
    whether it runs, its CPU and peak RSS from /proc, SIGTERM (``contextlib.closing``
    calls ``close``). ``name`` says whose it is in an error."""

    def __init__(self, name: str, argv: Sequence[str], env: dict[str, str], log: Path) -> None:
        self.name = name
        self.log = log
        self._log_file = log.open("ab")
        self.started = time.time()
        self.process = subprocess.Popen(argv, env=env, stdout=self._log_file, stderr=self._log_file)
        self.pid = self.process.pid

    def check_running(self) -> None:
        """Raise when the process has exited (its log says why)."""
        if self.process.poll() is not None:
            raise RuntimeError(f"{self.name} exited ({self.process.returncode}); see {self.log}")

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.pid)

    def peak_rss_kb(self) -> int:
        """The highest RSS the process has had so far (VmHWM)."""
        return rss_kb(self.pid, "VmHWM")

    def close(self) -> None:
        """SIGTERM and wait."""
        terminate(self.process)
        self._log_file.close()


class _Stats:
    """What the instrumented process observed since the last reset (thread-safe)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.variant = "indexed"
        self.started = time.time()
        self.synced_at: float | None = None
        self.baseline_rss_kb = 0
        self.first: dict[tuple[str, str], float] = {}
        self.kicked_at = 0.0
        self._reset()

    def _reset(self) -> None:
        self.durations: list[float] = []
        self.cpu: list[float] = []
        self.phase_requests: collections.Counter[str] = collections.Counter()
        self.last_done = 0.0

    def count(self, method: str, path: str) -> None:
        key = request_key(method, path)
        with self.lock:
            self.phase_requests[key] += 1

    def record(self, key: tuple[str, str], wall: float, cpu: float) -> None:
        now = time.time()
        with self.lock:
            self.durations.append(wall)
            self.cpu.append(cpu)
            self.first.setdefault(key, now)
            self.last_done = now

    def snapshot(self, *, reset: bool = False) -> dict[str, Any]:
        with self.lock:
            data = {
                "variant": self.variant,
                "started": self.started,
                "synced_at": self.synced_at,
                "baseline_rss_kb": self.baseline_rss_kb,
                "first_count": len(self.first),
                "first_last": max(self.first.values(), default=0.0),
                "reconciles": len(self.durations),
                "durations": list(self.durations),
                "cpu": list(self.cpu),
                "requests": dict(self.phase_requests),
                "last_done": self.last_done,
                "kicked_at": self.kicked_at,
            }
            if reset:
                self._reset()
            return data


STATS = _Stats()


def _instrument(*, consistent_list: bool = False) -> Callable[[str, int], int]:
    """Patch the REST client and the reconciler; return a kick function."""
    from cronjob_operator import runtime
    from cronjob_operator.api.batch_v1 import CRONJOB
    from cronjob_operator.controllers import cronjob
    from cronjob_operator.controllers.cronjob import reconciler as cronjob_reconciler
    from cronjob_operator.controllers.cronjob.jobs import JobSets, classify
    from cronjob_operator.runtime import objects
    from cronjob_operator.runtime.client import _rest as rest_module
    from cronjob_operator.runtime.clock import Clock, utc_now
    from cronjob_operator.runtime.controller import Controller, Request, Result
    from cronjob_operator.runtime.kinds import JOB
    from cronjob_operator.runtime.manager import Manager
    from cronjob_operator.runtime.sharding import Shard

    class CountingRestClient(rest_module.RestClient):
        def request(self, method: str, path: str, **kwargs: Any) -> Any:
            STATS.count(method, path)
            return super().request(method, path, **kwargs)

        def watch(
            self, path: str, params: Any, *, read_timeout: float, accept: str = rest_module.JSON
        ) -> rest_module.WatchStream:
            STATS.count("WATCH", path)
            return super().watch(path, params, read_timeout=read_timeout, accept=accept)

    class BenchReconciler(cronjob.CronJobReconciler):
        def reconcile(self, request: Request) -> Result:
            wall, cpu = time.perf_counter(), time.thread_time()
            try:
                return super().reconcile(request)
            finally:
                STATS.record(
                    (request.namespace, request.name),
                    time.perf_counter() - wall,
                    time.thread_time() - cpu,
                )

        def _owned_jobs(self, cronjob_obj: objects.Obj) -> JobSets:
            variant = STATS.variant
            if variant == "indexed":
                return super()._owned_jobs(cronjob_obj)
            metadata = cronjob_obj["metadata"]
            if variant == "scan":
                listed = self._client.list(JOB, namespace=metadata["namespace"])
            else:
                listed = self._client.live.list(
                    JOB,
                    namespace=metadata["namespace"],
                    label_selector={OWNER_LABEL: metadata["name"]},
                )
            uid = metadata.get("uid")
            return classify(
                job for job in listed if (objects.controller_ref(job) or {}).get("uid") == uid
            )

    held: dict[str, Any] = {}
    original_setup = cronjob.setup

    def setup(
        manager: Manager, *, clock: Clock = utc_now, shard: Shard | None = None
    ) -> Controller:
        controller = original_setup(manager, clock=clock, shard=shard)
        held.update(manager=manager, controller=controller)
        threading.Thread(target=_watch_sync, args=(manager,), daemon=True).start()
        STATS.baseline_rss_kb = rss_kb(os.getpid())
        return controller

    def kick(variant: str, limit: int) -> int:
        manager: Manager = held["manager"]
        controller: Controller = held["controller"]
        cached = manager.cache.informer(CRONJOB).store.list()[:limit]
        with STATS.lock:
            STATS.variant = variant
            STATS.kicked_at = time.time()
        for obj in cached:
            controller.queue.add(Request(objects.namespace_of(obj), objects.name_of(obj)))
        return len(cached)

    if consistent_list:
        from cronjob_operator.runtime.cache import Reflector

        list_once = Reflector._list

        def paged_list(self: Reflector, resource_version: str) -> None:
            list_once(self, "" if resource_version == "0" else resource_version)

        Reflector._list = paged_list  # type: ignore[method-assign]
    # The CLI takes RestClient from the runtime's facade: replace it there too.
    rest_module.RestClient = runtime.RestClient = CountingRestClient  # type: ignore[misc]
    # setup() builds the reconciler from its own module's name: replace it there too.
    cronjob.CronJobReconciler = BenchReconciler  # type: ignore[misc]
    cronjob_reconciler.CronJobReconciler = BenchReconciler  # type: ignore[misc]
    cronjob.setup = setup
    return kick


def _watch_sync(manager: Any) -> None:
    while not manager.cache.synced:
        time.sleep(0.005)
    STATS.synced_at = time.time()


def _serve(port: int, kick: Callable[[str, int], int]) -> None:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urlsplit(self.path)
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            if url.path == "/kick":
                body: Any = {"kicked": kick(query.get("variant", "indexed"), int(query["limit"]))}
            else:
                body = STATS.snapshot(reset=query.get("reset") == "1")
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *_args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, name="bench-stats", daemon=True).start()


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    split = args.index("--")
    own, cli_args = args[:split], args[split + 1 :]
    port = int(own[own.index("--stats-port") + 1])
    if "--variant" in own:
        STATS.variant = own[own.index("--variant") + 1]
    kick = _instrument(consistent_list="--consistent-list" in own)
    _serve(port, kick)
    from cronjob_operator import cli

    return cli.main(cli_args)


class ManagerProcess:
    """The driver's handle on one instrumented operator process."""

    def __init__(
        self,
        plane: ControlPlane,
        *,
        workers: int = 1,
        variant: str = "indexed",
        consistent_list: bool = False,
        log: Path | None = None,
        extra_args: Sequence[str] = (),
    ) -> None:
        self.stats_port, self.metrics_port = free_ports(2)
        argv = [
            sys.executable,
            "-m",
            "bench._runner",
            "--stats-port",
            str(self.stats_port),
            "--variant",
            variant,
            *(["--consistent-list"] if consistent_list else []),
            "--",
            "run",
            f"--kubeconfig={plane.kubeconfig}",
            "--no-configdeployment-controller",
            "--webhook-port=0",
            "--health-probe-bind-address=0",
            f"--metrics-bind-address=127.0.0.1:{self.metrics_port}",
            "--no-metrics-secure",  # the benchmark reads /metrics itself, over plain HTTP
            f"--max-concurrent-reconciles={workers}",
            "--log-format=json",
            "--log-level=warning",
            *extra_args,
        ]
        self.log = log or Path(os.devnull)
        self._log_file = self.log.open("ab")
        self.started = time.time()
        self.process = subprocess.Popen(
            argv, env=_common.subprocess_env(), stdout=self._log_file, stderr=self._log_file
        )
        self.pid = self.process.pid

    def _get(self, path: str) -> dict[str, Any]:
        url = f"http://127.0.0.1:{self.stats_port}{path}"
        with urllib.request.urlopen(url, timeout=30) as response:
            return json.loads(response.read())  # type: ignore[no-any-return]

    def stats(self, *, reset: bool = False) -> dict[str, Any]:
        """The current phase's figures (``reset``: and start a new phase)."""
        return self._get("/stats?reset=1" if reset else "/stats")

    def kick(self, variant: str, limit: int) -> int:
        """Switch the Job lookup to ``variant`` and enqueue ``limit`` CronJobs at once."""
        return int(self._get(f"/kick?variant={variant}&limit={limit}")["kicked"])

    def metrics(self) -> str:
        """The operator's own /metrics text."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.read().decode()  # type: ignore[no-any-return]

    def wait_stats(
        self, ready: Callable[[dict[str, Any]], bool], timeout: float, what: str
    ) -> dict[str, Any]:
        """Poll ``stats`` until ``ready`` holds; raises after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"the operator exited ({self.process.returncode}); see {self.log}"
                )
            try:
                stats = self.stats()
            except OSError:
                stats = None
            if stats is not None and ready(stats):
                return stats
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
            time.sleep(0.05)

    def wait_first_reconciles(self, count: int, timeout: float) -> dict[str, Any]:
        """Wait until ``count`` CronJobs were reconciled once and the process saw every
        informer synced (``synced_at``: the caches of several controllers may finish
        syncing a moment after the first CronJobs are reconciled); their stats."""
        return self.wait_stats(
            lambda s: s["first_count"] >= count and s["synced_at"] is not None,
            timeout,
            "first reconciles",
        )

    def wait_quiet(self, quiet: float = 2.0, timeout: float = 600.0) -> dict[str, Any]:
        """Wait until no reconcile has finished for ``quiet`` seconds; the phase's stats."""
        return self.wait_stats(
            lambda s: (
                time.time() - max(s["last_done"], s["kicked_at"], s["synced_at"] or 0) > quiet
            ),
            timeout,
            "the work queue to drain",
        )

    def rss_kb(self) -> int:
        return rss_kb(self.pid)

    def peak_rss_kb(self) -> int:
        """The highest RSS the process has had so far (VmHWM)."""
        return rss_kb(self.pid, "VmHWM")

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.pid)

    def stop(self) -> None:
        """SIGTERM and wait (the manager drains and exits 0)."""
        terminate(self.process)
        self._log_file.close()

    def __enter__(self) -> ManagerProcess:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()


def parse_k8s_time(value: str) -> float:
    """A Kubernetes timestamp as Unix seconds."""
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


if __name__ == "__main__":
    sys.exit(main())
