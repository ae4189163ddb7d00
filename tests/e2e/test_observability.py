"""The dashboards and alerts, proven on a real Prometheus scraping a real manager.

config/grafana holds two Grafana dashboards and config/prometheus/rules.yaml the alerts
(the chart installs the same files). Reading them proves nothing about whether the
metrics they name exist, so here a manager runs on the local control plane with
/metrics on a free port and leader election on, runs CronJobs (one that succeeds, one
that fails, one still running), and a Prometheus built from Go modules
(hack/build-tools.sh) scrapes it every second and loads the rules. Then every panel's
query goes to Prometheus's HTTP API and must return at least one series (the panels
of the sharding row only parse here: tests/e2e/test_sharding.py finds their series on
sharded replicas), and every
alert expression must evaluate and each metric selector in it must return series (the
expression itself returns nothing while all is well, which is the point of an alert).
A panel or an alert that names a metric the manager does not export fails the test.
``promtool check rules`` and ``promtool test rules`` (each alert fires on synthetic
series, and stays quiet on healthy ones) need no cluster.
"""

from __future__ import annotations

import json
import subprocess
import threading
import urllib.parse
import urllib.request
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from cronjob_operator.controllers import configdeployment, cronjob
from cronjob_operator.envtest import FAIL_LABEL, ControlPlane, wait_for
from cronjob_operator.runtime.client import RestClient, load_configuration
from cronjob_operator.runtime.clock import FakeClock
from cronjob_operator.runtime.controllerutil import parse_time
from cronjob_operator.runtime.leaderelection import LeaderElectionConfig
from cronjob_operator.runtime.manager import Manager, Options
from tests.e2e.dashboards import DASHBOARDS, SHARDING_ROW, panel_queries
from tests.e2e.support import _die_with_parent, apply_all, cronjob_manifest, free_port, jobs
from tests.integration.support import REPO, RunningManager, install_crds, spy_on_events
from tests.tools import tool

RULES = REPO / "config" / "prometheus" / "rules.yaml"
RULE_TESTS = Path(__file__).with_name("alerts_test.yaml")
CRONJOBS = "cronjobs.batch.tutorial.kubebuilder.io"


def alert_rules() -> list[dict[str, Any]]:
    spec = yaml.safe_load(RULES.read_text())["spec"]
    return [rule for group in spec["groups"] for rule in group["rules"]]


@pytest.fixture
def rules_file(tmp_path: Path) -> Path:
    """The PrometheusRule's spec as a plain Prometheus rules file."""
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump(yaml.safe_load(RULES.read_text())["spec"]))
    return path


def test_dashboards_are_grafana_json_with_queries() -> None:
    assert [path.name for path in DASHBOARDS] == [
        "cronjobs-dashboard.json",
        "runtime-dashboard.json",
    ]
    for path in DASHBOARDS:
        dashboard = json.loads(path.read_text())
        ids = [panel["id"] for panel in dashboard["panels"]]
        assert len(ids) == len(set(ids)), f"{path.name}: panel ids repeat"
        charts = [panel for panel in dashboard["panels"] if panel["type"] != "row"]
        assert all(panel["targets"] for panel in charts), path.name
    assert panel_queries(sharding=True), f"no panels under the {SHARDING_ROW!r} row"


