"""Schedule accuracy under load: ours and the built-in CronJob controller in one cluster.

N CronJobs of ours and N built-in ``batch/v1`` CronJobs, all with the schedule
``* * * * *`` and suspended Jobs (``jobTemplate.spec.suspend: true``; the Job controller
is off as well, bench/_cluster.py), live in one local cluster. The operator
(bench/_runner.py) runs on the real clock beside kube-controller-manager's cronjob
controller. Once everything is reconciled and quiet, the benchmark takes the next minute
boundary at least ``--margin`` seconds away (and ``--minutes`` - 1 after it) and, from a
watch on Jobs, collects each controller's Jobs for those scheduled times.

Skew is reported two ways, for ours and theirs alike:
* creation: ``metadata.creationTimestamp`` minus the scheduled time. The timestamp has
  1-second resolution (truncated), so a value of 0 means "within the first second";
* observed: when the benchmark's watch received the Job (millisecond clock, the same
  machine) minus the scheduled time; this adds the watch's delivery delay.

Fairness (issue 15): each ``--limits`` entry is one cluster in which both controllers
run with the same client-side limit: kube-controller-manager with ``--kube-api-qps`` /
``--kube-api-burst`` and our operator with the same flags (``off``: ``-1``, no limit for
either). Before the operators' minute, a bare client (``--bare-threads`` threads, no
limit) creates N suspended Jobs in a namespace of their own: the API server's Job-create
throughput in that cluster, which bounds any controller's skew (N / throughput).

Targets (issue 15, measured on the first scheduled minute): our creation p99 within
1.2x of N / bare throughput, and our status (``lastScheduleTime`` of every CronJob) written
within 2x of the time by which all our Jobs existed. Both are timed by the benchmark's
watches (receive time): the last of our Jobs seen, the last CronJob seen with the
minute as its ``lastScheduleTime``.

    python -m bench.skew [--cronjobs 1000] [--builtin N] [--workers 5] [--minutes 1]
        [--margin 20] [--limits 20/30,off] [--bare-threads 16]
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import _cluster, _common
from bench._runner import ManagerProcess, parse_k8s_time
from cronjob_operator.api.batch_v1 import CRONJOB
from cronjob_operator.runtime.client import RestClient, WatchStream, Writer
from cronjob_operator.runtime.kinds import JOB, Kind

BUILTIN_CRONJOB = Kind("batch", "v1", "CronJob", "cronjobs")
EVERY_MINUTE = "* * * * *"
SKEW_METRIC = "cronjob_controller_job_creation_skew_duration_seconds_bucket"


def builtin_cronjob(namespace: str, name: str, schedule: str = EVERY_MINUTE) -> dict[str, Any]:
    """A batch/v1 CronJob with the same schedule and Job template as ours."""
    ours = _cluster.cronjob_manifest(namespace, name, schedule=schedule)
    return {**ours, "apiVersion": "batch/v1", "kind": "CronJob"}


@dataclass
class Seen:
    """A Job the watch saw: whose, when created, when received."""

    owner_api_version: str
    name: str
    created: float
    received: float


@dataclass
class Watcher:
    """One watch on a collection from now on, handing each event and its receive time to
    ``_record`` on a thread of its own."""

    rest: RestClient
    kind: Kind
    _stream: WatchStream | None = None

    def start(self) -> None:
        path = self.kind.collection_path(None)
        page = self.rest.request("GET", path, params={"limit": 1})
        version = page["metadata"]["resourceVersion"]
        self._stream = self.rest.watch(
            path, {"resourceVersion": version, "timeoutSeconds": 600}, read_timeout=600
        )
        threading.Thread(target=self._run, name=f"{self.kind.plural}-watcher", daemon=True).start()

    def _run(self) -> None:
        assert self._stream is not None
        for event in self._stream:
            self._record(event, time.time())

    def _record(self, event: dict[str, Any], received: float) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        if self._stream is not None:
            self._stream.close()


@dataclass
class JobWatcher(Watcher):
    """Records every Job added from now on."""

    kind: Kind = JOB
    seen: list[Seen] = field(default_factory=list)

    def _record(self, event: dict[str, Any], received: float) -> None:
        if event.get("type") != "ADDED":
            return
        metadata = event["object"]["metadata"]
        owner: dict[str, Any] = next(
            (r for r in metadata.get("ownerReferences") or () if r.get("controller")), {}
        )
        self.seen.append(
            Seen(
                owner.get("apiVersion", ""),
                metadata["name"],
                parse_k8s_time(metadata["creationTimestamp"]),
                received,
            )
        )


@dataclass
class StatusWatcher(Watcher):
    """When each of our CronJobs was first seen recording ``target`` as its last run:
    the same clock (the watch's receive time) as a Job's "observed" time."""

    kind: Kind = CRONJOB
    target: float = 0.0
    recorded: dict[str, float] = field(default_factory=dict)

    def _record(self, event: dict[str, Any], received: float) -> None:
        obj = event.get("object") or {}
        last = (obj.get("status") or {}).get("lastScheduleTime")
        if last and parse_k8s_time(last) == self.target:
            metadata = obj["metadata"]
            self.recorded.setdefault(f"{metadata['namespace']}/{metadata['name']}", received)

    def all_written_at(self, count: int, deadline: float) -> float:
        """When the last of ``count`` CronJobs was seen with its status written (or nan)."""
        while time.time() < deadline:
            times = list(self.recorded.values())
            if len(times) >= count:
                return max(times)
            time.sleep(0.2)
        return float("nan")


def scheduled_time(seen: Seen, builtin: bool) -> float:
    """The scheduled time encoded in the Job's name (minutes for theirs, seconds for ours)."""
    suffix = int(seen.name.rsplit("-", 1)[1])
    return suffix * 60.0 if builtin else float(suffix)


def _measured(seen: Sequence[Seen], api_version: str, targets: Sequence[float]) -> list[Seen]:
    """The Jobs of one controller (by owner apiVersion) scheduled at one of ``targets``."""
    builtin = api_version == "batch/v1"
    return [
        s
        for s in list(seen)
        if s.owner_api_version == api_version and scheduled_time(s, builtin) in targets
    ]


def _stats(values: Sequence[float]) -> list[str]:
    return [
        f"{len(values):,}",
        f"{_cluster.percentile(values, 0.5):.3f}",
        f"{_cluster.percentile(values, 0.99):.3f}",
        f"{max(values, default=0.0):.3f}",
    ]


def skew_histogram(metrics: str) -> str:
    """Our operator's skew histogram (cumulative buckets) as ``le=count`` pairs."""
    pairs = re.findall(rf'^{SKEW_METRIC}\{{le="([^"]+)"\}} (\S+)$', metrics, re.MULTILINE)
    return ", ".join(
        f"<={le}: {int(float(v))}"
        for le, v in pairs
        if le in {"1.0", "2.0", "4.0", "8.0", "16.0", "+Inf"}
    )


@dataclass(frozen=True)
class Limits:
    """One client-side limit for both controllers: ``qps`` None means none."""

    qps: float | None
    burst: int

    @classmethod
    def parse(cls, text: str) -> Limits:
        if text == "off":
            return cls(None, 0)
        qps, _, burst = text.partition("/")
        return cls(float(qps), int(burst or 30))

    def __str__(self) -> str:
        return "unthrottled" if self.qps is None else f"qps {self.qps:g} / burst {self.burst}"

    def flags(self) -> list[str]:
        if self.qps is None:
            return ["--kube-api-qps=-1"]
        return [f"--kube-api-qps={self.qps:g}", f"--kube-api-burst={self.burst}"]


def bare_create_rate(rest: RestClient, count: int, threads: int) -> float:
    """Jobs per second a bare client (``threads`` threads, no limit) creates."""
    writer = Writer(rest)
    namespace = "bare-client"
    writer.create(Kind("", "v1", "Namespace", "namespaces"), {"metadata": {"name": namespace}})
    cronjob = _cluster.cronjob_manifest(namespace, "bare", schedule=EVERY_MINUTE)
    template = cronjob["spec"]["jobTemplate"]["spec"]
    jobs = [
        {"metadata": {"name": f"bare-{i:05d}", "namespace": namespace}, "spec": template}
        for i in range(count)
    ]
    started = time.monotonic()
    _cluster.bulk(lambda job: writer.create(JOB, job), jobs, threads=threads)
    return count / (time.monotonic() - started)


def bare_status_rate(rest: RestClient, count: int, threads: int) -> float:
    """CronJob status writes per second a bare client (``threads`` threads) makes.

    A run costs one status write after its Job create, and for a custom resource with a
    Pod template in it the API server's write costs more than a Job create (schema
    validation and managed fields of the whole object): this bounds how soon any
    controller can record N runs. Measured on N suspended CronJobs of a namespace of their
    own, each given a status like a run's (one active Job, times, a condition), then
    deleted again before the operator starts.
    """
    writer = Writer(rest)
    namespace = "bare-status"
    writer.create(Kind("", "v1", "Namespace", "namespaces"), {"metadata": {"name": namespace}})
    manifests = []
    for i in range(count):
        manifest = _cluster.cronjob_manifest(namespace, f"bare-{i:05d}", schedule=EVERY_MINUTE)
        manifest["spec"]["suspend"] = True
        manifests.append(manifest)
    created = _cluster.bulk(lambda obj: writer.create(CRONJOB, obj), manifests, threads=threads)
    stamp = time.strftime("%Y-%m-%dT%H:%M:00Z", time.gmtime())
    bodies = [{**obj, "status": _run_like_status(obj, stamp)} for obj in created]
    started = time.monotonic()
    _cluster.bulk(lambda obj: writer.update_status(CRONJOB, obj), bodies, threads=threads)
    rate = count / (time.monotonic() - started)
    _cluster.bulk(
        lambda obj: writer.delete(CRONJOB, obj["metadata"]["name"], namespace=namespace),
        created,
        threads=threads,
    )
    return rate


def _run_like_status(cronjob: dict[str, Any], stamp: str) -> dict[str, Any]:
    name = cronjob["metadata"]["name"]
    return {
        "active": [
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": f"{name}-1",
                "namespace": cronjob["metadata"]["namespace"],
                "uid": cronjob["metadata"]["uid"],
            }
        ],
        "lastScheduleTime": stamp,
        "observedGeneration": 1,
        "conditions": [
            {
                "type": "Available",
                "status": "True",
                "reason": "Scheduled",
                "message": "bench",
                "lastTransitionTime": stamp,
                "observedGeneration": 1,
            }
        ],
    }


