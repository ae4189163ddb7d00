"""bench.fire's Go side without a cluster: finding the built tutorial and the closing table.

The Go phase itself runs in tests/integration/test_bench_scale_smoke.py when the
tutorial's manager is built; here, that a machine without it is told why in one line,
and that the closing table gives the operator's figures over each other side's.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bench import _cluster, _go_tutorial, fire


def side(label: str, fire_cpu: float, runs: int = 10) -> fire.Side:
    """A side of ``runs`` runs (the operator's with two reconciles a run)."""
    counts = _cluster.ApiCounts({("POST", "jobs"): runs})
    reconciles = 2 * runs if label == "operator" else None
    created = [0.0] * runs
    return fire.Side(label, 1.0, fire_cpu, runs, created, 1.0, counts, counts, 51200, reconciles)


def test_an_empty_cache_skips_the_go_side_naming_the_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if shutil.which("go") is None:
        pytest.skip("the script reads the Go version for its cache key")
    monkeypatch.setenv("CRONJOB_OPERATOR_CACHE", str(tmp_path))
    directory, why = _go_tutorial.locate(None)
    assert directory is None
    assert "not built: run hack/build-go-tutorial.sh" in why, why
    assert "\n" not in why


def test_a_given_directory_without_the_manager_is_refused_by_name(tmp_path: Path) -> None:
    (tmp_path / _go_tutorial.CRD_FILE).write_text("kind: CustomResourceDefinition\n")
    directory, why = _go_tutorial.locate(tmp_path)
    assert directory is None
    assert why == f"{tmp_path} has no manager (hack/build-go-tutorial.sh)"
    (tmp_path / "manager").write_bytes(b"")
    assert _go_tutorial.locate(tmp_path) == (tmp_path, "")


def test_the_closing_table_divides_the_operator_by_each_other_side() -> None:
    table = fire.ratio_table(
        side("operator", 0.03), [side("bare client", 0.02), side("Go tutorial", 0.04)]
    )
    lines = table.splitlines()
    headings = [cell.strip() for cell in lines[0].strip("|").split("|")]
    assert headings == [
        "figure",
        "operator",
        "bare client",
        "Go tutorial",
        "operator / bare",
        "operator / Go",
    ]
    per_run = next(line for line in lines if line.startswith("| CPU per run ms"))
    assert [cell.strip() for cell in per_run.strip("|").split("|")] == [
        "CPU per run ms",
        "3.00",
        "2.00",
        "4.00",
        "1.50x",
        "0.75x",
    ]


def test_without_the_go_side_the_table_has_no_go_column() -> None:
    table = fire.ratio_table(side("operator", 0.03), [side("bare client", 0.02)])
    assert "Go" not in table
    assert "operator / bare" in table.splitlines()[0]


def test_a_skipped_go_side_is_said_in_the_notes() -> None:
    sides = [side("operator", 0.03), side("bare client", 0.02)]
    _, notes = fire.render(sides, 10, 5, Path("/tmp/logs"), go_skipped="--no-go-tutorial")
    assert "Go tutorial: skipped (--no-go-tutorial)" in notes
