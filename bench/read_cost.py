"""Read cost: frozen objects shared by every reader vs a copy per read.

The cache hands out the frozen objects it stores (``objects.freeze``): a read is a dict
lookup and no copy. controller-runtime deep-copies on every read so a caller cannot
corrupt the cache; in Python that copy costs about as much as parsing the JSON again.
This benchmark times, per read, ``cache.get`` of one Job and the reconciler's indexed
``cache.list`` of one CronJob's 10 Jobs, returned as they are, and followed by each way
of copying: ``objects.thaw`` (the documented way to get a mutable copy),
``copy.deepcopy`` of the frozen object (which delegates to ``thaw``), ``copy.deepcopy``
of the same object as plain dicts and lists (what a cache of mutable dicts would pay),
and an orjson round trip (``loads(dumps(obj))``). Jobs are cached with the default
transform (managedFields stripped) and with the CronJob controller's ``slim_job``.

    python -m bench.read_cost [--jobs 10k] [--repeat 7] [--min-time 0.05] [--template job.json]
"""

from __future__ import annotations

import argparse
import copy
import itertools
import random
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import orjson

from bench import _common
from cronjob_operator.controllers.cronjob import JOB_OWNER_INDEX, slim_job
from cronjob_operator.runtime import objects
from cronjob_operator.runtime.cache import Transform, strip_managed_fields
from cronjob_operator.runtime.kinds import JOB

DEFAULT_JOBS = "10k"
QUERIES = 64

Copier = Callable[[Any], Any]


def _no_copy(value: Any) -> Any:
    return value


def _orjson_round_trip(value: Any) -> Any:
    return orjson.loads(orjson.dumps(value))


COPIERS: Sequence[tuple[str, Copier]] = (
    ("no copy (frozen)", _no_copy),
    ("objects.thaw", objects.thaw),
    ("copy.deepcopy (frozen)", copy.deepcopy),
    ("copy.deepcopy (plain dict)", copy.deepcopy),
    ("orjson round trip", _orjson_round_trip),
)


Query = tuple[str, str]
"""(namespace, name): of a Job for a get, of a CronJob for a list of its Jobs."""


def _rotating(
    read: Callable[[Query], Any], copier: Copier, queries: Sequence[Query]
) -> Callable[[], object]:
    """A call that reads the next query's result and copies it with ``copier``."""
    rotation = itertools.cycle(queries)

    def call() -> object:
        return copier(read(next(rotation)))

    return call


def measure(
    transform_name: str,
    transform: Transform,
    jobs: int,
    factory: _common.JobFactory,
    timing: _common.Timing,
) -> list[list[str]]:
    """Rows for one transform: a get, and a list of one CronJob's Jobs, per copier."""
    cache = _common.loaded_cache(list(factory.jobs(jobs)), transform)
    store = cache.informer(JOB).store
    rng = random.Random(jobs)
    all_owners = factory.owners(-(-jobs // _common.JOBS_PER_OWNER))
    owners = rng.sample(all_owners, min(QUERIES, len(all_owners)))
    lists = [(owner.namespace, owner.name) for owner in owners]
    gets = [
        (job["metadata"]["namespace"], job["metadata"]["name"])
        for job in rng.sample(store.list(), min(QUERIES, jobs))
    ]

    def get(query: Query) -> objects.Obj:
        return cache.get(JOB, query[1], query[0])

    def list_jobs(query: Query) -> list[objects.Obj]:
        return cache.list(JOB, namespace=query[0], matching_fields={JOB_OWNER_INDEX: query[1]})

    # The same reads from a cache of mutable dicts (a lookup; the copier then deep-copies).
    plain_gets = {query: objects.thaw(get(query)) for query in gets}
    plain_lists = {query: [objects.thaw(job) for job in list_jobs(query)] for query in lists}
    size = len(orjson.dumps(get(gets[0])))
    rows = []
    for read, queries, frozen, plain in (
        ("get", gets, get, plain_gets.__getitem__),
        ("list", lists, list_jobs, plain_lists.__getitem__),
    ):
        row = [f"{read}, {transform_name} ({size:,} B/Job)"]
        for label, copier in COPIERS:
            reader = plain if label.endswith("(plain dict)") else frozen
            row.append(f"{timing.per_call(_rotating(reader, copier, queries)) * 1e6:,.2f}")
        rows.append(row)
    return rows


def run(jobs: int, factory: _common.JobFactory, timing: _common.Timing) -> str:
    """The results table: µs per read for each read and each way of copying."""
    rows: list[list[str]] = []
    for name, transform in (
        ("managedFields stripped", strip_managed_fields),
        ("slim_job", slim_job),
    ):
        rows += measure(name, transform, jobs, factory, timing)
    return _common.markdown_table(["read (cache)", *(label for label, _ in COPIERS)], rows)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the arguments, run, print the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", default=DEFAULT_JOBS, help="Jobs in the cache (10k)")
    _common.Timing.add_arguments(parser)
    _common.template_argument(parser)
    args = parser.parse_args(argv)
    jobs = _common.parse_sizes(args.jobs)[0]
    factory = _common.JobFactory(_common.load_template(args.template))
    timing = _common.Timing.from_arguments(args)
    _common.print_report(
        "Read cost: shared frozen objects vs a copy per read",
        [
            (
                f"µs per read (median of {timing.repeat} timeit samples), {jobs:,} Jobs "
                "cached; list = one CronJob's 10 Jobs through the field index:",
                run(jobs, factory, timing),
            )
        ],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
