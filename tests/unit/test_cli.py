"""The command line: complete help, one-line errors for bad flags, the crd and version commands."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cronjob_operator import __version__, cli

RUN_FLAGS = (
    "--kubeconfig",
    "--metrics-bind-address",
    "--metrics-secure",
    "--no-metrics-secure",
    "--metrics-cert-path",
    "--health-probe-bind-address",
    "--leader-elect",
    "--leader-election-id",
    "--leader-election-namespace",
    "--leader-elect-lease-duration",
    "--leader-elect-renew-deadline",
    "--leader-elect-retry-period",
    "--sharded",
    "--shard-group",
    "--namespace",
    "--max-concurrent-reconciles",
    "--log-format",
    "--log-level",
    "--cronjob-controller",
    "--configdeployment-controller",
    "--graceful-shutdown-timeout",
    "--kube-api-qps",
    "--kube-api-burst",
    "--shutdown-delay",
    "--webhook-client-ca",
    "--webhook-cert-secret",
    "--webhook-service",
    "--inject-ca-bundle",
    "--webhook-cert-validity",
)


def test_run_help_documents_every_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["run", "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    for flag in RUN_FLAGS:
        assert flag in text, flag
    assert "--no-cronjob-controller" in text


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["run", "--max-concurrent-reconciles", "0"], "must be at least 1"),
        (["run", "--max-concurrent-reconciles", "many"], "not a whole number"),
        (["run", "--log-format", "xml"], "invalid choice"),
        (["run", "--health-probe-bind-address", "8081"], "bind address"),
        (["run", "--graceful-shutdown-timeout", "-1"], "more than 0"),
        (["run", "--kube-api-qps", "0"], "negative value to turn the limiter off"),
        (["run", "--kube-api-qps", "fast"], "not a number of requests per second"),
        (["run", "--kube-api-burst", "0"], "must be at least 1"),
        (["run", "--leader-elect-lease-duration", "soon"], "not a number of seconds"),
        (["run", "--leader-elect-renew-deadline", "0s"], "more than 0"),
        (
            ["run", "--leader-elect-lease-duration", "4s", "--leader-elect-renew-deadline", "5"],
            "lease_duration must be greater than renew_deadline",
        ),
        (
            ["run", "--leader-elect-renew-deadline", "3", "--leader-elect-retry-period", "2500ms"],
            "renew_deadline must be greater than 1.2 x retry_period",
        ),
        (["run", "--sharded"], "--sharded needs --leader-elect"),
        (
            ["run", "--sharded", "--leader-elect", "--no-cronjob-controller"],
            "--sharded shards the CronJob controller",
        ),
        (["run", "--shutdown-delay=-5s"], "more than 0"),
        (["run", "--webhook-cert-validity", "365d"], "not a duration such as 8760h"),
        (["run", "--inject-ca-bundle", "secret/x"], "is not KIND/NAME with KIND one of"),
        (["run", "--webhook-cert-secret", "s", "--webhook-port", "0"], "--webhook-port is 0"),
        (["launch"], "invalid choice"),
    ],
)
def test_bad_flags_fail_fast_with_one_line(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert needle in err


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--metrics-bind-address", ":8081"], "secure metrics need their own port"),
        (["--metrics-bind-address", ":8443", "--metrics-cert-path", "/nowhere"], "not a directory"),
    ],
)
def test_bad_secure_metrics_flags_stop_before_anything_starts(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["run", *argv])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert needle in err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["version"]) == 0
    assert capsys.readouterr().out.strip() == f"cronjob-operator {__version__}"


def test_crd_prints_every_generated_crd(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["crd"]) == 0
    docs = [doc for doc in yaml.safe_load_all(capsys.readouterr().out) if doc]
    assert sorted(doc["metadata"]["name"] for doc in docs) == [
        "concurrencygroups.batch.tutorial.kubebuilder.io",
        "configdeployments.apps.tutorial.kubebuilder.io",
        "cronjobs.batch.tutorial.kubebuilder.io",
    ]


def test_python_dash_m_is_the_same_program() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "cronjob_operator", "version"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.strip() == f"cronjob-operator {__version__}"


def lease_config(argv: list[str]) -> object:
    args = cli.build_parser().parse_args(["run", *argv])
    return cli._leader_election(args, namespace="ns", identity="me")


def test_the_lease_timing_flags_reach_the_config_and_default_to_controller_runtimes() -> None:
    from cronjob_operator.runtime import LeaderElectionConfig

    assert lease_config([]) == LeaderElectionConfig(
        name=cli.DEFAULT_LEADER_ELECTION_ID, namespace="ns", identity="me"
    )
    timing = lease_config(
        ["--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3",
         "--leader-elect-retry-period=500ms"]
    )  # fmt: skip
    assert isinstance(timing, LeaderElectionConfig)
    assert (timing.lease_duration, timing.renew_deadline, timing.retry_period) == (4, 3, 0.5)


def test_migrate_storage_refuses_a_version_the_crd_does_not_have(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["migrate-storage", "--to", "v3"])
    assert exited.value.code == 2
    assert "argument --to: invalid choice: 'v3'" in capsys.readouterr().err


def closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.mark.parametrize(
    ("server", "needle"),
    [
        (None, "cannot load a Kubernetes client configuration"),
        ("https://127.0.0.1:{port}", "127.0.0.1"),
    ],
    ids=["missing-kubeconfig", "unreachable-api-server"],
)
def test_migrate_storage_fails_with_one_line_and_status_1(
    server: str | None, needle: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    if server is not None:
        cluster = {"server": server.format(port=closed_port()), "insecure-skip-tls-verify": True}
        kubeconfig.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "c", "cluster": cluster}],
                    "users": [{"name": "u", "user": {"token": "t"}}],
                    "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                    "current-context": "x",
                }
            )
        )
    code = cli.main(["migrate-storage", "--to", "v2", "--kubeconfig", str(kubeconfig)])
    captured = capsys.readouterr()
    assert code == 1
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("migrate-storage: ")
    assert needle in lines[0]
