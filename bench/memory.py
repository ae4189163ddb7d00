"""Memory per cached Job: RSS growth of an informer's store, by cache transform.

Each configuration runs in a fresh interpreter (``python -m bench.memory --child``), so
allocator state from one does not flatter the next. The child builds N Job watch events
as JSON bytes first, collects garbage and reads its RSS, then feeds every event through
the reflector's own path (``Reflector._handle``: orjson decode, transform, freeze,
``Store.upsert`` with the namespace and ``.metadata.controller`` indexes, the informer
fan-out), collects garbage and reads RSS again. Growth / N is the cost of one cached Job,
including the allocator's fragmentation from what the transform threw away; the JSON
bytes stay alive throughout, so they are not counted. A second figure sums
``sys.getsizeof`` over the objects of 200 cached Jobs (each object counted once) as a
cross-check that ignores the allocator.

Configurations: (a) managedFields kept (no transform), (b) stripped (the default
transform), (c) the CronJob controller's ``slim_job`` (what the operator runs with).

    python -m bench.memory [--jobs 20k] [--template job.json]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import orjson

from bench import _common
from cronjob_operator.controllers.cronjob import JOB_OWNER_INDEX, job_owner_index
from cronjob_operator.runtime.cache import Informer
from cronjob_operator.runtime.cache._cache import _namespaced_values, field_index_name
from cronjob_operator.runtime.kinds import JOB

DEFAULT_JOBS = "20k"
SAMPLE = 200
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss_bytes() -> int:
    """This process's resident set size, from /proc/self/statm."""
    return int(Path("/proc/self/statm").read_text().split()[1]) * PAGE_SIZE


def _objects_under(value: Any, seen: set[int]) -> Iterator[Any]:
    if id(value) in seen:
        return
    seen.add(id(value))
    yield value
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _objects_under(key, seen)
            yield from _objects_under(item, seen)
    elif isinstance(value, tuple | list):
        for item in value:
            yield from _objects_under(item, seen)


def child(config: str, jobs: int, template: Path | None) -> dict[str, float]:
    """Load ``jobs`` Jobs with transform ``config``; RSS before and after, and sizes."""
    factory = _common.JobFactory(_common.load_template(template))
    events = [b'{"type":"ADDED","object":%s}' % raw for raw in factory.jobs(jobs)]
    informer = Informer(_common.offline_rest_client(), JOB, transform=_common.TRANSFORMS[config])
    informer.store.add_indexer(
        field_index_name(JOB_OWNER_INDEX), _namespaced_values(job_owner_index)
    )
    handle = informer._reflector._handle
    gc.collect()
    before = rss_bytes()
    for event in events:
        handle(orjson.loads(event))
    gc.collect()
    after = rss_bytes()
    assert len(informer.store) == jobs
    seen: set[int] = set()
    sample = informer.store.list()[:SAMPLE]
    deep = sum(sys.getsizeof(obj) for job in sample for obj in _objects_under(job, seen))
    return {
        "rss_before": before,
        "rss_after": after,
        "json_bytes": sum(map(len, events)) / len(events),
        "cached_json_bytes": sum(len(orjson.dumps(job)) for job in sample) / len(sample),
        "getsizeof": deep / len(sample),
    }


def measure(config: str, jobs: int, template: Path | None) -> dict[str, float]:
    """Run ``child`` in a fresh interpreter and return what it reported."""
    args = [config, "--jobs", str(jobs)]
    if template is not None:
        args += ["--template", str(template)]
    return _common.run_child("bench.memory", args)


def run(jobs: int, template: Path | None) -> str:
    """The results table, one row per transform."""
    rows = []
    for config in _common.TRANSFORMS:
        found = measure(config, jobs, template)
        growth = found["rss_after"] - found["rss_before"]
        rows.append(
            [
                config,
                f"{found['cached_json_bytes']:,.0f}",
                f"{growth / 2**20:,.1f}",
                f"{growth / jobs:,.0f}",
                f"{found['getsizeof']:,.0f}",
            ]
        )
    headers = [
        "cache transform",
        "cached JSON B/Job",
        f"RSS growth MiB ({jobs:,} Jobs)",
        "RSS B/Job",
        "getsizeof B/Job",
    ]
    return _common.markdown_table(headers, rows)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the arguments; run every configuration (or, with --child, one)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", default=DEFAULT_JOBS, help="Jobs to cache (20k)")
    parser.add_argument("--child", choices=list(_common.TRANSFORMS), help=argparse.SUPPRESS)
    _common.template_argument(parser)
    args = parser.parse_args(argv)
    jobs = _common.parse_sizes(args.jobs)[0]
    if args.child:
        print(json.dumps(child(args.child, jobs, args.template)))
        return 0
    table = run(jobs, args.template)
    _common.print_report(
        "Memory per cached Job (RSS growth of the informer store)",
        [(f"One fresh interpreter per row, {jobs:,} Jobs through Reflector._handle:", table)],
        [
            "cached JSON = the cached object re-encoded: what the transform keeps",
            f"wire JSON of the Job as served: {measure_wire(jobs, args.template):,.0f} B",
        ],
    )
    return 0


def measure_wire(jobs: int, template: Path | None) -> float:
    """Mean size of one Job as the API server sends it (managedFields included)."""
    factory = _common.JobFactory(_common.load_template(template))
    sample = list(factory.jobs(min(jobs, SAMPLE)))
    return sum(map(len, sample)) / len(sample)


if __name__ == "__main__":
    sys.exit(main())
