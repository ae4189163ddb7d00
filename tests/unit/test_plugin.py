"""``kubectl cjt`` without a cluster: arguments, ``next SCHEDULE`` with DST marks, errors.

The verbs that talk to a cluster are driven against the local control plane in
tests/integration/test_cronjob_features.py.
"""

from __future__ import annotations

import pytest

from cronjob_operator import plugin

VERBS = ("run", "next", "suspend", "resume", "history", "backfill", "groups")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = plugin.main(list(argv))
    except SystemExit as exc:  # argparse: --help and usage errors
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("verb", VERBS)
def test_each_verb_has_help_with_kubectl_flags(
    capsys: pytest.CaptureFixture[str], verb: str
) -> None:
    code, out, _ = run(capsys, verb, "--help")
    assert code == 0
    for flag in ("--kubeconfig", "--context", "-n NAMESPACE", "-A"):
        assert flag in out


def test_next_marks_dst_transitions(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys,
        "next",
        "30 1 * * *",
        "--time-zone",
        "America/New_York",
        "--count",
        "3",
        "--from",
        "2027-03-13T00:00:00Z",
    )
    assert code == 0
    assert out.splitlines() == [
        "2027-03-13T01:30:00-05:00  (2027-03-13T06:30:00Z)",
        "2027-03-14T01:30:00-05:00  (2027-03-14T06:30:00Z)",
        "2027-03-15T01:30:00-04:00  (2027-03-15T05:30:00Z)  <- DST: UTC-05:00 -> UTC-04:00",
    ]


def test_next_every_starts_from_the_given_time(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "next", "@every 90m", "--count", "2", "--from", "2027-01-01T00:00:00Z"
    )
    assert code == 0
    assert [line.split()[0] for line in out.splitlines()] == [
        "2027-01-01T01:30:00+00:00",
        "2027-01-01T03:00:00+00:00",
    ]


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (("next", "61 * * * *"), "spec.schedule"),
        (("next", "0 * * * *", "--time-zone", "Mars/Olympus"), "spec.timeZone"),
        (("--kubeconfig", "/nonexistent/kubeconfig", "history", "x"), "/nonexistent/kubeconfig"),
    ],
)
def test_errors_are_one_line_and_non_zero(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], needle: str
) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 1
    assert out == ""
    assert len(err.strip().splitlines()) == 1
    assert needle in err


def test_bad_usage_exits_2_naming_the_problem(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "next", "0 * * * *", "--count", "0")
    assert code == 2
    assert "--count" in err
