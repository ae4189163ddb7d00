"""The operator as a real process, for tests that kill it, and the fault-results table.

``operator_process`` starts ``python -m cronjob_operator run`` (JSON logs to a file,
probes on a free port) for the length of a ``with`` block and always cleans up: the
child dies with the test interpreter (``PR_SET_PDEATHSIG``), and a child still running
at the end of the block is sent SIGTERM, then SIGKILL. ``OperatorProcess`` waits for
/readyz, signals, reaps, and parses the log. With ``slow_reconcile`` the child runs the
same CLI with every CronJob reconcile slowed down and logged, to SIGTERM it mid-reconcile.

``audited_plane`` is a control plane whose API server writes an audit log (for tests
that ask which process wrote what, and when); ``figure_reporter`` prints a measured
figure past pytest's output capture.

``FaultTable`` collects one row per injected fault (what, how often, runs expected,
created, duplicated, lost, what else was seen) and prints it when its test module ends,
past output capture, so a run of the suite yields the table the issue asks for.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from cronjob_operator.controllers.cronjob.jobs import SCHEDULED_AT_ANNOTATION
from cronjob_operator.envtest import RUN_DURATION_ANNOTATION, ControlPlane, wait_for
from tests.integration.support import install_crds

PR_SET_PDEATHSIG = 1
CRONJOBS = "cronjobs.batch.tutorial.kubebuilder.io"

# ``python -c SLOW_RECONCILE run ...``: the real CLI with every CronJob reconcile
# delayed by $E2E_RECONCILE_DELAY seconds and bracketed by two log lines, so a test can
# send SIGTERM while reconciles are certainly in flight and see that each one finished.
SLOW_RECONCILE = """
import logging, os, sys, time
from cronjob_operator import cli
from cronjob_operator.controllers import cronjob

delay = float(os.environ["E2E_RECONCILE_DELAY"])
log = logging.getLogger("e2e.slow-reconcile")
original = cronjob.CronJobReconciler.reconcile

def reconcile(self, request):
    key = f"{request.namespace}/{request.name}"
    log.info("slow reconcile started", extra={"key": key})
    time.sleep(delay)
    result = original(self, request)
    log.info("slow reconcile finished", extra={"key": key})
    return result