def test_promtool_check_rules_passes(rules_file: Path) -> None:
    result = subprocess.run(
        [tool("promtool"), "check", "rules", str(rules_file)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(alert_rules())} rules found" in result.stdout


def test_every_alert_fires_on_bad_series_and_not_on_good(rules_file: Path, tmp_path: Path) -> None:
    tests = tmp_path / "alerts_test.yaml"
    rules = yaml.safe_load(rules_file.read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            rule.pop("annotations", None)
    (tmp_path / "bare-rules.yaml").write_text(yaml.safe_dump(rules))
    spec = yaml.safe_load(RULE_TESTS.read_text())
    spec["rule_files"] = [str(tmp_path / "bare-rules.yaml")]
    tests.write_text(yaml.safe_dump(spec))
    checks = [check for case in spec["tests"] for check in case["alert_rule_test"]]
    names = {rule["alert"] for rule in alert_rules()}
    assert {c["alertname"] for c in checks if c["exp_alerts"]} == names, "an alert never fires"
    assert {c["alertname"] for c in checks if not c["exp_alerts"]} == names, "one is never quiet"
    result = subprocess.run(
        [tool("promtool"), "test", "rules", str(tests)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


# -- the real thing ---------------------------------------------------------------------


class Prometheus:
    """A Prometheus process on 127.0.0.1 and its HTTP API."""

    def __init__(self, directory: Path, target: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(directory / "rules.yaml")],
            "scrape_configs": [
                {"job_name": "cronjob-operator", "static_configs": [{"targets": [target]}]}
            ],
        }
        (directory / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.log = directory / "prometheus.log"
        self.argv = [
            tool("prometheus"),
            f"--config.file={directory / 'prometheus.yml'}",
            f"--storage.tsdb.path={directory / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--log.level=warn",
        ]
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as log:
            self._process = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent(),  # noqa: PLW1509 - only prctl
            )

    def stop(self) -> None:
        if self._process is None:
            return
        self._process.terminate()
        try:
            self._process.wait(30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(10)

    def api(self, path: str, **params: str) -> dict[str, Any]:
        """GET /api/v1/<path>; the decoded body, for errors (400, 422) too."""
        url = f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return json.loads(response.read())  # type: ignore[no-any-return]
        except urllib.error.HTTPError as error:
            return json.loads(error.read())  # type: ignore[no-any-return]

    def series(self, query: str) -> list[dict[str, Any]]:
        body = self.api("query", query=query)
        assert body["status"] == "success", f"{query!r}: {body.get('error')}"
        return list(body["data"]["result"])

    def ready(self) -> bool:
        assert self._process is not None
        assert self._process.poll() is None, f"prometheus exited:\n{self.log.read_text()}"
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as response:
                return int(response.status) == 200
        except OSError:
            return False


def selectors(node: Any) -> Iterator[str]:
    """The series selectors (``{__name__="x", label="v"}``) in a parse_query AST."""
    if isinstance(node, dict):
        if node.get("type") in {"vectorSelector", "matrixSelector"}:
            yield (
                "{"
                + ", ".join(
                    f"{m['name']}{m['type']}{json.dumps(m['value'])}" for m in node["matchers"]
                )
                + "}"
            )
            return
        for value in node.values():
            yield from selectors(value)
    elif isinstance(node, list):
        for value in node:
            yield from selectors(value)


@pytest.fixture
def manager_that_ran_cronjobs(
    control_plane: ControlPlane, namespace: str
) -> Iterator[tuple[RunningManager, int]]:
    """A manager (metrics on a free port, leader) that ran good, failing, running CronJobs."""
    install_crds(control_plane)
    clock = FakeClock()
    port = free_port()
    options = Options(
        metrics_bind_address=f"127.0.0.1:{port}",
        health_probe_bind_address="0",
        leader_election=LeaderElectionConfig(name="observability-e2e", namespace=namespace),
    )
    manager = Manager(RestClient(load_configuration(str(control_plane.kubeconfig))), options)
    events = spy_on_events(manager)
    controllers = {
        "cronjob": cronjob.setup(manager, clock=clock),
        "configdeployment": configdeployment.setup(manager, clock=clock),
    }
    codes: list[int] = []
    thread = threading.Thread(
        target=lambda: codes.append(manager.run(install_signal_handlers=False)), daemon=True
    )
    thread.start()
    running = RunningManager(manager, controllers, thread, events)
    try:
        wait_for(
            lambda: manager.elector is not None and manager.elector.is_leader, 60, message="leader"
        )
        run_cronjobs(control_plane, namespace, running, clock)
        yield running, port
    finally:
        manager.stop()
        thread.join(60)
        assert codes == [0]


def run_cronjobs(
    control_plane: ControlPlane, namespace: str, operator: RunningManager, clock: FakeClock
) -> None:
    failing = cronjob_manifest("fails", namespace, run="1s")
    failing["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"] = {FAIL_LABEL: "true"}
    apply_all(
        control_plane,
        [
            cronjob_manifest("succeeds", namespace, run="1s"),
            failing,
            cronjob_manifest("keeps-running", namespace, run="1h"),
            # A deadline of 0 never starts a run: each time is skipped (DeadlinePassed).
            cronjob_manifest("too-late", namespace, startingDeadlineSeconds=0),
        ],
    )
    created = control_plane.kubectl_json("get", CRONJOBS, "succeeds", "-n", namespace)
    start = parse_time(created["metadata"]["creationTimestamp"])
    assert start is not None
    tick = start.replace(second=0, microsecond=0) + timedelta(minutes=1)
    clock.set(tick + timedelta(seconds=1))
    for name in ("succeeds", "fails", "keeps-running", "too-late"):
        operator.kick("cronjob", namespace, name)

    def finished() -> int:
        return sum(
            1
            for job in jobs(control_plane, namespace)
            for c in (job.get("status") or {}).get("conditions") or ()
            if c["type"] in {"Complete", "Failed"} and c["status"] == "True"
        )

    wait_for(lambda: finished() == 2, 90, interval=0.5, message="the two short runs finished")
    # The next reconciles see them finished (SawCompletedJob): the finished counters move.
    for name in ("succeeds", "fails"):
        operator.kick("cronjob", namespace, name)
    wait_for(
        lambda: all(
            not (
                control_plane.kubectl_json("get", CRONJOBS, name, "-n", namespace).get("status")
                or {}
            ).get("active")
            for name in ("succeeds", "fails")
        ),
        60,
        message="finished runs left status.active",
    )


@pytest.fixture
def prometheus(
    manager_that_ran_cronjobs: tuple[RunningManager, int], tmp_path: Path, rules_file: Path
) -> Iterator[Prometheus]:
    _, port = manager_that_ran_cronjobs
    server = Prometheus(tmp_path, f"127.0.0.1:{port}")
    server.start()
    try:
        wait_for(server.ready, 60, interval=0.2, message="prometheus /-/ready")
        # Three scrapes of the manager, so every rate() has samples to work with.
        wait_for(
            lambda: server.series('count_over_time(up{job="cronjob-operator"}[1m]) >= 3'),
            60,
            interval=0.5,
            message="three scrapes of the manager",
        )
        yield server
    finally:
        server.stop()


def test_every_panel_and_alert_returns_data_from_prometheus(prometheus: Prometheus) -> None:
    empty = [f"{where}: {expr}" for where, expr in panel_queries() if not prometheus.series(expr)]
    assert empty == [], "panels whose query returns no series:\n" + "\n".join(empty)
    # The sharding row needs --sharded replicas (tests/e2e/test_sharding.py); here, it parses.
    for where, expr in panel_queries(sharding=True):
        assert prometheus.api("parse_query", query=expr)["status"] == "success", where

    missing = []
    for rule in alert_rules():
        prometheus.series(rule["expr"])  # parses and evaluates (may be empty: all is well)
        ast = prometheus.api("parse_query", query=rule["expr"])
        assert ast["status"] == "success", ast
        found = list(selectors(ast["data"]))
        assert found, rule["alert"]
        missing += [f"{rule['alert']}: {s}" for s in found if not prometheus.series(s)]
    assert missing == [], "alerts naming series the manager does not export:\n" + "\n".join(missing)

    loaded = prometheus.api("rules", type="alert")["data"]["groups"]
    health = {rule["name"]: rule["health"] for group in loaded for rule in group["rules"]}
    assert health == dict.fromkeys((rule["alert"] for rule in alert_rules()), "ok")
    failed = prometheus.series('cronjob_operator_jobs_finished_total{condition="Failed"}')
    assert {series["metric"]["cronjob"] for series in failed} >= {"fails"}
    skipped = prometheus.series("cronjob_operator_runs_skipped_total")
    assert {(s["metric"]["cronjob"], s["metric"]["reason"]) for s in skipped} == {
        ("too-late", "DeadlinePassed")
    }


def test_selectors_are_read_from_the_ast() -> None:
    ast = {
        "type": "binaryExpr",
        "lhs": {
            "type": "vectorSelector",
            "matchers": [
                {"name": "__name__", "type": "=", "value": "up"},
                {"name": "job", "type": "=~", "value": 'a"b'},
            ],
        },
        "rhs": {"type": "numberLiteral", "val": "1"},
    }
    assert list(selectors(ast)) == ['{__name__="up", job=~"a\\"b"}']
