"""The cluster benchmarks of bench/ (issue 8) at a tiny size, so they do not rot.

Each benchmark starts its own local control plane (without the Job controller), creates
a handful of CronJobs and Jobs, runs the instrumented operator and prints its tables.
Only the shape of the output and the correctness checks are asserted, never a figure.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from bench import (
    _builtin,
    _go_tutorial,
    api_load,
    fire,
    naive_vs_indexed,
    plot,
    scale,
    shard,
    skew,
    throughput,
)
from tests.unit.test_bench_smoke import table_rows

Main = Callable[[Sequence[str] | None], int]

TINY = ["--sizes", "4", "--jobs-per-cronjob", "2"]


def test_scale_prints_every_table_and_the_plot_reads_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    argv = [*TINY, "--all", "--steady-seconds", "1", "--sample", "3"]
    assert scale.main(argv) == 0
    out = capsys.readouterr().out
    for caption in ("Scale (N CronJobs x M Jobs):", "API load:", "Naive vs indexed Job lookup:"):
        assert caption in out
    assert " 4/4 |" in out  # every CronJob got its status on the first reconcile
    for lookup in ("indexed", "scan", "live"):
        assert f" {lookup} |" in out
    pytest.importorskip("matplotlib")
    report = tmp_path / "scale.md"
    report.write_text(out)
    assert plot.main([str(report), str(tmp_path / "perf.png")]) == 0
    assert (tmp_path / "perf.png").read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize(
    ("main", "argv", "min_rows", "note"),
    [
        pytest.param(api_load.main, [*TINY, "--steady-seconds", "1"], 1, "", id="api_load"),
        pytest.param(naive_vs_indexed.main, [*TINY, "--sample", "2"], 1, "", id="naive_vs_indexed"),
        pytest.param(
            throughput.main,
            ["--cronjobs", "3", "--jobs-per-cronjob", "1", "--workers", "1,2"],
            2,
            "",
            id="throughput",
        ),
        pytest.param(
            shard.main,
            ["--cronjobs", "6", "--jobs-per-cronjob", "1", "--replicas", "1,3", "--timeout", "120"],
            6,  # 1 + 3 replicas, and the burst's line for each count
            r"fixed cost: one replica with nothing to cache held [0-9]+\.[0-9] MiB",
            id="shard",
        ),
    ],
)
def test_a_cluster_benchmark_prints_its_table(
    main: Main, argv: list[str], min_rows: int, note: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 0
    output = capsys.readouterr().out
    rows = table_rows(output)
    assert len(rows) >= min_rows, output
    assert re.search(note, output), output
    # The rows carry figures, not only labels: numeric cells in every row, and measured
    # ones (latency, rate, per-reconcile counts: printed with decimals) in the table.
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert sum(bool(re.fullmatch(r"[0-9][0-9,.]*", c)) for c in cells) >= 3, row
    assert any(re.search(r"\|\s*[0-9][0-9,]*\.[0-9]+\s*\|", row) for row in rows), output


def test_skew_measures_both_controllers(capsys: pytest.CaptureFixture[str]) -> None:
    assert skew.main(["--cronjobs", "3", "--margin", "2", "--limits", "20/30"]) == 0
    out = capsys.readouterr().out
    assert "ours (operator) |" in out
    assert "built-in batch/v1 |" in out
    assert "qps 20 / burst 30: bare client" in out


def test_fire_closes_with_the_per_run_cpu_ratio(capsys: pytest.CaptureFixture[str]) -> None:
    """The built-in's phase runs every time (a second kube-controller-manager); with the
    Go tutorial built (hack/build-go-tutorial.sh) its phase runs too (about a minute
    more); without it, the Go side is skipped with one line."""
    go_built, why = _go_tutorial.locate(None)
    assert fire.main(["--cronjobs", "4", "--margin", "12"]) == 0
    out = capsys.readouterr().out
    rows = table_rows(out)
    sides = ["operator", "bare client", fire.BUILTIN_LABEL, *([fire.GO_LABEL] if go_built else [])]
    # Every side created every Job of its minute and wrote every status.
    for side in sides:
        row = next(r for r in rows if r.startswith(f"| {side} "))
        cells = [cell.strip() for cell in row.strip().strip("|").split("|")]
        assert cells[fire.HEADERS.index("Jobs")] == "4", row  # not another column's 4
        assert cells[fire.HEADERS.index("all status s")] != "nan", row
        assert re.fullmatch(r"[0-9.]+", cells[fire.HEADERS.index("peak RSS MiB")]), row
    # The built-in's own process, its user, created the 4 Jobs and an Event for each.
    own = re.search(rf"its own client \({_builtin.USER}\) in the fire, .*POST 201 (\d+)", out)
    assert own is not None, out
    assert int(own[1]) >= 8, out
    assert re.search(r"built-in requests, startup: .*; fire: .*POST jobs 4\b", out), out
    closing = out.split("Per-run CPU ratio against the bare client")[1]
    # A ratio is "-" when the other side's CPU was under /proc's tick (the built-in's
    # fire of 4 runs may be).
    ratios = 3 if go_built else 2
    ratio = r"\|\s*(?:[0-9.]+x|-) "
    assert re.search(rf"\| CPU per run ms\s*\|.*({ratio}){{{ratios}}}\|", closing), out
    assert "operator / built-in" in closing
    if not go_built:
        assert f"{fire.GO_LABEL}: skipped ({why})" in out
