"""Indexed list vs scan-and-filter: what the ``.metadata.controller`` field index buys.

The CronJob reconciler finds its Jobs with ``cache.list(JOB, namespace=ns,
matching_fields={".metadata.controller": name})``, which is one dict lookup in the
store's index and then O(results). The naive alternative lists every cached Job and
keeps those whose controller ownerReference names the CronJob; a middle road lists the
namespace (through the always-present namespace index) and filters that. This benchmark
fills a Cache with N Jobs (10 per CronJob, CronJobs spread over 10 namespaces; cached
through the controller's ``slim_job`` transform, as in production) and times one call of
each, rotating over 64 CronJobs. Target (issue 3): at 100k Jobs the indexed call is at
least 1000x faster than the full scan.

    python -m bench.index_vs_scan [--sizes 1k,10k,100k] [--repeat 7] [--min-time 0.05]
        [--template job.json]
"""

from __future__ import annotations

import argparse
import itertools
import random
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import _common
from cronjob_operator.api.batch_v1 import CRONJOB
from cronjob_operator.controllers.cronjob import JOB_OWNER_INDEX
from cronjob_operator.runtime import objects
from cronjob_operator.runtime.cache import Cache
from cronjob_operator.runtime.kinds import JOB

DEFAULT_SIZES = "1k,10k,100k"
TARGET_RATIO = 1000.0
QUERIES = 64


def owned_by(jobs: Sequence[objects.Obj], namespace: str, owner: str) -> list[objects.Obj]:
    """The Jobs whose controller ownerReference is the CronJob ``namespace/owner``."""
    found = []
    for job in jobs:
        if objects.namespace_of(job) != namespace:
            continue
        ref = objects.controller_ref(job)
        if (
            ref is not None
            and ref.get("name") == owner
            and ref.get("kind") == CRONJOB.kind
            and ref.get("apiVersion") == CRONJOB.api_version
        ):
            found.append(job)
    return found


def indexed(cache: Cache, namespace: str, owner: str) -> list[objects.Obj]:
    """What the reconciler does: one field-index lookup."""
    return cache.list(JOB, namespace=namespace, matching_fields={JOB_OWNER_INDEX: owner})


def namespace_then_filter(cache: Cache, namespace: str, owner: str) -> list[objects.Obj]:
    """List the namespace through its index, then filter by owner."""
    return owned_by(cache.list(JOB, namespace=namespace), namespace, owner)


def full_scan(cache: Cache, namespace: str, owner: str) -> list[objects.Obj]:
    """List every cached Job, then filter by namespace and owner."""
    return owned_by(cache.list(JOB), namespace, owner)


def _rotating(
    strategy: Callable[[Cache, str, str], list[objects.Obj]],
    cache: Cache,
    queries: Sequence[tuple[str, str]],
) -> Callable[[], object]:
    """A call that runs ``strategy`` for the next (namespace, CronJob) of ``queries``."""
    rotation = itertools.cycle(queries)

    def call() -> object:
        return strategy(cache, *next(rotation))

    return call


def measure(size: int, factory: _common.JobFactory, timing: _common.Timing) -> list[object]:
    """One table row: per-call µs of each strategy at ``size`` cached Jobs, and the ratio."""
    cache = _common.loaded_cache(list(factory.jobs(size)))
    owners = factory.owners(-(-size // _common.JOBS_PER_OWNER))
    picks = random.Random(size).sample(range(len(owners)), min(QUERIES, len(owners)))
    queries = [(owners[i].namespace, owners[i].name) for i in picks]
    for i, (namespace, name) in zip(picks, queries, strict=True):  # all must agree first
        expected = sorted(objects.object_key(job) for job in indexed(cache, namespace, name))
        # The factory gives each owner JOBS_PER_OWNER Jobs in turn; the last may get fewer.
        owned = min(_common.JOBS_PER_OWNER, size - i * _common.JOBS_PER_OWNER)
        assert len(expected) == owned, f"the index found {len(expected)} of {name}'s {owned}"
        for strategy in (namespace_then_filter, full_scan):
            got = sorted(objects.object_key(job) for job in strategy(cache, namespace, name))
            assert got == expected, f"{strategy.__name__} disagrees with the index"
    timings = [
        timing.per_call(_rotating(strategy, cache, queries))
        for strategy in (indexed, namespace_then_filter, full_scan)
    ]
    index_s, namespace_s, scan_s = timings
    ratio = scan_s / index_s
    return [
        f"{size:,}",
        f"{index_s * 1e6:.2f}",
        f"{namespace_s * 1e6:,.1f}",
        f"{scan_s * 1e6:,.1f}",
        f"{ratio:,.0f}x",
        f"{namespace_s / index_s:,.0f}x",
    ]


def run(sizes: Sequence[int], factory: _common.JobFactory, timing: _common.Timing) -> str:
    """The results table for ``sizes``."""
    headers = [
        "cached Jobs",
        "indexed µs/call",
        "ns index + filter µs/call",
        "full scan µs/call",
        "scan / indexed",
        "ns+filter / indexed",
    ]
    return _common.markdown_table(headers, [measure(size, factory, timing) for size in sizes])


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the arguments, run, print the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=DEFAULT_SIZES, help="cached Job counts (1k,10k,...)")
    _common.Timing.add_arguments(parser)
    _common.template_argument(parser)
    args = parser.parse_args(argv)
    factory = _common.JobFactory(_common.load_template(args.template))
    timing = _common.Timing.from_arguments(args)
    table = run(_common.parse_sizes(args.sizes), factory, timing)
    _common.print_report(
        "Indexed list vs scan-and-filter (Cache.list of one CronJob's Jobs)",
        [
            (
                f"Median per call over {timing.repeat} timeit samples, "
                "10 Jobs per CronJob, 10 namespaces:",
                table,
            )
        ],
        [f"target: at 100k Jobs the indexed call is >= {TARGET_RATIO:,.0f}x faster than a scan"],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
