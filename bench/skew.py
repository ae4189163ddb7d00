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

Target (issue 8): our p99 no worse than the built-in's, and under 2 s.

    python -m bench.skew [--cronjobs 1000] [--builtin N] [--workers 5] [--minutes 1]
        [--margin 20]
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
from cronjob_operator.runtime._rest import RestClient, WatchStream
from cronjob_operator.runtime.client import Writer
from cronjob_operator.runtime.kinds import JOB, Kind

BUILTIN_CRONJOB = Kind("batch", "v1", "CronJob", "cronjobs")
EVERY_MINUTE = "* * * * *"
SKEW_METRIC = "cronjob_controller_job_creation_skew_duration_seconds_bucket"


def builtin_cronjob(namespace: str, name: str) -> dict[str, Any]:
    """A batch/v1 CronJob with the same schedule and Job template as ours."""
    ours = _cluster.cronjob_manifest(namespace, name, schedule=EVERY_MINUTE)
    return {**ours, "apiVersion": "batch/v1", "kind": "CronJob"}


@dataclass
class Seen:
    """A Job the watch saw: whose, when created, when received."""

    owner_api_version: str
    name: str
    created: float
    received: float


@dataclass
class JobWatcher:
    """Records every Job added from now on (a thread on one watch)."""

    rest: RestClient
    seen: list[Seen] = field(default_factory=list)
    _stream: WatchStream | None = None

    def start(self) -> None:
        page = self.rest.request("GET", JOB.collection_path(None), params={"limit": 1})
        version = page["metadata"]["resourceVersion"]
        self._stream = self.rest.watch(
            JOB.collection_path(None),
            {"resourceVersion": version, "timeoutSeconds": 600},
            read_timeout=600,
        )
        threading.Thread(target=self._run, name="job-watcher", daemon=True).start()

    def _run(self) -> None:
        assert self._stream is not None
        for event in self._stream:
            received = time.time()
            if event.get("type") != "ADDED":
                continue
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

    def stop(self) -> None:
        if self._stream is not None:
            self._stream.close()


def _scheduled(seen: Seen, builtin: bool) -> float:
    """The scheduled time encoded in the Job's name (minutes for theirs, seconds for ours)."""
    suffix = int(seen.name.rsplit("-", 1)[1])
    return suffix * 60.0 if builtin else float(suffix)


def _measured(seen: Sequence[Seen], api_version: str, targets: Sequence[float]) -> list[Seen]:
    """The Jobs of one controller (by owner apiVersion) scheduled at one of ``targets``."""
    builtin = api_version == "batch/v1"
    return [
        s
        for s in list(seen)
        if s.owner_api_version == api_version and _scheduled(s, builtin) in targets
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


def measure(
    count: int,
    *,
    builtin: int | None = None,
    workers: int = 5,
    minutes: int = 1,
    margin: float = 20.0,
) -> tuple[list[list[str]], list[str]]:
    """Rows for ours and theirs, and notes (see the module docstring)."""
    log_dir = Path(tempfile.mkdtemp(prefix="bench-skew-"))
    with _cluster.bench_plane() as plane:
        rest = _cluster.rest_client(plane)
        writer = Writer(rest)
        names = _cluster.create_namespaces(rest)
        keys = [(names[i % len(names)], f"cron-{i:05d}") for i in range(count)]
        ours = [_cluster.cronjob_manifest(ns, name, schedule=EVERY_MINUTE) for ns, name in keys]
        builtin = count if builtin is None else builtin
        theirs = [builtin_cronjob(ns, name) for ns, name in keys[:builtin]]
        _cluster.bulk(lambda obj: writer.create(CRONJOB, obj), ours)
        _cluster.bulk(lambda obj: writer.create(BUILTIN_CRONJOB, obj), theirs)
        with ManagerProcess(plane, workers=workers, log=log_dir / "operator.log") as operator:
            operator.wait_stats(lambda s: s["first_count"] >= count, 600, "first reconciles")
            operator.wait_quiet(3.0)
            watcher = JobWatcher(rest)
            watcher.start()
            operator.stats(reset=True)
            now = time.time()
            target = (int(now + margin) // 60 + 1) * 60.0
            targets = [target + 60.0 * i for i in range(minutes)]
            deadline = targets[-1] + 60.0
            while time.time() < deadline:
                ours_seen = _measured(watcher.seen, CRONJOB.api_version, targets)
                theirs_seen = _measured(watcher.seen, "batch/v1", targets)
                if len(ours_seen) >= count * minutes and len(theirs_seen) >= builtin * minutes:
                    break
                time.sleep(0.5)
            watcher.stop()
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
        created = [s.created - _scheduled(s, is_builtin) for s in jobs]
        observed = [s.received - _scheduled(s, is_builtin) for s in jobs]
        rows.append([label, *_stats(created), *_stats(observed)[1:]])
    notes = [
        f"{count:,} CronJobs of ours and {builtin:,} built-in ones, schedule "
        f"'{EVERY_MINUTE}', {minutes} "
        f"scheduled minute(s) measured; our operator with --max-concurrent-reconciles="
        f"{workers} (kube-controller-manager's cronjob controller: 5 workers by default, "
        "and its client limited to 20 requests/s, burst 30: --kube-api-qps's default).",
        f"Jobs expected: {count * minutes:,} of ours, {builtin * minutes:,} built-in; a Job "
        "not created within 60 s after the last measured minute is missing from 'Jobs'.",
        "creation skew: creationTimestamp (1-second resolution, truncated) - scheduled time; "
        "observed: the benchmark's watch receive time - scheduled time (ms resolution).",
        f"our operator's skew histogram (cumulative, whole run): {histogram}",
        f"our operator from just before the first measured minute to the end: "
        f"{phase['reconciles']:,} reconciles; requests: "
        + ", ".join(f"{k} {v:,}" for k, v in sorted(phase["requests"].items())),
        f"during the measured minute(s): {load}",
    ]
    return rows, notes


HEADERS = [
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
    args = parser.parse_args(argv)
    rows, notes = measure(
        args.cronjobs,
        builtin=args.builtin,
        workers=args.workers,
        minutes=args.minutes,
        margin=args.margin,
    )
    _common.print_report(
        "Schedule accuracy under load",
        [("Job creation skew:", _common.markdown_table(HEADERS, rows))],
        notes,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
