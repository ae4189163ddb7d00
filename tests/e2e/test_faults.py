"""Faults of the real control plane and of the operator's own process: nothing lost or doubled.

Each test injects one fault into the local control plane (or into the operator) and
checks what the issue promises: the operator keeps running, every run due inside its
starting deadline is created exactly once (Job names are deterministic, and no two Jobs
carry the same scheduled-at annotation), caches converge, and a shutdown is clean.
Where the test kills processes the operator runs as a real child process
(``support.operator_process``) on the real ``* * * * *`` schedule, aligned to the
wall-clock minute; where a fake clock suffices it runs in-process with one.

Every test adds a row to the results table printed at the end of the module.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import signal
import threading
import time
import urllib.request
import zoneinfo
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from cronjob_operator.api.batch_v1 import CRONJOB
from cronjob_operator.controllers import cronjob
from cronjob_operator.controllers.cronjob.jobs import SCHEDULED_AT_ANNOTATION, build_job
from cronjob_operator.envtest import ControlPlane, wait_for
from cronjob_operator.runtime import errors, metrics, objects
from cronjob_operator.runtime.client import Client, RestClient, load_configuration
from cronjob_operator.runtime.clock import FakeClock
from cronjob_operator.runtime.controller import Request
from cronjob_operator.runtime.controllerutil import parse_time, rfc3339
from cronjob_operator.runtime.kinds import JOB
from cronjob_operator.runtime.manager import Manager, Options
from tests.e2e.support import (
    CRONJOBS,
    FaultRow,
    FaultTable,
    OperatorProcess,
    apply_all,
    count_runs,
    cronjob_manifest,
    cronjobs,
    jobs,
    operator_process,
    parse_stamp,
    wait_for_second,
)
from tests.integration.support import REPO, install_crds, running_manager

DEADLINE = 300


@pytest.fixture(scope="module", autouse=True)
def crds(control_plane: ControlPlane) -> None:
    install_crds(control_plane)


@pytest.fixture(scope="module")
def table(request: pytest.FixtureRequest) -> Iterator[FaultTable]:
    results = FaultTable("fault injection results (tests/e2e/test_faults.py)")
    yield results
    results.print(request.config)


def error_lines(process: OperatorProcess) -> list[dict[str, Any]]:
    return [e for e in process.logs() if e.get("level") in {"error", "critical", "raw"}]


# -- permissions -------------------------------------------------------------------------


def test_missing_permission_is_one_clear_error_not_ready_and_no_crash_loop(
    control_plane: ControlPlane, namespace: str, tmp_path: Path, table: FaultTable
) -> None:
    role = yaml.safe_load((REPO / "config" / "rbac" / "role.yaml").read_text())
    for rule in role["rules"]:
        if rule["resources"] == ["jobs"]:
            # Both: a streaming initial sync is a WATCH, and its fallback is a LIST.
            rule["verbs"].remove("list")
            rule["verbs"].remove("watch")
    apply_all(
        control_plane,
        [
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": {"name": "operator", "namespace": namespace},
                "rules": role["rules"],
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": "operator", "namespace": namespace},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "Role",
                    "name": "operator",
                },
                "subjects": [
                    {"kind": "ServiceAccount", "name": "operator", "namespace": namespace}
                ],
            },
        ],
    )
    kubeconfig = control_plane.token_kubeconfig(namespace, "operator", tmp_path / "sa.kubeconfig")
    with operator_process(
        control_plane, tmp_path, namespace=namespace, kubeconfig=kubeconfig
    ) as operator:
        wait_for(lambda: error_lines(operator), 30, message="the error line")
        first_error_count = len(operator.logs())
        window = 20.0
        began = time.monotonic()
        readiness: set[int | None] = set()
        while time.monotonic() - began < window:
            assert operator.alive(), f"the operator exited:\n{operator.log_tail()}"
            readiness.add(operator.probe("/readyz"))
            assert operator.probe("/healthz") == 200
            time.sleep(0.5)
        logs = operator.logs()
        assert operator.alive()
        sent = time.monotonic()
        operator.signal(signal.SIGTERM)
        code = operator.wait(30)
        took = time.monotonic() - sent
    assert code == 0, operator.log_tail()
    # The behaviour is "exits within its graceful-shutdown timeout (30 s by default)
    # although the caches never sync"; waiting on such a cache would never return.
    assert took < 30, f"SIGTERM took {took:.1f}s while the caches could not sync"
    errors_seen = [e for e in logs if e.get("level") in {"error", "critical", "raw"}]
    assert len(errors_seen) == 1, errors_seen
    message = errors_seen[0]["msg"]
    assert "forbidden to list jobs.batch" in message, message
    assert 'cannot list resource "jobs" in API group "batch"' in message, message
    assert readiness == {500}, readiness
    lines_in_window = len(logs) - first_error_count
    assert lines_in_window <= 2, [e["msg"] for e in logs[first_error_count:]]
    table.add(
        FaultRow(
            "token lacks `jobs list, watch`",
            "Role without list and watch on jobs",
            1,
            observed=f"1 error line naming list jobs.batch; /readyz 500 for {window:.0f}s; "
            f"alive, {lines_in_window} more log lines in {window:.0f}s; SIGTERM: exit 0 "
            f"in {took:.1f}s",
        )
    )


# -- graceful shutdown -------------------------------------------------------------------


def test_sigterm_lets_in_flight_reconciles_finish_and_exits_zero(
    control_plane: ControlPlane, namespace: str, tmp_path: Path, table: FaultTable
) -> None:
    grace = 15.0
    names = [f"busy-{i}" for i in range(8)]
    with operator_process(
        control_plane,
        tmp_path,
        namespace=namespace,
        slow_reconcile=2.0,
        args=["--max-concurrent-reconciles=4", f"--graceful-shutdown-timeout={grace:g}"],
    ) as operator:
        operator.wait_ready()
        apply_all(
            control_plane,
            [cronjob_manifest(n, namespace, schedule="0 0 1 1 *") for n in names],
        )

        def started() -> list[str]:
            return [e["key"] for e in operator.logs() if e["msg"] == "slow reconcile started"]

        wait_for(lambda: len(started()) >= 4, 30, message="four reconciles in flight")
        in_flight = set(started()) - {
            e["key"] for e in operator.logs() if e["msg"] == "slow reconcile finished"
        }
        sent = time.monotonic()
        operator.signal(signal.SIGTERM)
        code = operator.wait(grace + 10)
        took = time.monotonic() - sent
        logs = operator.logs()
    finished = [e["key"] for e in logs if e["msg"] == "slow reconcile finished"]
    began = [e["key"] for e in logs if e["msg"] == "slow reconcile started"]
    assert code == 0
    assert took < grace, f"exit took {took:.1f}s"
    assert in_flight, "SIGTERM must arrive while reconciles run"
    assert sorted(began) == sorted(finished), "every reconcile that started finished"
    assert not [e for e in logs if e.get("level") in {"error", "critical", "raw"}]
    assert not [e for e in logs if "did not drain" in e["msg"]]
    assert any(e["msg"] == "manager stopped" for e in logs)
    stored = cronjobs(control_plane, namespace)
    for key in in_flight:
        status = stored[key.split("/")[1]].get("status") or {}
        assert status.get("observedGeneration") == 1, (key, status)
    table.add(
        FaultRow(
            "SIGTERM during reconciles",
            "SIGTERM with 4 reconciles in flight (2 s each)",
            1,
            observed=f"{len(in_flight)} in flight, all finished and wrote status; "
            f"exit 0 after {took:.1f}s (grace {grace:g}s)",
        )
    )


# -- API server crash --------------------------------------------------------------------


def wait_until_runs_exist(
    control_plane: ControlPlane, namespace: str, names: list[str], timeout: float
) -> datetime:
    """Wait until every run due so far has its Job; returns the time checked up to."""

    def complete() -> datetime | None:
        now = datetime.now(UTC)
        count = count_runs(
            control_plane, namespace, names, until=now, deadline_seconds=DEADLINE, checked_at=now
        )
        return now if count.lost == 0 else None

    checked = wait_for(complete, timeout, interval=0.5, message="every due run to have its Job")
    assert checked is not None
    return checked


def test_apiserver_killed_while_runs_are_due(
    control_plane: ControlPlane, namespace: str, tmp_path: Path, table: FaultTable
) -> None:
    names = [f"minutely-{i}" for i in range(3)]
    outage = 20.0
    with operator_process(control_plane, tmp_path, namespace=namespace) as operator:
        operator.wait_ready()
        apply_all(
            control_plane,
            [cronjob_manifest(n, namespace, startingDeadlineSeconds=DEADLINE) for n in names],
        )
        wait_for(
            lambda: all(
                (c.get("status") or {}).get("observedGeneration")
                for c in cronjobs(control_plane, namespace).values()
            ),
            30,
            message="the operator to see the CronJobs",
        )
        wait_for_second(42, 52)  # the outage then spans the next minute's run
        control_plane.stop_component("kube-apiserver", kill=True)
        killed = time.monotonic()
        while time.monotonic() - killed < outage:
            assert operator.alive(), f"the operator died:\n{operator.log_tail()}"
            time.sleep(0.5)
        restarted = time.monotonic()
        control_plane.start_component("kube-apiserver")
        ready_after = time.monotonic() - restarted
        checked = wait_until_runs_exist(control_plane, namespace, names, 90)
        assert operator.alive()
        assert operator.probe() == 200
        logs = operator.logs()
    count = count_runs(
        control_plane,
        namespace,
        names,
        until=checked,
        deadline_seconds=DEADLINE,
        checked_at=checked,
    )
    assert (count.duplicated, count.lost, count.unexpected) == (0, 0, []), count
    assert count.expected >= len(names)
    assert not [e for e in logs if e.get("level") == "raw"], "no traceback"
    assert control_plane.healthy()
    late = max(
        (parse_time(j["metadata"]["creationTimestamp"]) or checked)
        - parse_stamp(j["metadata"]["annotations"][SCHEDULED_AT_ANNOTATION])
        for j in jobs(control_plane, namespace)
    )
    retries = sum("list/watch" in e["msg"] for e in logs)  # failed, or asked to retry
    table.add(
        FaultRow(
            "kube-apiserver SIGKILL",
            f"{outage:.0f}s outage across a `* * * * *` run, 3 CronJobs",
            1,
            count.expected,
            count.created,
            count.duplicated,
            count.lost,
            f"operator alive throughout ({retries} list/watch retries logged); API server "
            f"ready {ready_after:.0f}s after restart; latest Job created "
            f"{late.total_seconds():.0f}s after its scheduled time",
        )
    )


# -- leader election ---------------------------------------------------------------------


def acquired(process: OperatorProcess) -> bool:
    return any(e["msg"].startswith("successfully acquired lease") for e in process.logs())


def test_leader_killed_and_terminated_hands_over_without_losing_runs(
    control_plane: ControlPlane, namespace: str, tmp_path: Path, table: FaultTable
) -> None:
    names = [f"elected-{i}" for i in range(3)]
    lease_duration, retry_period, jitter = 15.0, 2.0, 1.2
    with (
        operator_process(
            control_plane,
            tmp_path,
            name="a",
            namespace=namespace,
            leader_election_namespace=namespace,
        ) as a,
        operator_process(
            control_plane,
            tmp_path,
            name="b",
            namespace=namespace,
            leader_election_namespace=namespace,
        ) as b,
    ):
        a.wait_ready()
        b.wait_ready()
        leader = wait_for(
            lambda: a if acquired(a) else b if acquired(b) else None, 30, message="a leader"
        )
        assert leader is not None
        follower = b if leader is a else a
        apply_all(
            control_plane,
            [cronjob_manifest(n, namespace, startingDeadlineSeconds=DEADLINE) for n in names],
        )
        wait_for(
            lambda: all(
                (c.get("status") or {}).get("observedGeneration")
                for c in cronjobs(control_plane, namespace).values()
            ),
            30,
            message="the leader to see the CronJobs",
        )
        assert not acquired(follower)
        wait_for_second(50, 55)  # the next run falls due while nobody leads
        leader.signal(signal.SIGKILL)
        killed = time.monotonic()
        wait_for(lambda: acquired(follower), 40, interval=0.05, message="the follower to lead")
        takeover = time.monotonic() - killed
        checked = wait_until_runs_exist(control_plane, namespace, names, 60)
        killed_run = count_runs(
            control_plane,
            namespace,
            names,
            until=checked,
            deadline_seconds=DEADLINE,
            checked_at=checked,
        )

        # Graceful hand-over: a fresh standby, then SIGTERM the leader.
        with operator_process(
            control_plane,
            tmp_path,
            name="c",
            namespace=namespace,
            leader_election_namespace=namespace,
        ) as standby:
            standby.wait_ready()
            wait_for(
                lambda: any("holder is now" in e["msg"] for e in standby.logs()),
                30,
                message="the standby to see the Lease held",
            )
            assert not acquired(standby)
            follower.signal(signal.SIGTERM)
            terminated = time.monotonic()
            wait_for(lambda: acquired(standby), 20, interval=0.05, message="the standby to lead")
            handover = time.monotonic() - terminated
            code = follower.wait(30)
            checked = wait_until_runs_exist(control_plane, namespace, names, 60)
    total = count_runs(
        control_plane,
        namespace,
        names,
        until=checked,
        deadline_seconds=DEADLINE,
        checked_at=checked,
    )
    # The follower counts the lease from when it first saw the last renewal, which can be
    # one (jittered) retry period after the kill: lease + retry after that, at the latest.
    slowest_retry = retry_period * (1 + jitter)
    # Never two leaders: the follower may take over only once the lease expired, counted
    # from a renewal that was at most one jittered retry period before the kill.
    assert takeover >= lease_duration - slowest_retry, takeover
    # And it does take over through expiry; the bound only needs to be finite: twice the
    # lease leaves room for a loaded machine.
    assert takeover <= 2 * lease_duration, takeover
    assert (killed_run.duplicated, killed_run.lost, killed_run.unexpected) == (0, 0, [])
    assert (total.duplicated, total.lost, total.unexpected) == (0, 0, []), total
    assert code == 0
    # Released, not expired: the old leader says so, and the standby led sooner than an
    # expiry ever could (lease minus one retry period; it takes over at its next try).
    assert any(e["msg"].startswith("released lease") for e in follower.logs()), "released"
    assert handover < lease_duration - slowest_retry, handover
    table.add(
        FaultRow(
            "leader SIGKILL (2 replicas)",
            "SIGKILL the leader 5-10 s before a run is due, 3 CronJobs",
            1,
            killed_run.expected,
            killed_run.created,
            killed_run.duplicated,
            killed_run.lost,
            f"follower led {takeover:.1f}s after the kill (lease {lease_duration:g}s + retry "
            f"<= {slowest_retry:.1f}s from its last observation)",
        )
    )
    table.add(
        FaultRow(
            "leader SIGTERM",
            "SIGTERM the leader with a standby waiting",
            1,
            total.expected,
            total.created,
            total.duplicated,
            total.lost,
            f"lease released, standby led after {handover:.1f}s; old leader exit {code}",
        )
    )


# -- etcd compaction ---------------------------------------------------------------------


def etcd(control_plane: ControlPlane, call: str, body: dict[str, Any]) -> Any:
    request = urllib.request.Request(
        f"{control_plane.etcd_url}/v3/kv/{call}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_etcd_compaction_relists_and_converges(
    control_plane: ControlPlane,
    namespace: str,
    table: FaultTable,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="cronjob_operator.runtime.cache._reflector")
    clock = FakeClock()
    setups = {"cronjob": lambda mgr: cronjob.setup(mgr, clock=clock)}
    options = Options(namespace=namespace, health_probe_bind_address="0")
    prefix = f"/registry/batch.tutorial.kubebuilder.io/cronjobs/{namespace}/"
    with running_manager(control_plane, setups, options=options) as running:
        cache = running.manager.cache
        apply_all(control_plane, [cronjob_manifest(n, namespace) for n in ("kept", "doomed")])

        def cached() -> set[str]:
            return {objects.name_of(o) for o in cache.list(CRONJOB, namespace=namespace)}

        wait_for(lambda: cached() == {"kept", "doomed"}, 30, message="both CronJobs cached")

        control_plane.stop_component("kube-apiserver", kill=True)
        stored = etcd(control_plane, "range", {"key": b64(prefix + "doomed")})
        born = json.loads(base64.b64decode(stored["kvs"][0]["value"]))
        born["metadata"].update(name="born", uid="4f6d7c1e-0000-4000-8000-000000000001")
        etcd(control_plane, "put", {"key": b64(prefix + "born"), "value": b64(json.dumps(born))})
        deleted = etcd(control_plane, "deleterange", {"key": b64(prefix + "doomed")})
        assert deleted.get("deleted") == "1"
        revision = control_plane.compact_etcd()
        control_plane.start_component("kube-apiserver")

        wait_for(lambda: cached() == {"kept", "born"}, 60, message="the cache to converge")
        in_server = {o["metadata"]["name"] for o in cronjobs(control_plane, namespace).values()}
        assert cached() == in_server
        with pytest.raises(errors.NotFound):
            cache.get(CRONJOB, "doomed", namespace)
        relists = [r for r in caplog.records if "is gone; syncing again" in r.getMessage()]
        assert relists, "the re-watch got 410 Gone and relisted"
        jobs_informer = cache.informer(JOB)
        assert jobs_informer.has_synced
    assert control_plane.healthy()
    table.add(
        FaultRow(
            "etcd compaction past the informers' RV",
            f"apiserver down, 1 delete + 1 create in etcd, compact to rev {revision}, restart",
            1,
            observed=f"{len(relists)} x 410 -> relist; cache == server ({sorted(in_server)}); "
            "deleted object gone from the cache",
        )
    )


# -- manager restart mid-run -------------------------------------------------------------


def test_manager_restarted_mid_run_reruns_nothing(
    control_plane: ControlPlane, namespace: str, table: FaultTable
) -> None:
    clock = FakeClock()
    setups = {"cronjob": lambda mgr: cronjob.setup(mgr, clock=clock)}
    options = Options(namespace=namespace, health_probe_bind_address="0")
    spec: dict[str, Any] = {"schedule": "*/5 * * * *", "run": "4s", "successfulJobsHistoryLimit": 1}
    apply_all(control_plane, [cronjob_manifest(n, namespace, **spec) for n in ("steady", "torn")])
    owners = cronjobs(control_plane, namespace)
    created = max(
        datetime.fromisoformat(o["metadata"]["creationTimestamp"]) for o in owners.values()
    )
    first = created.replace(second=0, microsecond=0) + timedelta(minutes=5 - created.minute % 5)
    second = first + timedelta(minutes=5)
    clock.set(first + timedelta(seconds=1))

    def status(name: str) -> dict[str, Any]:
        return cronjobs(control_plane, namespace)[name].get("status") or {}

    def active(name: str) -> list[str]:
        return [ref["name"] for ref in status(name).get("active") or []]

    # "torn": a manager died between creating the run's Job and writing status.
    job = build_job(owners["torn"], first, zoneinfo.ZoneInfo("UTC"))
    made = control_plane.kubectl("create", "-f", "-", input=json.dumps(job))
    assert made.returncode == 0, made.stderr
    # A manager creates steady's run and takes torn's up; it is stopped while both run.
    with running_manager(control_plane, setups, options=options) as running:
        for name in ("steady", "torn"):
            running.kick("cronjob", namespace, name)
        wait_for(
            lambda: all(
                active(n) == [f"{n}-{int(first.timestamp())}"]
                and status(n).get("lastScheduleTime") == rfc3339(first)
                for n in owners
            ),
            30,
            message="both runs active and recorded",
        )
    # A new manager, mid-run: nothing is created again, the runs finish, the next starts.
    with running_manager(control_plane, setups, options=options) as running:
        for name in ("steady", "torn"):
            running.kick("cronjob", namespace, name)
        for name in ("steady", "torn"):
            wait_for(
                lambda n=name: status(n).get("lastScheduleTime") == rfc3339(first),  # type: ignore[misc]
                30,
                message=f"{name} records the first run",
            )
        wait_for(
            lambda: all(not active(n) and status(n).get("lastSuccessfulTime") for n in owners),
            120,
            interval=0.5,
            message="the first runs complete",
        )
        clock.set(second + timedelta(seconds=1))
        for name in ("steady", "torn"):
            running.kick("cronjob", namespace, name)
        wait_for(
            lambda: all(
                status(n).get("lastScheduleTime") == rfc3339(second)
                and not active(n)
                and parse_time(status(n).get("lastSuccessfulTime")) is not None
                and sorted(
                    j["metadata"]["name"]
                    for j in jobs(control_plane, namespace)
                    if j["metadata"]["name"].startswith(n)
                )
                == [f"{n}-{int(second.timestamp())}"]
                for n in owners
            ),
            120,
            interval=0.5,
            message="second runs complete and history pruned to 1",
        )
    events = control_plane.kubectl_json("get", "events", "-n", namespace)["items"]
    creates = [
        e
        for e in events
        if e["reason"] == "SuccessfulCreate" and e["involvedObject"]["kind"] == "CronJob"
    ]
    created_count = sum(int(e.get("count") or 1) for e in creates)
    assert created_count == 3, creates  # steady x2, torn x1 (its first Job was made by hand)
    remaining = {j["metadata"]["name"]: j for j in jobs(control_plane, namespace)}
    for name in owners:
        last = remaining[f"{name}-{int(second.timestamp())}"]
        assert status(name)["lastSuccessfulTime"] == last["status"]["completionTime"]
    # Every creation of a run: the operator's (its events, a repeat counted by the event's
    # count) and the one made by hand for "torn".
    creations = [job["metadata"]["name"]] + [
        e["message"].removeprefix("Created job ")
        for e in creates
        for _ in range(int(e.get("count") or 1))
    ]
    faults = ["manager stopped with runs active", "crash between Job create and status write"]
    table.add(
        FaultRow.from_runs(
            "manager restarted mid-run",
            "; ".join(faults),
            len(faults),
            expected={f"{n}-{int(t.timestamp())}" for n in owners for t in (first, second)},
            created=creations,
            observed="no run re-created; active/lastScheduleTime/lastSuccessfulTime right; "
            "history pruned to 1",
        )
    )


# -- conflicts ---------------------------------------------------------------------------


class StaleReader:
    """The cache, except that the CronJob is an old copy (as if the cache lagged)."""

    def __init__(self, cache: Any, stale: objects.Obj) -> None:
        self._cache = cache
        self._stale = stale

    def get(self, kind: Any, name: str, namespace: str | None = None) -> objects.Obj:
        if kind == CRONJOB:
            return self._stale
        return self._cache.get(kind, name, namespace)  # type: ignore[no-any-return]

    def list(self, kind: Any, **kwargs: Any) -> list[objects.Obj]:
        return self._cache.list(kind, **kwargs)  # type: ignore[no-any-return]


def conflicts_seen(counted: metrics.Metrics) -> float:
    return sum(
        sample.value
        for metric in counted.rest_client_requests.collect()
        for sample in metric.samples
        if sample.name.endswith("_total") and sample.labels.get("code") == "409"
    )


@contextlib.contextmanager
def cache_only_manager(control_plane: ControlPlane, namespace: str) -> Iterator[Manager]:
    """A manager's cache (with the Job index) and event recorder, and no controller."""
    rest = RestClient(load_configuration(str(control_plane.kubeconfig)))
    manager = Manager(rest, Options(namespace=namespace, health_probe_bind_address="0"))
    manager.cache.set_transform(JOB, cronjob.slim_job)
    manager.cache.index_field(JOB, cronjob.JOB_OWNER_INDEX, cronjob.job_owner_index)
    manager.cache.start()
    manager.recorder.start()
    try:
        yield manager
    finally:
        manager.recorder.stop()
        manager.cache.stop()
        rest.close()


