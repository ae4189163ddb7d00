"""The benchmarks in bench/ still run: each at a tiny size, printing its table.

No figure is asserted (timings on a shared CI machine mean nothing); only that every
benchmark runs through the current runtime code and prints a markdown table with one
row per configuration, plus the machine it ran on.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import pytest

from bench import (
    _common,
    configdeployment_hash,
    configmap_cache,
    exclusion_walk,
    group_poll,
    group_waiters,
    hostile_clients,
    index_vs_scan,
    ingest,
    memory,
    plugin_start,
    read_cost,
    reconcile_cost,
    request_cost,
    retry_storm,
    run_cost,
    run_request_memo,
    start_timeout_pods,
    stored_object_cost,
)
from cronjob_operator.controllers.cronjob import JOB_OWNER_INDEX
from cronjob_operator.runtime.kinds import JOB

QUICK = ["--repeat", "1", "--min-time", "0.0005"]

Main = Callable[[Sequence[str] | None], int]


def table_rows(output: str) -> list[str]:
    """The body rows of every markdown table in ``output`` (not headers, not separators)."""
    lines = [line for line in output.splitlines() if line.startswith("|")]
    separator = re.compile(r"\|[-:| ]+\|")
    return [
        line
        for line, after in zip(lines, [*lines[1:], ""], strict=True)
        if not separator.fullmatch(line) and not separator.fullmatch(after)
    ]


@pytest.mark.parametrize(
    ("main", "argv", "rows"),
    [
        pytest.param(index_vs_scan.main, ["--sizes", "20,55", *QUICK], 2, id="index_vs_scan"),
        pytest.param(read_cost.main, ["--jobs", "30", *QUICK], 4, id="read_cost"),
        pytest.param(memory.main, ["--jobs", "50"], 3, id="memory"),
        pytest.param(
            configmap_cache.main,
            ["--config-maps", "50", "--size", "1024"],
            3,
            id="configmap_cache",
        ),
        pytest.param(
            configdeployment_hash.main,
            ["--secrets", "2", "--keys", "20", *QUICK],
            1,
            id="configdeployment_hash",
        ),
        pytest.param(
            reconcile_cost.main,
            ["--reconciles", "5", "--jobs", "2", "--backfill-reconciles", "2"],
            6,
            id="reconcile_cost",
        ),
        pytest.param(
            group_poll.main, ["--limit", "3", "--waiters", "2,20", *QUICK], 2, id="group_poll"
        ),
        pytest.param(
            group_waiters.main,
            ["--waiters", "5", "--window", "10", "--releases", "3"],
            1,
            id="group_waiters",
        ),
        pytest.param(plugin_start.main, ["--repeat", "1", "--top", "2"], 7, id="plugin_start"),
        pytest.param(ingest.main, ["--events", "120", "--repeat", "1"], 6, id="ingest"),
        pytest.param(request_cost.main, QUICK, 3, id="request_cost"),
        pytest.param(run_request_memo.main, QUICK, 4, id="run_request_memo"),
        pytest.param(run_cost.main, ["--cronjobs", "3", "--rounds", "1"], 1, id="run_cost"),
        pytest.param(
            start_timeout_pods.main,
            ["--pods", "1,5", "--annotation-kib", "1"],
            2,
            id="start_timeout_pods",
        ),
        pytest.param(exclusion_walk.main, ["--dates", "3"], 3, id="exclusion_walk"),
        pytest.param(
            stored_object_cost.main,
            ["--kinds", "ConcurrencyGroup", "--top", "2", "--huge", "4096", "--every", "8"],
            6,
            id="stored_object_cost",
        ),
        pytest.param(retry_storm.main, ["--requests", "20", "--seconds", "2"], 2, id="retry_storm"),
        pytest.param(
            hostile_clients.main,
            ["--section", "probes", "--clients", "0,3", "--requests", "2", "--skip-lifetime"],
            2,
            id="hostile_clients",
        ),
        pytest.param(
            hostile_clients.main,
            ["--section", "webhooks", "--reviews", "2", "--attacks", "none,all"],
            2,
            id="hostile_webhooks",
        ),
    ],
)
def test_a_benchmark_runs_and_prints_its_table(
    main: Main, argv: list[str], rows: int, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 0
    output = capsys.readouterr().out
    assert "machine: nproc=" in output
    assert len(table_rows(output)) == rows, output


def test_ingest_can_print_a_profile(capsys: pytest.CaptureFixture[str]) -> None:
    assert ingest.main(["--events", "40", "--repeat", "1", "--profile"]) == 0
    assert "cumtime" in capsys.readouterr().out


def test_synthetic_jobs_are_distinct_and_owned_ten_to_a_cronjob() -> None:
    factory = _common.JobFactory()
    cache = _common.loaded_cache(list(factory.jobs(40)))
    jobs = cache.list(JOB)
    assert len({job["metadata"]["uid"] for job in jobs}) == 40
    owner = factory.owners(4)[2]
    owned = cache.list(
        JOB,
        namespace=owner.namespace,
        matching_fields={JOB_OWNER_INDEX: owner.name},
    )
    assert len(owned) == _common.JOBS_PER_OWNER