cronjob.CronJobReconciler.reconcile = reconcile
sys.exit(cli.main(sys.argv[1:]))
"""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> Callable[[], None] | None:
    if threading.current_thread() is not threading.main_thread():
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    parent = os.getpid()

    def preexec() -> None:
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL))
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)

    return preexec


class OperatorProcess:
    """One ``cronjob-operator run`` child process and its JSON log file."""

    def __init__(self, argv: Sequence[str], log_path: Path, probe_port: int, name: str) -> None:
        self.argv = list(argv)
        self.log_path = log_path
        self.probe_port = probe_port
        self.name = name
        self._popen: subprocess.Popen[bytes] | None = None

    def start(self, env: dict[str, str] | None = None) -> OperatorProcess:
        with self.log_path.open("ab") as log:
            self._popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **(env or {})},
                preexec_fn=_die_with_parent(),  # noqa: PLW1509 - only prctl
            )
        return self

    def alive(self) -> bool:
        return self._popen is not None and self._popen.poll() is None

    def probe(self, path: str = "/readyz") -> int | None:
        """The HTTP status of a probe endpoint, None if nothing answers."""
        url = f"http://127.0.0.1:{self.probe_port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                return int(response.status)
        except urllib.error.HTTPError as error:
            return error.code
        except OSError:
            return None

    def wait_ready(self, timeout: float = 60.0) -> None:
        def ready() -> bool:
            if not self.alive():
                raise AssertionError(f"{self.name} exited early:\n{self.log_tail()}")
            return self.probe() == 200

        try:
            wait_for(ready, timeout, interval=0.1, message=f"{self.name} /readyz")
        except TimeoutError as error:
            raise AssertionError(f"{error}; log:\n{self.log_tail()}") from None

    def signal(self, sig: signal.Signals) -> None:
        assert self._popen is not None
        with contextlib.suppress(ProcessLookupError):
            self._popen.send_signal(sig)

    def wait(self, timeout: float) -> int:
        """Block until the process exits (at most ``timeout``); its exit code."""
        assert self._popen is not None
        return self._popen.wait(timeout)

    def stop(self, grace: float = 35.0) -> None:
        """SIGTERM, then SIGKILL after ``grace``; reaps the child. Idempotent."""
        if self._popen is None:
            return
        if self.alive():
            self.signal(signal.SIGTERM)
            try:
                self._popen.wait(grace)
            except subprocess.TimeoutExpired:
                self.signal(signal.SIGKILL)
        self._popen.wait(10)

    def logs(self) -> list[dict[str, Any]]:
        """The JSON log lines written so far (non-JSON lines, e.g. a traceback, kept as msg)."""
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return []
        entries = []
        for line in text.splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                entry = {"level": "raw", "msg": line}
            entries.append(entry if isinstance(entry, dict) else {"level": "raw", "msg": line})
        return entries

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"


@contextlib.contextmanager
def operator_process(
    control_plane: ControlPlane,
    directory: Path,
    *,
    name: str = "operator",
    namespace: str | None = None,
    kubeconfig: Path | None = None,
    leader_election_namespace: str | None = None,
    args: Sequence[str] = (),
    slow_reconcile: float | None = None,
) -> Iterator[OperatorProcess]:
    """Run the operator as a child process for the block; always stopped at the end."""
    port = free_port()
    entry = ["-c", SLOW_RECONCILE] if slow_reconcile is not None else ["-m", "cronjob_operator"]
    argv = [
        sys.executable,
        *entry,
        "run",
        f"--kubeconfig={kubeconfig or control_plane.kubeconfig}",
        "--log-format=json",
        f"--health-probe-bind-address=127.0.0.1:{port}",
        "--no-configdeployment-controller",
        "--webhook-port=0",
    ]
    if namespace:
        argv.append(f"--namespace={namespace}")
    if leader_election_namespace:
        argv += ["--leader-elect", f"--leader-election-namespace={leader_election_namespace}"]
    argv += list(args)
    process = OperatorProcess(argv, directory / f"{name}.log", port, name)
    env = {"E2E_RECONCILE_DELAY": str(slow_reconcile)} if slow_reconcile is not None else None
    process.start(env)
    try:
        yield process
    finally:
        process.stop()


# -- CronJobs, Jobs and runs -------------------------------------------------------------


def cronjob_manifest(
    name: str, namespace: str, *, schedule: str = "* * * * *", run: str = "1s", **spec: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "batch.tutorial.kubebuilder.io/v1",
        "kind": "CronJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "schedule": schedule,
            "jobTemplate": {
                "spec": {
                    "backoffLimit": 0,
                    "template": {
                        "metadata": {"annotations": {RUN_DURATION_ANNOTATION: run}},
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [{"name": "main", "image": "busybox"}],
                        },
                    },
                }
            },
            **spec,
        },
    }


def apply_all(control_plane: ControlPlane, objects: Sequence[dict[str, Any]]) -> None:
    manifest = {"apiVersion": "v1", "kind": "List", "items": list(objects)}
    result = control_plane.kubectl("apply", "-f", "-", input=json.dumps(manifest))
    assert result.returncode == 0, result.stderr


def cronjobs(
    control_plane: ControlPlane, namespace: str, resource: str = CRONJOBS
) -> dict[str, dict[str, Any]]:
    """The namespace's CronJobs by name, read as ``resource`` (the preferred version, or
    one named: ``cronjobs.v1.<group>``)."""
    items = control_plane.kubectl_json("get", resource, "-n", namespace)["items"]
    return {item["metadata"]["name"]: item for item in items}


def jobs(control_plane: ControlPlane, namespace: str) -> list[dict[str, Any]]:
    return list(control_plane.kubectl_json("get", "jobs", "-n", namespace)["items"])


def parse_stamp(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def minute_ticks(after: datetime, until: datetime) -> list[datetime]:
    """The ``* * * * *`` schedule times t with after < t <= until."""
    tick = after.replace(second=0, microsecond=0) + timedelta(minutes=1)
    ticks = []
    while tick <= until:
        ticks.append(tick)
        tick += timedelta(minutes=1)
    return ticks


@dataclass
class RunCount:
    """Runs of a set of CronJobs: expected by the schedule, created, duplicated, lost."""

    expected: int = 0
    created: int = 0
    duplicated: int = 0
    lost: int = 0
    unexpected: list[str] = field(default_factory=list)


def count_runs(
    control_plane: ControlPlane,
    namespace: str,
    names: Sequence[str],
    *,
    until: datetime,
    deadline_seconds: int,
    checked_at: datetime,
) -> RunCount:
    """Compare the Jobs that exist with the runs ``* * * * *`` makes due up to ``until``.

    A run is expected when its time is after the CronJob's creation, at or before
    ``until``, and (as of ``checked_at``) still inside the starting deadline. A Job
    whose scheduled-at annotation repeats another's, or whose name is created twice, is
    a duplicate; an expected time without its Job is lost; a Job for a time after
    ``until`` is allowed (the schedule kept going), any other Job is unexpected.
    """
    found = jobs(control_plane, namespace)
    owners = cronjobs(control_plane, namespace)
    count = RunCount()
    for name in names:
        created = parse_stamp(owners[name]["metadata"]["creationTimestamp"])
        expected = {
            tick
            for tick in minute_ticks(created, until)
            if (checked_at - tick).total_seconds() < deadline_seconds
        }
        mine = [
            job
            for job in found
            if any(
                ref.get("uid") == owners[name]["metadata"]["uid"]
                for ref in job["metadata"].get("ownerReferences") or ()
            )
        ]
        times = [
            parse_stamp(job["metadata"]["annotations"][SCHEDULED_AT_ANNOTATION]) for job in mine
        ]
        count.expected += len(expected)
        count.created += len(mine)
        count.duplicated += len(times) - len(set(times))
        count.lost += len(expected - set(times))
        for job, moment in zip(mine, times, strict=True):
            wrong_name = job["metadata"]["name"] != f"{name}-{int(moment.timestamp())}"
            if wrong_name or (moment not in expected and moment <= until):
                count.unexpected.append(job["metadata"]["name"])
    return count


def wait_for_second(low: int, high: int) -> None:
    """Block until the wall clock's second-of-minute is in [low, high] (real schedules)."""
    second = datetime.now(UTC).second
    if low <= second <= high:
        return
    wait = (low - second) % 60
    time.sleep(wait)  # aligning to the real minute the schedule uses, not waiting for luck


