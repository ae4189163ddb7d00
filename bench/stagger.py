"""What ``spec.staggerSeconds`` does to a thundering herd: N CronJobs due in the same minute.

Two runs on a fresh local control plane each (no Job controller; Jobs are created
suspended, bench/_cluster.py): N of our CronJobs on ``* * * * *``, first without stagger,
then with ``staggerSeconds: S`` (S < 60, the schedule's gap). The operator
(bench/_runner.py) runs on the real clock. A watch on Jobs records each Job's creation
time; for the first scheduled minute after everything is quiet, the benchmark reports:

* the API server's write rate: Job creations per second, peak (over 1-second buckets)
  and mean over the spread, and the operator's requests in the measured phase (each run
  is a Job create plus a status write);
* delay: Job creation time (1-second resolution) minus the time the run was due, which
  is the scheduled time plus the CronJob's offset (``stagger_offset`` in
  ``api/cronjob_rules.py``), the same reference as the operator's skew histogram.

    python -m bench.stagger [--cronjobs 1000] [--stagger 50] [--workers 5] [--margin 20]
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import _cluster, _common
from bench._runner import ManagerProcess
from bench.skew import JobWatcher, Seen
from cronjob_operator.api.batch_v1 import CRONJOB
from cronjob_operator.api.cronjob_rules import stagger_offset
from cronjob_operator.runtime.client import Writer

EVERY_MINUTE = "* * * * *"


def _due(seen: Seen, namespace_of: dict[str, str], stagger: int) -> float:
    """When the run of ``seen`` was due: its nominal time (in its name) plus the offset."""
    cronjob, _, nominal = seen.name.rpartition("-")
    offset = stagger_offset(namespace_of[cronjob], cronjob, stagger)
    return float(nominal) + offset.total_seconds()


def run_once(count: int, stagger: int, *, workers: int, margin: float) -> list[str]:
    """One fresh cluster, one measured minute: a result row."""
    log_dir = Path(tempfile.mkdtemp(prefix="bench-stagger-"))
    with _cluster.bench_plane() as plane:
        rest = _cluster.rest_client(plane)
        writer = Writer(rest)
        names = _cluster.create_namespaces(rest)
        keys = [(names[i % len(names)], f"cron-{i:05d}") for i in range(count)]
        namespace_of = {name: ns for ns, name in keys}
        manifests = []
        for ns, name in keys:
            manifest = _cluster.cronjob_manifest(ns, name, schedule=EVERY_MINUTE)
            if stagger:
                manifest["spec"]["staggerSeconds"] = stagger
            manifests.append(manifest)
        _cluster.bulk(lambda obj: writer.create(CRONJOB, obj), manifests)
        with ManagerProcess(plane, workers=workers, log=log_dir / "operator.log") as operator:
            operator.wait_first_reconciles(count, 600)
            operator.wait_quiet(3.0)
            watcher = JobWatcher(rest)
            watcher.start()
            target = (int(time.time() + margin) // 60 + 1) * 60.0
            operator.stats(reset=True)
            deadline = target + stagger + 90.0
            while time.time() < deadline:
                if sum(1 for s in watcher.seen if s.name.endswith(f"-{int(target)}")) >= count:
                    break
                time.sleep(0.5)
            watcher.stop()
            phase = operator.stats()
    jobs = [s for s in watcher.seen if s.name.endswith(f"-{int(target)}")]
    per_second = collections.Counter(int(s.created) for s in jobs)
    spread = (max(per_second) - min(per_second) + 1) if per_second else 0
    delays = [s.created - _due(s, namespace_of, stagger) for s in jobs]
    requests = sum(phase["requests"].values())
    return [
        f"{stagger} s" if stagger else "none",
        f"{len(jobs):,}",
        f"{max(per_second.values(), default=0)}",
        f"{len(jobs) / spread:.1f}" if spread else "0",
        f"{spread}",
        f"{requests:,}",
        f"{_cluster.percentile(delays, 0.5):.0f}",
        f"{_cluster.percentile(delays, 0.99):.0f}",
    ]


HEADERS = [
    "stagger",
    "Jobs",
    "peak creates/s",
    "mean creates/s",
    "spread s",
    "operator requests",
    "delay p50 s",
    "delay p99 s",
]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cronjobs", type=int, default=1000, help="CronJobs (1000)")
    parser.add_argument("--stagger", type=int, default=50, help="staggerSeconds (50; < 60)")
    parser.add_argument("--workers", type=int, default=5, help="max concurrent reconciles")
    parser.add_argument("--margin", type=float, default=20.0, help="seconds before the minute")
    args = parser.parse_args(argv)
    rows = [
        run_once(args.cronjobs, stagger, workers=args.workers, margin=args.margin)
        for stagger in (0, args.stagger)
    ]
    _common.print_report(
        "Stagger: N CronJobs due in the same minute",
        [("Job creation rate and delay:", _common.markdown_table(HEADERS, rows))],
        [
            f"{args.cronjobs:,} CronJobs on '{EVERY_MINUTE}', one scheduled minute each, a "
            f"fresh control plane per row, --max-concurrent-reconciles={args.workers}.",
            "creates/s: Jobs by creationTimestamp second; spread: first to last second with "
            "a Job; operator requests: every API request of the operator from just before "
            "the minute until the last Job (Job creates, status writes, events).",
            "delay: creationTimestamp (1 s resolution, truncated) - (scheduled time + the "
            "CronJob's stagger offset).",
        ],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
