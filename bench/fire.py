"""CPU per run: N CronJobs due in one minute, the operator beside a bare client, the
built-in CronJob controller (issue 48) and the Go tutorial controller (issue 38).

One local control plane (bench/_cluster.py; its kube-controller-manager runs neither the
Job nor the CronJob controller, bench/_builtin.py) runs four phases, each
with N CronJobs due at one minute (``M H * * *``, UTC), one after the other so none
competes with another for the two cores or the API server:

1. the bare client: a process of its own (``python -m bench.fire --bare-client``) that
   does, with no controller around it, what a run needs: it LISTs and WATCHes the same
   collections the operator does (CronJobs and Jobs, every namespace), and at the minute,
   from ``--workers`` threads, for each of its CronJobs creates the Job, an Event and
   writes the status (``active``, ``lastScheduleTime``) through the same ``RestClient``;
   then waits until its watch has seen every status. Its namespace is deleted (and gone)
   before the operator starts, so both sides read the same amount;
2. the operator (bench/_runner.py: the real CLI, unthrottled, ``--max-concurrent-reconciles``
   ``--workers``), started after its CronJobs exist; it reconciles every CronJob once
   (startup) and then, at the minute, creates the N Jobs and writes the N statuses;
3. the built-in (bench/_builtin.py), once the operator's namespaces are gone: N batch/v1
   CronJobs with the same spec and schedule, spread over the same namespaces, then a
   second kube-controller-manager that runs only ``cronjob-controller`` as a user of its
   own, unthrottled (``--kube-api-qps=-1``, as the operator) or with
   ``--builtin-stock-limits`` at its stock qps 20 / burst 30; ``--no-builtin`` skips it.
   Its startup ends once its caches have synced and its CPU is quiet; its status counts
   once it names the minute and an ``active`` Job; its own client's requests (its
   /metrics) are printed beside the API server's;
4. kubebuilder's CronJob tutorial controller in Go (controller-runtime v0.24.1, built by
   ``hack/build-go-tutorial.sh``; bench/_go_tutorial.py), once the operator's namespaces
   are gone and the tutorial's CRD has replaced ours (the same group, kind and name): N
   of its CronJobs in a namespace of their own, the same schedule and Job template, the
   manager started after them and run as the tutorial runs locally (one worker, its
   default). Without a built manager (``--go-tutorial DIR``, else the script's cache)
   this phase is skipped with one line, and so with ``--no-go-tutorial``.

For each side: its CPU (user + system, from /proc or getrusage) split into startup
(process start until caught up, 2 s before the minute) and fire (from then until every
status names the minute, as the benchmark's own watch sees it, the API server has
received an Event write per run (the operator sends its Events from a thread of their
own, which may trail the status writes; the Go tutorial records no Events, so its fire
does not wait for them) and the process is quiet: the operator
reconciles the watch events of its own writes), the fire CPU per run,
creation skew (``creationTimestamp`` - the minute, 1 s resolution) p50/p99, the time until
every status was written, the time from a manager's start until it caught up (the
benchmark's watch has seen every CronJob ``Available``, its first full reconcile; the
built-in: synced and quiet), the API requests of
each phase by verb and resource (the API server's ``apiserver_request_total``, our
resources only) and peak RSS. The closing table
gives the ratios that are compared: the operator's CPU per run (and skew, status time,
requests, RSS) over the bare client's, the built-in's and the Go tutorial's. The Go
tutorial's startup ends once the benchmark's watch has seen every one of its CronJobs
reconciled (its ``Available`` condition) and its CPU is quiet.

With ``--profile DIR``, py-spy (the bench extra) samples the operator over the fire
without pausing it (``--nonblocking``), running threads only: not ``--idle``, and only
the thread holding the GIL (``--gil``: without it a thread waiting for the GIL or in a
blocking call counts as busy, since py-spy cannot tell idle threads apart without
pausing the process), into ``DIR/operator-fire.txt`` (collapsed stacks, one line per
stack with its thread); the report then lists the busiest threads (by the function each
was started with) and the functions with the most samples, on their own and with what
they call.

    python -m bench.fire [--cronjobs 1000] [--workers 5] [--margin 30] [--profile DIR]
        [--no-builtin | --builtin-stock-limits] [--go-tutorial DIR | --no-go-tutorial]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import _builtin, _cluster, _common, _go_tutorial
from bench._runner import ManagerProcess
from bench.skew import (
    BUILTIN_CRONJOB,
    JobWatcher,
    Limits,
    Seen,
    StatusWatcher,
    builtin_cronjob,
    scheduled_time,
)
from cronjob_operator.api.batch_v1 import CRONJOB
from cronjob_operator.envtest import ControlPlane, wait_for
from cronjob_operator.runtime import errors
from cronjob_operator.runtime.client import LiveReader, RestClient, Writer, load_configuration
from cronjob_operator.runtime.kinds import EVENT, JOB, NAMESPACE, Kind

BARE_NAMESPACE = "bare-fire"
BARE_PREFIX = "bare"
OPERATOR_PREFIX = "cron"
GO_NAMESPACE = "go-fire"
GO_PREFIX = "go"
GO_LABEL = "Go tutorial"
BUILTIN_PREFIX = "builtin"
BUILTIN_LABEL = "built-in"
LEAD = 2.0
"""Seconds before the minute at which startup ends and the fire's CPU starts counting."""
WATCHED = (CRONJOB, JOB)
"""The collections both sides LIST and WATCH (the operator's informers)."""
GONE_TIMEOUT = 300.0
EVENT_WRITES = ("POST", "PATCH")
"""An Event created, or a repeat's count raised (``runtime.events``)."""
QUIET_CPU = 0.03
"""CPU seconds in a second below which the operator counts as quiet after the fire."""
EVENTS_STALLED = 15.0
"""Seconds without an Event write after which the Events not sent count as dropped."""