def measure(
    count: int,
    *,
    builtin: int | None = None,
    workers: int = 5,
    minutes: int = 1,
    margin: float = 20.0,
    limits: Limits = Limits(20, 30),
    bare_threads: int = _cluster.THREADS,
) -> tuple[list[list[str]], list[str]]:
    """Rows for ours and theirs, and notes (see the module docstring)."""
    log_dir = Path(tempfile.mkdtemp(prefix="bench-skew-"))
    kcm = {"kube-controller-manager": limits.flags()}
    with _cluster.bench_plane(extra_args=kcm) as plane:
        rest = _cluster.rest_client(plane)
        writer = Writer(rest)
        names = _cluster.create_namespaces(rest)
        keys = [(names[i % len(names)], f"cron-{i:05d}") for i in range(count)]
        ours = [_cluster.cronjob_manifest(ns, name, schedule=EVERY_MINUTE) for ns, name in keys]
        builtin = count if builtin is None else builtin
        theirs = [builtin_cronjob(ns, name) for ns, name in keys[:builtin]]
        _cluster.bulk(lambda obj: writer.create(CRONJOB, obj), ours)
        _cluster.bulk(lambda obj: writer.create(BUILTIN_CRONJOB, obj), theirs)
        bare_rate = bare_create_rate(rest, count, bare_threads)
        status_rate = bare_status_rate(rest, count, bare_threads)
        with ManagerProcess(
            plane, workers=workers, log=log_dir / "operator.log", extra_args=limits.flags()
        ) as operator:
            operator.wait_first_reconciles(count, 600)
            operator.wait_quiet(3.0)
            now = time.time()
            target = (int(now + margin) // 60 + 1) * 60.0
            watcher = JobWatcher(rest)
            statuses = StatusWatcher(rest, target=target)
            watcher.start()
            statuses.start()
            operator.stats(reset=True)
            cpu_before, reset_at = operator.cpu_seconds(), time.time()
            targets = [target + 60.0 * i for i in range(minutes)]
            deadline = targets[-1] + 60.0
            while time.time() < deadline:
                if len(_measured(watcher.seen, CRONJOB.api_version, targets[:1])) >= count:
                    break
                time.sleep(0.2)
            status_at = statuses.all_written_at(count, deadline)
            cpu_until_status = operator.cpu_seconds() - cpu_before
            while time.time() < deadline:
                ours_seen = _measured(watcher.seen, CRONJOB.api_version, targets)
                theirs_seen = _measured(watcher.seen, "batch/v1", targets)
                if len(ours_seen) >= count * minutes and len(theirs_seen) >= builtin * minutes:
                    break
                time.sleep(0.5)
            watcher.stop()
            statuses.stop()
            phase = operator.stats()
            histogram = skew_histogram(operator.metrics())
        load = _common.machine_lines()[-1]
    rows = []
    for label, api_version in (
        ("ours (operator)", CRONJOB.api_version),
        ("built-in batch/v1", "batch/v1"),
    ):
        is_builtin = api_version == "batch/v1"
        jobs = _measured(watcher.seen, api_version, targets)
        created = [s.created - scheduled_time(s, is_builtin) for s in jobs]
        observed = [s.received - scheduled_time(s, is_builtin) for s in jobs]
        rows.append([str(limits), label, *_stats(created), *_stats(observed)[1:]])
    first = _measured(watcher.seen, CRONJOB.api_version, targets[:1])
    all_jobs_at = max((s.created for s in first), default=float("nan")) - targets[0]
    all_seen_at = max((s.received for s in first), default=float("nan")) - targets[0]
    bound = count / bare_rate
    p99 = _cluster.percentile([s.created - targets[0] for s in first], 0.99)
    status_s = status_at - targets[0]
    status_bound = all_seen_at + count / status_rate
    notes = [
        f"{limits}: bare client {bare_rate:,.0f} Jobs/s ({count:,} Jobs, {bare_threads} "
        f"threads), so N / throughput = {bound:.2f} s; our first-minute creation p99 "
        f"{p99:.2f} s = {p99 / bound:.2f}x that (target <= 1.2x); all our Jobs created by "
        f"{all_jobs_at:.0f} s (creationTimestamp) / seen by {all_seen_at:.2f} s; every "
        f"status written by {status_s:.2f} s = {status_s / all_seen_at:.2f}x the time all "
        "Jobs were seen (target <= 2x).",
        f"{limits}: bare client {status_rate:,.0f} CronJob status writes/s ({count:,} PUTs, "
        f"{bare_threads} threads; {bare_rate / status_rate:.2f}x slower than a Job create), "
        f"so the earliest every status can be written after all Jobs were seen is "
        f"{all_seen_at:.2f} + {count / status_rate:.2f} = {status_bound:.2f} s = "
        f"{status_bound / all_seen_at:.2f}x; ours {status_s:.2f} s = "
        f"{status_s / status_bound:.2f}x that bound.",
        f"{count:,} CronJobs of ours and {builtin:,} built-in ones, schedule "
        f"'{EVERY_MINUTE}', {minutes} "
        f"scheduled minute(s) measured; our operator with --max-concurrent-reconciles="
        f"{workers} (kube-controller-manager's cronjob controller: 5 workers by default); "
        f"both clients at {limits} (kube-controller-manager's default: qps 20 / burst 30).",
        f"Jobs expected: {count * minutes:,} of ours, {builtin * minutes:,} built-in; a Job "
        "not created within 60 s after the last measured minute is missing from 'Jobs'.",
        "creation skew: creationTimestamp (1-second resolution, truncated) - scheduled time; "
        "observed: the benchmark's watch receive time - scheduled time (ms resolution).",
        f"our operator's skew histogram (cumulative, whole run): {histogram}",
        f"our operator's CPU from before the minute until every status was written: "
        f"{cpu_until_status:.1f} s ({cpu_until_status / count * 1000:.1f} ms per run) in "
        f"{status_at - reset_at:.1f} s of wall time, the minute's wait included (its "
        f"threads share one GIL, so about one core is its ceiling).",
        f"our operator from just before the first measured minute to the end: "
        f"{phase['reconciles']:,} reconciles; requests: "
        + ", ".join(f"{k} {v:,}" for k, v in sorted(phase["requests"].items())),
        f"during the measured minute(s): {load}",
    ]
    return rows, notes


HEADERS = [
    "client limit",
    "controller",
    "Jobs",
    "creation p50 s",
    "creation p99 s",
    "creation max s",
    "observed p50 s",
    "observed p99 s",
    "observed max s",
]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cronjobs", type=int, default=1000, help="N of each (1000)")
    parser.add_argument(
        "--builtin", type=int, help="built-in batch/v1 CronJobs (default: as many as ours)"
    )
    parser.add_argument("--workers", type=int, default=5, help="our max concurrent reconciles")
    parser.add_argument("--minutes", type=int, default=1, help="scheduled minutes measured (1)")
    parser.add_argument("--margin", type=float, default=20.0, help="seconds before the minute")
    parser.add_argument(
        "--limits",
        default="20/30,off",
        help="client limits, qps/burst or 'off', one cluster each (20/30,off)",
    )
    parser.add_argument(
        "--bare-threads", type=int, default=_cluster.THREADS, help="bare client threads (16)"
    )
    args = parser.parse_args(argv)
    rows: list[list[str]] = []
    notes: list[str] = []
    for text in args.limits.split(","):
        limit_rows, limit_notes = measure(
            args.cronjobs,
            builtin=args.builtin,
            workers=args.workers,
            minutes=args.minutes,
            margin=args.margin,
            limits=Limits.parse(text.strip()),
            bare_threads=args.bare_threads,
        )
        rows += limit_rows
        notes += limit_notes
    _common.print_report(
        "Schedule accuracy under load",
        [("Job creation skew:", _common.markdown_table(HEADERS, rows))],
        notes,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
