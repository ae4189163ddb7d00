"""bench.fire's built-in side without a cluster: which Jobs and statuses count, the notes
and the closing table.

The phase itself (a second kube-controller-manager running only cronjob-controller) runs
in tests/integration/test_bench_scale_smoke.py.
"""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

from bench import _builtin, fire
from bench.skew import Seen
from tests.unit.test_bench_fire_go import side

MINUTE = 1_800_000_000.0


def test_neither_kube_controller_manager_of_the_plane_runs_the_cronjob_or_job_controller() -> None:
    assert "cronjob-controller" not in _builtin.PLANE_CONTROLLERS
    assert "job-controller" not in _builtin.PLANE_CONTROLLERS
    assert "garbage-collector-controller" in _builtin.PLANE_CONTROLLERS


def test_the_builtins_runs_are_named_by_their_minute_and_ours_by_their_second() -> None:
    seen = [
        Seen("batch/v1", f"builtin-00000-{int(MINUTE) // 60}", MINUTE + 2, MINUTE + 2.1),
        Seen("batch/v1", f"builtin-00001-{int(MINUTE) // 60 - 1}", MINUTE - 58, MINUTE - 57),
        Seen("batch.tutorial.kubebuilder.io/v1", f"cron-00000-{int(MINUTE)}", MINUTE + 3, 0),
    ]
    assert fire._created(seen, fire.BUILTIN_PREFIX, MINUTE) == [2.0]
    assert fire._created(seen, fire.OPERATOR_PREFIX, MINUTE) == [3.0]


def status_event(last: str | None, active: list[dict[str, Any]]) -> dict[str, Any]:
    status: dict[str, Any] = {"active": active}
    if last is not None:
        status["lastScheduleTime"] = last
    metadata = {"namespace": "bench-00", "name": "builtin-00000"}
    return {"type": "MODIFIED", "object": {"metadata": metadata, "status": status}}


def test_a_builtin_status_counts_once_it_names_the_minute_and_an_active_job() -> None:
    watcher = _builtin.BuiltinStatusWatcher(rest=None, target=MINUTE)  # type: ignore[arg-type]
    stamp = "2027-01-15T08:00:00Z"
    assert _builtin.BuiltinStatusWatcher.kind.api_version == "batch/v1"
    watcher._record(status_event(stamp, []), 1.0)
    watcher._record(status_event(None, [{"name": "builtin-00000-1"}]), 2.0)
    assert watcher.recorded == {}
    watcher._record(status_event(stamp, [{"name": "builtin-00000-30000000"}]), 3.0)
    watcher._record(status_event(stamp, [{"name": "builtin-00000-30000000"}]), 4.0)
    assert watcher.recorded == {"bench-00/builtin-00000": 3.0}


def test_its_own_requests_are_the_difference_of_two_readings() -> None:
    before = collections.Counter({"GET 200": 5, "POST 201": 2})
    after = collections.Counter({"GET 200": 5, "POST 201": 10, "PUT 200": 4})
    assert _builtin.since(after, before) == "POST 201 8, PUT 200 4"
    assert _builtin.since(before, before) == "none"


def test_the_closing_table_gives_ours_over_the_builtin_for_skew_status_and_rss() -> None:
    builtin = side(fire.BUILTIN_LABEL, 0.01)
    builtin.created = [1.0] * 10
    table = fire.ratio_table(side("operator", 0.03), [side("bare client", 0.02), builtin])
    lines = table.splitlines()
    assert lines[0].rstrip().endswith("| operator / bare | operator / built-in |")
    rows = {line.split("|")[1].strip(): line for line in lines[2:]}
    for figure in ("CPU per run ms", "creation p99 s", "all status s", "fire requests"):
        assert figure in rows
    assert rows["CPU per run ms"].rstrip().endswith("|           1.50x |               3.00x |")
    assert rows["creation p99 s"].rstrip().endswith("|               - |               0.00x |")
    assert "peak RSS MiB" in rows


def test_the_notes_say_the_builtins_limit_or_that_it_was_skipped() -> None:
    sides = [side("operator", 0.03), side("bare client", 0.02)]
    logs = Path("/tmp/logs")
    _, notes = fire.render(sides, 10, 5, logs, "--no-go-tutorial")
    assert "built-in: skipped (--no-builtin)" in notes
    _, notes = fire.render(sides, 10, 5, logs, "--no-go-tutorial", _builtin.STOCK)
    assert any("client limit qps 20 / burst 30" in note for note in notes), notes
    _, notes = fire.render(sides, 10, 5, logs, "--no-go-tutorial", _builtin.UNTHROTTLED)
    assert any("client limit unthrottled" in note for note in notes), notes