def next_five_minutes(moment: datetime) -> datetime:
    return moment.replace(second=0, microsecond=0) + timedelta(minutes=5 - moment.minute % 5)


OTHER_WRITER_PERIOD = 0.02


def test_status_write_racing_another_writer_loses_nothing(
    control_plane: ControlPlane, namespace: str, table: FaultTable
) -> None:
    apply_all(
        control_plane,
        [
            cronjob_manifest(n, namespace, schedule="*/5 * * * *", run="1h")
            for n in ("stale", "raced")
        ],
    )
    created = max(
        datetime.fromisoformat(c["metadata"]["creationTimestamp"])
        for c in cronjobs(control_plane, namespace).values()
    )
    ticks = [next_five_minutes(created) + timedelta(minutes=5 * n) for n in range(6)]
    rest = RestClient(load_configuration(str(control_plane.kubeconfig)))

    def status(name: str) -> dict[str, Any]:
        return cronjobs(control_plane, namespace)[name].get("status") or {}

    with cache_only_manager(control_plane, namespace) as manager:

        def reconciler(stale: objects.Obj, moment: datetime) -> cronjob.CronJobReconciler:
            client = Client(rest, StaleReader(manager.cache, stale))
            return cronjob.CronJobReconciler(client, manager.recorder, clock=lambda: moment)

        def cached(name: str) -> objects.Obj:
            return manager.cache.get(CRONJOB, name, namespace)

        def run(stale: objects.Obj, moment: datetime) -> None:
            """Reconcile from the stale view, plus the follow-up that writes a new run's
            status (Jobs first), from the same stale view: that write is the one under test."""
            request = Request(namespace, "stale")
            if reconciler(stale, moment).reconcile(request).follow_up:
                reconciler(stale, moment).reconcile(request)

        # 1. Only the metadata changed since the cached copy: the 409 is retried at once.
        stale = cached("stale")
        control_plane.kubectl(
            "annotate", CRONJOBS, "stale", "-n", namespace, "e2e/writer=other", check=True
        )
        before = conflicts_seen(metrics.DEFAULT)
        run(stale, ticks[0] + timedelta(seconds=1))
        metadata_conflicts = conflicts_seen(metrics.DEFAULT) - before
        assert metadata_conflicts >= 1
        assert status("stale")["lastScheduleTime"] == rfc3339(ticks[0])
        assert [r["name"] for r in status("stale")["active"]] == [
            f"stale-{int(ticks[0].timestamp())}"
        ]
        assert (
            cronjobs(control_plane, namespace)["stale"]["metadata"]["annotations"]["e2e/writer"]
            == "other"
        )

        # 2. Another writer changed the status itself: the stale write must neither drop
        #    this reconcile's run nor overwrite the other writer's field. Either the 409
        #    is resolved against the fresh object at once, or the Conflict goes back to
        #    the queue and the retry (on the fresh object) records the run.
        wait_for(lambda: objects.thaw(cached("stale").get("status")) == status("stale"), 30)
        stale = cached("stale")
        foreign = "2001-01-01T00:00:00Z"
        control_plane.kubectl(
            "patch",
            CRONJOBS,
            "stale",
            "-n",
            namespace,
            "--subresource=status",
            "--type=merge",
            "-p",
            json.dumps({"status": {"lastSuccessfulTime": foreign}}),
            check=True,
        )
        moment = ticks[1] + timedelta(seconds=1)
        try:
            run(stale, moment)
            resolution = "merged onto the fresh status"
        except errors.Conflict:
            assert status("stale")["lastSuccessfulTime"] == foreign, "not overwritten"
            wait_for(lambda: objects.thaw(cached("stale").get("status")) == status("stale"), 30)
            run(cached("stale"), moment)
            resolution = "requeued and recomputed"
        after = status("stale")
        assert after["lastSuccessfulTime"] == foreign
        assert after["lastScheduleTime"] == rfc3339(ticks[1])
        assert sorted(r["name"] for r in after["active"]) == sorted(
            f"stale-{int(t.timestamp())}" for t in ticks[:2]
        )
        status_conflicts = conflicts_seen(metrics.DEFAULT) - before - metadata_conflicts

    # 3. Stress: another writer patches a CronJob non-stop while the controller runs it.
    clock = FakeClock(ticks[0] - timedelta(minutes=1))
    setups = {"cronjob": lambda mgr: cronjob.setup(mgr, clock=clock)}
    options = Options(namespace=namespace, health_probe_bind_address="0")
    with running_manager(control_plane, setups, options=options) as running:
        stop = threading.Event()
        patches = 0

        def other_writer() -> None:
            nonlocal patches
            writer = Client(rest, running.manager.cache)
            # Every 20 ms, not in a tight loop: this thread shares the controller's process
            # (and GIL), and on a loaded machine a tight loop wins every race between the
            # controller's fresh read and its write, so the CronJob could never be written.
            while not stop.wait(OTHER_WRITER_PERIOD):
                patches += 1
                writer.patch(
                    CRONJOB,
                    "raced",
                    {"metadata": {"annotations": {"e2e/patches": str(patches)}}},
                    namespace=namespace,
                )

        thread = threading.Thread(target=other_writer, daemon=True)
        before = conflicts_seen(running.manager.metrics)
        thread.start()
        try:
            for moment in ticks:
                clock.set(moment + timedelta(seconds=1))
                running.kick("cronjob", namespace, "raced")
                wait_for(
                    lambda m=moment: status("raced").get("lastScheduleTime") == rfc3339(m),  # type: ignore[misc]
                    30,
                    message=f"run {moment} recorded",
                )
        finally:
            stop.set()
            thread.join(10)
        stress_conflicts = conflicts_seen(running.manager.metrics) - before
    expected = {f"raced-{int(m.timestamp())}" for m in ticks}
    made = [
        j["metadata"]["name"]
        for j in jobs(control_plane, namespace)
        if j["metadata"]["name"].startswith("raced-")
    ]
    final = cronjobs(control_plane, namespace)["raced"]
    assert final["metadata"]["annotations"]["e2e/patches"] == str(patches)
    assert sorted(made) == sorted(expected), made
    assert sorted(r["name"] for r in final["status"]["active"]) == sorted(expected)
    stale_runs = {f"stale-{int(t.timestamp())}" for t in ticks[:2]}
    stale_made = [
        j["metadata"]["name"]
        for j in jobs(control_plane, namespace)
        if j["metadata"]["name"].startswith("stale-")
    ]
    table.add(
        FaultRow.from_runs(
            "status write conflict",
            f"stale cache copy (metadata changed; status changed) + {patches} concurrent "
            f"patches during {len(ticks)} runs",
            len(stale_runs) + len(ticks),
            expected=stale_runs | expected,
            created=stale_made + made,
            observed=f"409s: {metadata_conflicts:.0f} retried at once; {status_conflicts:.0f} "
            f"against another status writer, {resolution} (its field kept); "
            f"{stress_conflicts:.0f} under stress; every run recorded, every patch kept",
        )
    )