# -- the results table ------------------------------------------------------------------


@dataclass
class FaultRow:
    fault: str
    injected: str
    times: int
    expected: int | str = "-"
    created: int | str = "-"
    duplicated: int | str = "-"
    lost: int | str = "-"
    observed: str = ""

    @classmethod
    def from_runs(
        cls,
        fault: str,
        injected: str,
        times: int,
        *,
        expected: Collection[str],
        created: Sequence[str],
        observed: str,
    ) -> FaultRow:
        """A row whose counts come from what the test found: ``expected`` run (Job) names,
        and ``created``, every creation of a run seen (a name twice is a duplicate)."""
        return cls(
            fault,
            injected,
            times,
            len(set(expected)),
            len(set(created) & set(expected)),
            len(created) - len(set(created)),
            len(set(expected) - set(created)),
            observed,
        )


class FaultTable:
    """The rows of one test module; ``print`` writes them past output capture."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.rows: list[FaultRow] = []

    def add(self, row: FaultRow) -> None:
        self.rows.append(row)

    def render(self) -> list[str]:
        header = ("fault", "injected", "times", "expected", "created", "dup", "lost", "observed")
        lines = [" | ".join(header)]
        for r in self.rows:
            cells = (
                r.fault,
                r.injected,
                r.times,
                r.expected,
                r.created,
                r.duplicated,
                r.lost,
                r.observed,
            )
            lines.append(" | ".join(str(c) for c in cells))
        return lines

    def print(self, config: pytest.Config) -> None:
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        capture = config.pluginmanager.get_plugin("capturemanager")
        if reporter is None or not self.rows:
            return
        suspended = capture.global_and_fixture_disabled() if capture else contextlib.nullcontext()
        with suspended:
            reporter.write_line("")
            reporter.write_sep("=", self.title)
            for line in self.render():
                reporter.write_line(line)


@contextlib.contextmanager
def audited_plane() -> Iterator[ControlPlane]:
    """A control plane with the CRDs installed whose API server keeps an audit log."""
    audited = ControlPlane(audit=True)
    audited.start()
    try:
        install_crds(audited)
        yield audited
    finally:
        audited.stop()


def figure_reporter(request: pytest.FixtureRequest, tag: str) -> Callable[[str], None]:
    """A function that prints ``[tag] line`` past pytest's output capture."""

    def write(line: str) -> None:
        reporter = request.config.pluginmanager.get_plugin("terminalreporter")
        capture = request.config.pluginmanager.get_plugin("capturemanager")
        if reporter is None:
            return
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            reporter.write_line(f"\n[{tag}] {line}")

    return write