def minute_schedule(target: float) -> str:
    """The schedule that fires once a day, at the UTC minute of ``target``."""
    moment = time.gmtime(target)
    return f"{moment.tm_min} {moment.tm_hour} * * *"


def next_minute(after: float) -> float:
    """The first minute boundary at or after ``after`` (Unix seconds)."""
    return -(-after // 60) * 60.0


@dataclass
class Side:
    """One side's figures (the operator's or the bare client's)."""

    label: str
    startup_cpu: float
    fire_cpu: float
    runs: int
    created: list[float]
    status_seconds: float
    startup_requests: _cluster.ApiCounts
    fire_requests: _cluster.ApiCounts
    peak_rss_kb: int
    reconciles: int | None = None
    """The operator's reconciles in the fire (None for the bare client)."""
    available_seconds: float | None = None
    """From the manager's start until it caught up: the watch saw every CronJob
    ``Available`` (the built-in: its caches synced and its CPU went quiet); None for the
    bare client, which has no startup of that kind."""
    note: str = ""
    """What else the report says about this side (the built-in's own request counts)."""

    @property
    def per_run_ms(self) -> float:
        return self.fire_cpu / max(self.runs, 1) * 1000

    def row(self) -> list[str]:
        return [
            self.label,
            f"{self.startup_cpu:.2f}",
            f"{self.fire_cpu:.2f}",
            f"{self.startup_cpu + self.fire_cpu:.2f}",
            f"{self.per_run_ms:.2f}",
            f"{len(self.created):,}",
            f"{_cluster.percentile(self.created, 0.5):.0f}",
            f"{_cluster.percentile(self.created, 0.99):.0f}",
            f"{self.status_seconds:.2f}",
            f"{sum(self.startup_requests.values()):,}",
            f"{sum(self.fire_requests.values()):,}",
            f"{self.peak_rss_kb / 1024:.1f}",
            "-" if self.available_seconds is None else f"{self.available_seconds:.1f}",
        ]


HEADERS = [
    "side",
    "startup CPU s",
    "fire CPU s",
    "total CPU s",
    "CPU per run ms",
    "Jobs",
    "creation p50 s",
    "creation p99 s",
    "all status s",
    "requests startup",
    "requests fire",
    "peak RSS MiB",
    "start to caught up s",
]


def _requests(counts: _cluster.ApiCounts) -> _cluster.ApiCounts:
    """Only the resources a run reads or writes (the rest is the control plane's own)."""
    return _cluster.ApiCounts(
        {key: value for key, value in counts.items() if key[1] in _cluster.OWNED_RESOURCES}
    )


def _created(seen: Sequence[Seen], prefix: str, target: float) -> list[float]:
    """Creation skews of the Jobs named ``<prefix>-...`` for the run at ``target`` (the
    built-in names a run by its minute, the others by its second)."""
    return [
        s.created - target
        for s in list(seen)
        if s.name.startswith(prefix)
        and scheduled_time(s, s.owner_api_version == BUILTIN_CRONJOB.api_version) == target
    ]


def _side(
    label: str,
    runs: tuple[str, float, int],
    jobs: JobWatcher,
    counts: tuple[_cluster.ApiCounts, _cluster.ApiCounts, _cluster.ApiCounts],
    *,
    cpu: tuple[float, float],
    written: float,
    peak_rss_kb: int,
    reconciles: int | None = None,
    available: float | None = None,
) -> Side:
    """A side's figures from its phase: ``runs`` is its CronJobs' name prefix, their
    minute and their number, ``counts`` the API server's before the side started, at the
    fire and after it, ``cpu`` its startup and fire CPU, ``written`` when the last status
    was seen."""
    prefix, target, count = runs
    before, at_fire, after = counts
    return Side(
        label,
        *cpu,
        count,
        _created(jobs.seen, prefix, target),
        written - target,
        _requests(at_fire.since(before)),
        _requests(after.since(at_fire)),
        peak_rss_kb,
        reconciles,
        available,
    )


def _sleep_until(moment: float) -> None:
    while (left := moment - time.time()) > 0:
        time.sleep(min(left, 1.0))


def _create_cronjobs(
    rest: RestClient, keys: Sequence[tuple[str, str]], target: float
) -> list[dict[str, Any]]:
    writer = Writer(rest)
    schedule = minute_schedule(target)
    manifests = [_cluster.cronjob_manifest(ns, name, schedule=schedule) for ns, name in keys]
    return _cluster.bulk(lambda obj: writer.create(CRONJOB, obj), manifests)


def _watchers(rest: RestClient, target: float) -> tuple[JobWatcher, StatusWatcher]:
    jobs, statuses = JobWatcher(rest), StatusWatcher(rest, target=target)
    jobs.start()
    statuses.start()
    return jobs, statuses


def _written(statuses: StatusWatcher, namespaces: set[str], count: int, deadline: float) -> float:
    """When the last of ``count`` CronJobs in ``namespaces`` was seen with its status."""
    while time.time() < deadline:
        times = [t for key, t in list(statuses.recorded.items()) if key.split("/")[0] in namespaces]
        if len(times) >= count:
            return max(times)
        time.sleep(0.2)
    return float("nan")


def bare_phase(
    plane: ControlPlane, rest: RestClient, count: int, workers: int, margin: float
) -> Side:
    """The bare client's phase; its namespace is gone when this returns."""
    writer = Writer(rest)
    writer.create(NAMESPACE, {"metadata": {"name": BARE_NAMESPACE}})
    target = next_minute(time.time() + margin)
    keys = [(BARE_NAMESPACE, f"{BARE_PREFIX}-{i:05d}") for i in range(count)]
    _create_cronjobs(rest, keys, target)
    jobs, statuses = _watchers(rest, target)
    before = _cluster.ApiCounts.read(plane)
    argv = [
        sys.executable,
        "-m",
        "bench.fire",
        "--bare-client",
        f"--kubeconfig={plane.kubeconfig}",
        f"--target={target}",
        f"--workers={workers}",
    ]
    child = subprocess.Popen(
        argv, cwd=_common.REPO, env=_common.subprocess_env(), stdout=subprocess.PIPE, text=True
    )
    _sleep_until(target - LEAD)
    at_fire = _cluster.ApiCounts.read(plane)
    out, _ = child.communicate(timeout=target + 600 - time.time())
    if child.returncode != 0:
        raise RuntimeError(f"the bare client failed ({child.returncode})")
    after = _cluster.ApiCounts.read(plane)
    figures = json.loads(out)
    written = _written(statuses, {BARE_NAMESPACE}, count, time.time() + 60)
    jobs.stop()
    statuses.stop()
    side = _side(
        "bare client",
        (BARE_PREFIX, target, count),
        jobs,
        (before, at_fire, after),
        cpu=(figures["startup_cpu"], figures["fire_cpu"]),
        written=written,
        peak_rss_kb=figures["peak_rss_kb"],
    )
    _delete_namespaces(rest, [BARE_NAMESPACE])
    return side


def _delete_namespaces(rest: RestClient, names: Sequence[str]) -> None:
    """Delete the namespaces ``names`` and wait until they are gone with all they held."""
    writer, reader = Writer(rest), LiveReader(rest)
    for name in names:
        writer.delete(NAMESPACE, name)
    for name in names:
        wait_for(partial(_gone, reader, name), GONE_TIMEOUT, message=f"namespace {name} gone")


def _gone(reader: LiveReader, namespace: str) -> bool:
    try:
        reader.get(NAMESPACE, namespace)
    except errors.NotFound:
        return True
    return False


def operator_phase(
    plane: ControlPlane,
    rest: RestClient,
    count: int,
    workers: int,
    margin: float,
    log: Path,
    profile: Path | None = None,
    *,
    clean_up: bool = False,
) -> Side:
    """The operator's phase: create its CronJobs, start it, let the minute come (with
    ``clean_up``, its namespaces are gone when this returns)."""
    names = _cluster.create_namespaces(rest, min(_cluster.NAMESPACES, count))
    target = next_minute(time.time() + margin)
    keys = [(names[i % len(names)], f"{OPERATOR_PREFIX}-{i:05d}") for i in range(count)]
    _create_cronjobs(rest, keys, target)
    jobs, statuses = _watchers(rest, target)
    reconciled = _go_tutorial.ReconciledWatcher(rest)
    reconciled.start()
    before = _cluster.ApiCounts.read(plane)
    started = time.time()
    with ManagerProcess(
        plane, workers=workers, log=log, extra_args=["--kube-api-qps=-1"]
    ) as operator:
        operator.wait_first_reconciles(count, margin * 4)
        _wait_available(reconciled, count, time.time() + margin)
        operator.wait_quiet(1.0)
        if time.time() > target - LEAD:
            raise RuntimeError(f"startup took past the minute; raise --margin above {margin:g}")
        _sleep_until(target - LEAD)
        at_fire, startup_cpu = _cluster.ApiCounts.read(plane), operator.cpu_seconds()
        operator.stats(reset=True)
        with sampled(operator.pid, profile):
            written = _written(statuses, set(names), count, target + 600)
            _events_sent(plane, at_fire, count, target + 600)
            fire_cpu = _settled_cpu(operator.cpu_seconds) - startup_cpu
        after, peak = _cluster.ApiCounts.read(plane), operator.peak_rss_kb()
        reconciles = operator.stats()["reconciles"]
    for watcher in (jobs, statuses, reconciled):
        watcher.stop()
    if clean_up:
        _delete_namespaces(rest, names)
    return _side(
        "operator",
        (OPERATOR_PREFIX, target, count),
        jobs,
        (before, at_fire, after),
        cpu=(startup_cpu, fire_cpu),
        written=written,
        peak_rss_kb=peak,
        reconciles=reconciles,
        available=reconciled.last_seen - started,
    )


def _events_sent(
    plane: ControlPlane, since: _cluster.ApiCounts, count: int, deadline: float
) -> None:
    """Wait until the API server has received ``count`` Event writes after ``since``
    (one a run), or none for ``EVENTS_STALLED`` seconds: the rest were dropped (a full
    recorder queue drops Events, ours and client-go's alike, as at 5,000 runs a minute).
    Failed before: a recorder that trailed the status writes on a loaded API server sent
    under ``QUIET_CPU`` a second, so the fire ended without the CPU of the rest of its
    Events (774 of 1,000 sent); and waiting for all of them waited out the deadline
    whenever some were dropped (20 of the 36 minutes of a 5,000 run)."""
    seen, moved = -1, time.time()
    while time.time() < deadline:
        sent = _cluster.ApiCounts.read(plane).since(since).count_of(EVENT_WRITES, ["events"])
        if sent >= count or time.time() - moved > EVENTS_STALLED:
            return
        if sent != seen:
            seen, moved = sent, time.time()
        time.sleep(0.5)


def _settled_cpu(cpu_seconds: Callable[[], float]) -> float:
    """A manager's CPU seconds once it has gone quiet (the reconciles of its own status
    writes' watch events come after the last write): less than ``QUIET_CPU`` in a second,
    read from /proc (asking its stats endpoint would cost it CPU)."""
    before = cpu_seconds()
    while True:
        time.sleep(1.0)
        now = cpu_seconds()
        if now - before < QUIET_CPU:
            return now
        before = now


def go_phase(
    plane: ControlPlane, rest: RestClient, count: int, margin: float, directory: Path, log: Path
) -> Side:
    """The Go tutorial's phase: its CRD in place of ours, its CronJobs, then its manager."""
    _go_tutorial.install_crd(plane, directory)
    Writer(rest).create(NAMESPACE, {"metadata": {"name": GO_NAMESPACE}})
    target = next_minute(time.time() + margin)
    keys = [(GO_NAMESPACE, f"{GO_PREFIX}-{i:05d}") for i in range(count)]
    _create_cronjobs(rest, keys, target)
    jobs, statuses = _watchers(rest, target)
    reconciled = _go_tutorial.ReconciledWatcher(rest)
    reconciled.start()
    before = _cluster.ApiCounts.read(plane)
    started = time.time()
    with contextlib.closing(_go_tutorial.GoManager(plane, directory, log)) as manager:
        _wait_available(reconciled, count, time.time() + margin * 4, manager.check_running)
        _settled_cpu(manager.cpu_seconds)
        if time.time() > target - LEAD:
            raise RuntimeError(
                f"the Go startup took past the minute; raise --margin above {margin:g}"
            )
        _sleep_until(target - LEAD)
        at_fire, startup_cpu = _cluster.ApiCounts.read(plane), manager.cpu_seconds()
        written = _written(statuses, {GO_NAMESPACE}, count, target + 600)
        fire_cpu = _settled_cpu(manager.cpu_seconds) - startup_cpu
        after, peak = _cluster.ApiCounts.read(plane), manager.peak_rss_kb()
    for watcher in (jobs, statuses, reconciled):
        watcher.stop()
    return _side(
        GO_LABEL,
        (GO_PREFIX, target, count),
        jobs,
        (before, at_fire, after),
        cpu=(startup_cpu, fire_cpu),
        written=written,
        peak_rss_kb=peak,
        available=reconciled.last_seen - started,
    )


def builtin_phase(
    plane: ControlPlane, rest: RestClient, count: int, margin: float, limits: Limits, log: Path
) -> Side:
    """The built-in's phase: batch/v1 CronJobs spread over the operator's namespaces, then
    a kube-controller-manager that runs only ``cronjob-controller`` (bench/_builtin.py);
    its process and namespaces are gone when this returns, whatever happened."""
    names = _cluster.create_namespaces(rest, min(_cluster.NAMESPACES, count))
    try:
        return _builtin_fire(plane, rest, names, (count, margin), limits, log)
    finally:
        _delete_namespaces(rest, names)


def _builtin_fire(
    plane: ControlPlane,
    rest: RestClient,
    names: Sequence[str],
    size: tuple[int, float],
    limits: Limits,
    log: Path,
) -> Side:
    """``builtin_phase`` in ``names``: ``size`` is the CronJobs' number and the margin."""
    count, margin = size
    target = next_minute(time.time() + margin)
    writer, schedule = Writer(rest), minute_schedule(target)
    manifests = [
        builtin_cronjob(names[i % len(names)], f"{BUILTIN_PREFIX}-{i:05d}", schedule)
        for i in range(count)
    ]
    _cluster.bulk(lambda obj: writer.create(BUILTIN_CRONJOB, obj), manifests)
    jobs, statuses = JobWatcher(rest), _builtin.BuiltinStatusWatcher(rest, target=target)
    jobs.start()
    statuses.start()
    before = _cluster.ApiCounts.read(plane)
    try:
        with contextlib.closing(
            _builtin.BuiltinManager(plane, log.with_suffix(""), limits, log)
        ) as manager:
            synced = manager.wait_synced(time.time() + margin * 4)
            _settled_cpu(manager.cpu_seconds)
            quiet = time.time() - 1.0  # the quiet second began then
            if quiet > target - LEAD:
                raise RuntimeError(
                    f"the built-in's startup took past the minute; raise --margin above {margin:g}"
                )
            _sleep_until(target - LEAD)
            own_before = manager.client_requests()
            at_fire, startup_cpu = _cluster.ApiCounts.read(plane), manager.cpu_seconds()
            written = _written(statuses, set(names), count, target + 600)
            _events_sent(plane, at_fire, count, target + 600)
            fire_cpu = _settled_cpu(manager.cpu_seconds) - startup_cpu
            after, peak = _cluster.ApiCounts.read(plane), manager.peak_rss_kb()
            own = _builtin.since(manager.client_requests(), own_before)
    finally:
        jobs.stop()
        statuses.stop()
    side = _side(
        BUILTIN_LABEL,
        (BUILTIN_PREFIX, target, count),
        jobs,
        (before, at_fire, after),
        cpu=(startup_cpu, fire_cpu),
        written=written,
        peak_rss_kb=peak,
        available=quiet - manager.started,
    )
    side.note = (
        f"{BUILTIN_LABEL}: caches synced {synced - manager.started:.1f} s after its start; "
        f"its own client ({_builtin.USER}) in the fire, by method and code: {own}"
    )
    return side


def _wait_available(
    reconciled: _go_tutorial.ReconciledWatcher,
    count: int,
    deadline: float,
    check: Callable[[], None] = lambda: None,
) -> None:
    """Wait until the watch has seen ``count`` CronJobs ``Available``, calling ``check``
    (which raises when the manager has died) as it waits."""
    while len(reconciled.reconciled) < count:
        check()
        if time.time() > deadline:
            raise TimeoutError(f"{len(reconciled.reconciled)} of {count} CronJobs Available")
        time.sleep(0.2)


# --- the profile -----------------------------------------------------------------------


@contextlib.contextmanager
def sampled(pid: int, path: Path | None) -> Iterator[None]:
    """py-spy samples ``pid`` into ``path`` while the block runs (nothing when None)."""
    if path is None:
        yield
        return
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    argv = [spy, "record", "--pid", str(pid), "--nonblocking", "--gil", "--threads"]
    sampler = subprocess.Popen(
        [*argv, "--format", "raw", "--output", str(path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield
    finally:
        sampler.send_signal(signal.SIGINT)  # py-spy writes what it sampled, then exits
        sampler.wait(60)


WAITS = ("Condition.wait", "Event.wait", "SSLSocket.read", "SSLSocket.recv_into", "select")
"""Leaf frames of a thread that waits: counted apart, not as CPU (``--gil`` leaves few)."""


_LINE = re.compile(r":\d+\)$")
"""A frame's line number (py-spy names a frame ``function (file:line)``)."""


def _target(frames: Sequence[str]) -> str:
    """The function a thread was started with (the frame after ``Thread.run``)."""
    for index, frame in enumerate(frames[:-1]):
        if frame.startswith("Thread.run "):
            return frames[index + 1]
    return frames[1] if len(frames) > 1 else frames[0]


def profile_lines(path: Path, top: int = 20) -> list[str]:
    """The busiest threads and functions of a collapsed-stack file (see the module doc)."""
    threads: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    total: collections.Counter[str] = collections.Counter()
    samples = waiting = 0
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        frames = [_LINE.sub(")", frame) for frame in stack.split(";")]  # by function
        count = int(count_text)
        if frames[-1].startswith(WAITS):
            waiting += count
            continue
        samples += count
        threads[_target(frames)] += count
        own[frames[-1]] += count
        for frame in set(frames[1:]):
            total[frame] += count

    def share(counter: collections.Counter[str], title: str) -> list[str]:
        rows = [f"  {n / max(samples, 1):6.1%}  {name}" for name, n in counter.most_common(top)]
        return [f"{title} ({samples:,} samples running, {waiting:,} waiting left out):", *rows]

    return [
        *share(threads, "threads, by the function each started in"),
        *share(own, "functions, own samples"),
        *share(total, "functions, with what they call"),
    ]


# --- the bare client (a process of its own) ---------------------------------------


class _Mirror:
    """The bare client's copy of one collection: a LIST, then a WATCH on a thread."""

    def __init__(self, rest: RestClient, kind: Kind) -> None:
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.lock = threading.Lock()
        path = kind.collection_path(None)
        listed = rest.request("GET", path, params={"resourceVersion": "0"})
        for obj in listed["items"]:
            self._put(obj)
        version = listed["metadata"]["resourceVersion"]
        self.stream = rest.watch(
            path,
            {"resourceVersion": version, "allowWatchBookmarks": "true", "timeoutSeconds": 900},
            read_timeout=900,
        )
        threading.Thread(target=self._run, daemon=True).start()

    def _put(self, obj: dict[str, Any]) -> None:
        metadata = obj["metadata"]
        with self.lock:
            self.objects[(metadata["namespace"], metadata["name"])] = obj

    def _run(self) -> None:
        for event in self.stream:
            if event.get("type") in ("ADDED", "MODIFIED"):
                self._put(event["object"])

    def items(self) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.objects.values())


def _stamp(moment: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(moment))


def _bare_run(writer: Writer, cronjob: dict[str, Any], target: float) -> None:
    """One run, bare: the Job, an Event about it, the status naming it."""
    metadata = cronjob["metadata"]
    name, namespace = metadata["name"], metadata["namespace"]
    job = writer.create(
        JOB,
        {
            "metadata": {
                "name": f"{name}-{int(target)}",
                "namespace": namespace,
                "annotations": {"batch.tutorial.kubebuilder.io/scheduled-at": _stamp(target)},
                "ownerReferences": [
                    {
                        "apiVersion": CRONJOB.api_version,
                        "kind": CRONJOB.kind,
                        "name": name,
                        "uid": metadata["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": cronjob["spec"]["jobTemplate"]["spec"],
        },
    )
    now = _stamp(time.time())
    writer.create(
        EVENT,
        {
            "metadata": {"generateName": f"{name}.", "namespace": namespace},
            "involvedObject": {
                "apiVersion": CRONJOB.api_version,
                "kind": CRONJOB.kind,
                "name": name,
                "namespace": namespace,
                "uid": metadata["uid"],
            },
            "reason": "SuccessfulCreate",
            "message": f"Created job {job['metadata']['name']}",
            "type": "Normal",
            "source": {"component": "bare-client"},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        },
    )
    ref = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "namespace": namespace,
        "name": job["metadata"]["name"],
        "uid": job["metadata"]["uid"],
    }
    writer.update_status(
        CRONJOB, {**cronjob, "status": {"active": [ref], "lastScheduleTime": _stamp(target)}}
    )


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def bare_client(kubeconfig: str, target: float, workers: int) -> dict[str, float]:
    """The bare client's run (see the module docstring); its own figures."""
    rest = RestClient(load_configuration(kubeconfig), pool_size=workers * 2 + len(WATCHED))
    mirrors = {kind.plural: _Mirror(rest, kind) for kind in WATCHED}
    _sleep_until(target - LEAD)
    startup = _cpu()
    _sleep_until(target)
    writer = Writer(rest)
    mine = [
        obj
        for obj in mirrors[CRONJOB.plural].items()
        if obj["metadata"]["namespace"] == BARE_NAMESPACE
    ]
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(lambda obj: _bare_run(writer, obj, target), mine))
    stamp = _stamp(target)

    def recorded() -> bool:
        return all(
            (obj.get("status") or {}).get("lastScheduleTime") == stamp
            for obj in mirrors[CRONJOB.plural].items()
            if obj["metadata"]["namespace"] == BARE_NAMESPACE
        )

    wait_for(recorded, 600, message="the bare client's watch to see every status")
    fire = _cpu() - startup
    for mirror in mirrors.values():
        mirror.stream.close()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"startup_cpu": startup, "fire_cpu": fire, "peak_rss_kb": float(peak)}


# --- the report ----------------------------------------------------------------------


def _by_verb(counts: _cluster.ApiCounts) -> str:
    return ", ".join(f"{verb} {res} {n:,}" for (verb, res), n in sorted(counts.items())) or "none"


def measure(
    count: int,
    workers: int,
    margin: float,
    profile: Path | None = None,
    go_tutorial: Path | None = None,
    builtin: Limits | None = None,
) -> tuple[list[Side], Path]:
    """Every side in one cluster (the built-in's only with its client limit, the Go
    tutorial's only with its directory): their figures (the operator's first) and the
    directory of the managers' logs."""
    logs = Path(tempfile.mkdtemp(prefix="bench-fire-"))
    with _cluster.bench_plane(_builtin.PLANE_CONTROLLERS) as plane:
        rest = _cluster.rest_client(plane)
        bare = bare_phase(plane, rest, count, workers, margin)
        ours = operator_phase(
            plane,
            rest,
            count,
            workers,
            margin,
            logs / "operator.log",
            profile,
            clean_up=builtin is not None or go_tutorial is not None,
        )
        sides = [ours, bare]
        if builtin is not None:
            sides.append(builtin_phase(plane, rest, count, margin, builtin, logs / "builtin.log"))
        if go_tutorial is not None:
            sides.append(
                go_phase(plane, rest, count, margin, go_tutorial, logs / "go-tutorial.log")
            )
    return sides, logs


def _figures(side: Side) -> list[tuple[str, float, str]]:
    """The figures of the closing table: (name, value, format)."""
    return [
        ("CPU per run ms", side.per_run_ms, ".2f"),
        ("fire CPU s", side.fire_cpu, ".2f"),
        ("total CPU s", side.startup_cpu + side.fire_cpu, ".2f"),
        ("creation p50 s", _cluster.percentile(side.created, 0.5), ".0f"),
        ("creation p99 s", _cluster.percentile(side.created, 0.99), ".0f"),
        ("all status s", side.status_seconds, ".2f"),
        ("fire requests", sum(side.fire_requests.values()), ",d"),
        ("peak RSS MiB", side.peak_rss_kb / 1024, ".1f"),
    ]


def ratio_table(ours: Side, others: Sequence[Side]) -> str:
    """The closing table: each figure of every side, and the operator's over each other's."""
    columns = [_figures(side) for side in (ours, *others)]
    rows = []
    for index, (name, mine, spec) in enumerate(columns[0]):
        values = [format(column[index][1], spec) for column in columns]
        ratios = [_ratio(mine, column[index][1]) for column in columns[1:]]
        rows.append([name, *values, *ratios])
    return _common.markdown_table(
        [
            "figure",
            *(side.label for side in (ours, *others)),
            *(f"{ours.label} / {_short(side.label)}" for side in others),
        ],
        rows,
    )


def _short(label: str) -> str:
    """A side's name in a ratio's heading: ``bare`` for the bare client, ``Go`` for the
    Go tutorial, ``built-in`` for the built-in."""
    return label.split(maxsplit=1)[0]


def _ratio(mine: float, theirs: float) -> str:
    return f"{mine / theirs:.2f}x" if theirs else "-"


def render(
    sides: Sequence[Side],
    count: int,
    workers: int,
    logs: Path,
    go_skipped: str = "",
    builtin: Limits | None = None,
) -> tuple[str, list[str]]:
    """The figures table and the notes (requests by verb); ``go_skipped`` says why there
    is no Go tutorial side, ``builtin`` is the built-in's client limit (None: skipped)."""
    builtin_note = (
        f"{BUILTIN_LABEL}: skipped (--no-builtin)"
        if builtin is None
        else f"{BUILTIN_LABEL}: a kube-controller-manager of its own running only "
        f"{_builtin.CONTROLLER} (5 workers, its default --concurrent-cron-job-syncs), as "
        f"user {_builtin.USER}, client limit {builtin} (stock: {_builtin.STOCK}; "
        "--builtin-stock-limits); the plane's kube-controller-manager runs neither "
        f"{_builtin.CONTROLLER} nor job-controller. Its startup ends when its caches have "
        "synced and its CPU is quiet (it writes nothing at startup)."
    )
    go_note = (
        f"{GO_LABEL}: skipped ({go_skipped})"
        if go_skipped
        else f"{GO_LABEL}: {_go_tutorial.WORKERS} worker (its MaxConcurrentReconciles, "
        "controller-runtime's default), unthrottled (controller-runtime's default); it "
        "records no Events, so its fire sends no Event writes."
    )
    notes = [
        f"{count:,} CronJobs due in one minute, each side in a phase of its own; "
        f"{workers} workers for the operator (--max-concurrent-reconciles) and the bare "
        "client, unthrottled.",
        go_note,
        builtin_note,
        *(s.note for s in sides if s.note),
        *(
            f"{side.label} requests, startup: {_by_verb(side.startup_requests)}; "
            f"fire: {_by_verb(side.fire_requests)}"
            for side in sides
        ),
        "API requests are the API server's for our resources, whoever sent them: the "
        "operator's startup also holds kube-controller-manager's garbage collector "
        "finishing the bare client's deleted namespace (GET jobs).",
        f"operator reconciles in the fire: {sides[0].reconciles:,} "
        f"({(sides[0].reconciles or 0) / max(count, 1):.2f} per run)",
        f"logs: {logs}",
    ]
    return _common.markdown_table(HEADERS, [side.row() for side in sides]), notes


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cronjobs", type=int, default=1000, help="N (1000)")
    parser.add_argument("--workers", type=int, default=5, help="concurrent runs per side (5)")
    parser.add_argument(
        "--margin", type=float, default=30.0, help="seconds from creating to the minute (30)"
    )
    parser.add_argument(
        "--profile", type=Path, help="a directory: py-spy samples the operator's fire into it"
    )
    go_side = parser.add_mutually_exclusive_group()
    go_side.add_argument(
        "--go-tutorial",
        type=Path,
        help="the directory of the Go tutorial's manager and CRD "
        "(default: hack/build-go-tutorial.sh's cache; skipped when not built)",
    )
    go_side.add_argument("--no-go-tutorial", action="store_true", help="skip the Go tutorial")
    builtin_side = parser.add_mutually_exclusive_group()
    builtin_side.add_argument(
        "--no-builtin", action="store_true", help="skip the built-in CronJob controller"
    )
    builtin_side.add_argument(
        "--builtin-stock-limits",
        action="store_true",
        help=f"run the built-in at its stock client limit ({_builtin.STOCK}; "
        "default: unthrottled, as the operator)",
    )
    parser.add_argument("--bare-client", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--kubeconfig", help=argparse.SUPPRESS)
    parser.add_argument("--target", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.bare_client:
        print(json.dumps(bare_client(args.kubeconfig, args.target, args.workers)))
        return 0
    profile = None
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
        profile = args.profile / "operator-fire.txt"
    go_tutorial, go_skipped = (
        (None, "--no-go-tutorial") if args.no_go_tutorial else _go_tutorial.locate(args.go_tutorial)
    )
    if go_tutorial is None:
        print(f"fire: {GO_LABEL} skipped: {go_skipped}", file=sys.stderr)
    builtin = (
        None
        if args.no_builtin
        else _builtin.STOCK
        if args.builtin_stock_limits
        else _builtin.UNTHROTTLED
    )
    sides, logs = measure(args.cronjobs, args.workers, args.margin, profile, go_tutorial, builtin)
    table, notes = render(sides, args.cronjobs, args.workers, logs, go_skipped, builtin)
    if profile is not None:
        notes.append(f"profile of the operator's fire: {profile}")
        notes += profile_lines(profile)
    ours, *others = sides
    against = " and the ".join(side.label for side in others)
    closing = f"Per-run CPU ratio against the {against} (the figures compared):"
    _common.print_report(
        f"CPU per run: the operator beside the {against}",
        [("Fire:", table), (closing, ratio_table(ours, others))],
        notes,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
