"""Leader election at its edges, judged by the API server's audit log.

Two real ``cronjob-operator run`` processes contend for one Lease on a control plane
that logs every write (``ControlPlane(audit=True)``); the operator's user agent names
its identity, so the log tells the old leader from the new one. Work is in flight the
whole time: a batch of CronJobs whose first reconciles each write status, paced by
``--kube-api-qps`` so the writes queue up behind the client-side limiter.

* A leader frozen (SIGSTOP) for longer than the lease, replaced by the standby, then
  resumed (SIGCONT): no write of the old leader reaches the server after the new one
  acquired the Lease, and the old process exits 1 at once (the seconds are printed).
* A leader at ``--kube-api-qps 1`` with 20 workers flooding writes still renews its
  Lease on time: the elector has its own token bucket (renewals and the longest gap are
  printed).
"""

from __future__ import annotations

import itertools
import signal
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path

import pytest

from cronjob_operator.cli import DEFAULT_LEADER_ELECTION_ID
from cronjob_operator.envtest import ControlPlane, wait_for
from cronjob_operator.envtest.audit import AuditEvent, writes
from tests.e2e.support import (
    OperatorProcess,
    apply_all,
    audited_plane,
    cronjob_manifest,
    figure_reporter,
    operator_process,
)

FAST_LEASE = (
    "--leader-elect-lease-duration=4s",
    "--leader-elect-renew-deadline=3s",
    "--leader-elect-retry-period=500ms",
)
FROZEN_FOR = 6.0
"""Seconds the leader stays stopped: longer than the 4 s lease."""


@pytest.fixture(scope="module")
def plane() -> Iterator[ControlPlane]:
    with audited_plane() as audited:
        yield audited


@pytest.fixture
def namespace(plane: ControlPlane, request: pytest.FixtureRequest) -> Iterator[str]:
    name = f"edges-{request.node.name.split('_')[1]}-{int(time.time()) % 100000}"
    plane.kubectl("create", "namespace", name, check=True)
    yield name
    plane.kubectl("delete", "namespace", name, "--wait=false")


@pytest.fixture
def report(request: pytest.FixtureRequest) -> Callable[[str], None]:
    """Print a measured figure past pytest's output capture."""
    return figure_reporter(request, "leader-edges")


def holder(plane: ControlPlane, namespace: str) -> str:
    result = plane.kubectl("get", "lease", DEFAULT_LEADER_ELECTION_ID, "-n", namespace, "-o",
                           "jsonpath={.spec.holderIdentity}")  # fmt: skip
    return result.stdout.strip() if result.returncode == 0 else ""


def acquired_identity(process: OperatorProcess) -> str | None:
    for entry in process.logs():
        message = str(entry.get("msg", ""))
        if message.startswith("successfully acquired lease"):
            return message.rsplit(" as ", 1)[1]
    return None


def agent(identity: str) -> str:
    """What the user agent of the process with ``identity`` contains."""
    return f"({identity})"


def status_writes(plane: ControlPlane, identity: str) -> list[AuditEvent]:
    return [
        event
        for event in writes(plane.audit_events(), user_agents=[agent(identity)])
        if event.resource == "cronjobs" and event.subresource == "status"
    ]


def renewals(plane: ControlPlane, identity: str) -> list[AuditEvent]:
    """The successful Lease writes of the elector of ``identity``, in order."""
    return [
        event
        for event in writes(
            plane.audit_events(), user_agents=[f"{agent(identity)}/leader-election"]
        )
        if event.resource == "leases" and event.code < 300
    ]


def cronjob_batch(namespace: str, count: int) -> list[dict[str, object]]:
    return [cronjob_manifest(f"work-{i:03d}", namespace) for i in range(count)]


def test_a_frozen_leader_writes_nothing_after_the_new_one_acquired_and_exits_1(
    plane: ControlPlane, namespace: str, tmp_path: Path, report: Callable[[str], None]
) -> None:
    # Before the fence and the lost-Lease exit the issue saw the resumed leader exit
    # 1.1-1.6 s after SIGCONT (not re-measured: that code has no short-lease flags). The
    # first run of this test on the fence found a 409 Lease update sent on waking.
    args = [*FAST_LEASE, "--kube-api-qps=2", "--kube-api-burst=1"]
    common = {"namespace": namespace, "leader_election_namespace": namespace, "args": args}
    with operator_process(plane, tmp_path, name="old", **common) as old:  # type: ignore[arg-type]
        wait_for(lambda: acquired_identity(old), 60, message="the first process to lead")
        old_id = acquired_identity(old)
        assert old_id is not None
        assert holder(plane, namespace) == old_id
        with operator_process(plane, tmp_path, name="new", **common) as new:  # type: ignore[arg-type]
            new.wait_ready()
            apply_all(plane, cronjob_batch(namespace, 60))
            wait_for(
                lambda: len(status_writes(plane, old_id)) >= 3,
                60,
                message="the leader to be writing status",
            )
            old.signal(signal.SIGSTOP)
            stopped_at = time.monotonic()
            try:
                wait_for(
                    lambda: holder(plane, namespace) not in ("", old_id),
                    60,
                    message="the standby to acquire the Lease",
                )
                new_id = holder(plane, namespace)
                remaining = FROZEN_FOR - (time.monotonic() - stopped_at)
                if remaining > 0:
                    time.sleep(remaining)  # frozen past the lease, as the scenario says
                written_before = len(status_writes(plane, old_id))
            finally:
                old.signal(signal.SIGCONT)
            resumed_at = time.monotonic()
            code = old.wait(30)
            exit_seconds = time.monotonic() - resumed_at
            acquisition = renewals(plane, new_id)[0]
            # A renewal the freeze caught between its deadline check and its send goes out
            # on waking with the Lease's old resourceVersion: the API server refuses it
            # (409) and nothing is written, as for client-go's elector. Every other write,
            # and any accepted one, counts.
            late = [
                event
                for event in writes(plane.audit_events(), user_agents=[agent(old_id)],
                                    after=acquisition.received)
                if not (event.resource == "leases" and event.code == 409)
            ]  # fmt: skip
            report(
                f"SIGSTOP {FROZEN_FOR:.0f}s, lease 4s/3s/0.5s, qps 2: old leader exit code "
                f"{code} {exit_seconds:.2f}s after SIGCONT; its status writes before the "
                f"freeze {written_before} of 60; its writes after the new leader acquired: "
                f"{len(late)}"
            )
            assert late == [], [f"{e.verb} {e.target} {e.code} at {e.received}" for e in late]
            assert code == 1
            assert any(
                "stopping at once, without draining" in str(e.get("msg")) for e in old.logs()
            )
            assert new.alive()
            wait_for(
                lambda: len(status_writes(plane, new_id)) > 0,
                60,
                message="the new leader to carry on the work",
            )


def longest_gap(events: list[AuditEvent]) -> float:
    times: list[datetime] = [event.received for event in events]
    return max((b - a).total_seconds() for a, b in itertools.pairwise(times))


def test_the_lease_is_renewed_on_time_under_qps_1_and_a_flood_of_writes(
    plane: ControlPlane, namespace: str, tmp_path: Path, report: Callable[[str], None]
) -> None:
    # Before (one token bucket for the whole process; main at 453afb0, same load, run by
    # hand): the 20 workers' reservations put renewals 8-10 s apart, and the leader lost
    # the Lease and exited 1 after 47 s of flood.
    args = ["--kube-api-qps=1", "--kube-api-burst=1", "--max-concurrent-reconciles=20"]
    with operator_process(
        plane, tmp_path, name="busy", namespace=namespace, leader_election_namespace=namespace,
        args=args,
    ) as busy:  # fmt: skip
        wait_for(lambda: acquired_identity(busy), 60, message="the process to lead")
        identity = acquired_identity(busy)
        assert identity is not None
        flood = 80
        apply_all(plane, cronjob_batch(namespace, flood))
        wait_for(
            lambda: len(status_writes(plane, identity)) >= 3,
            60,
            message="the flood of status writes to begin",
        )
        began = status_writes(plane, identity)[0].received
        target = 12

        def renewed_during_flood() -> list[AuditEvent]:
            return [e for e in renewals(plane, identity) if e.received > began]

        wait_for(
            lambda: len(renewed_during_flood()) >= target,
            120,
            interval=0.5,
            message=f"{target} renewals during the flood",
        )
        assert busy.alive(), busy.log_tail()
        window = renewed_during_flood()[:target]
        during = [e for e in status_writes(plane, identity) if e.received <= window[-1].received]
        report(
            f"qps 1, 20 workers, {flood} CronJobs, lease 15s/10s/2s: {len(window)} renewals in "
            f"{(window[-1].received - began).total_seconds():.1f}s of flood, longest gap "
            f"{longest_gap(window):.1f}s, {len(during)} status writes meanwhile"
        )
        after = [e for e in status_writes(plane, identity) if e.received > window[-1].received]
        assert after or len(during) < flood, "the flood was still going on"
        assert holder(plane, namespace) == identity
        assert not any("lost lease" in str(e.get("msg")) for e in busy.logs())


def test_the_audit_log_lists_writes_by_user_agent(plane: ControlPlane, namespace: str) -> None:
    plane.kubectl("create", "configmap", "audited", "-n", namespace, check=True)
    plane.kubectl("get", "configmap", "audited", "-n", namespace, check=True)
    mine = [
        e
        for e in writes(plane.audit_events(), user_agents=["kubectl"], resource="configmaps")
        if e.namespace == namespace
    ]
    assert [(e.verb, e.name, e.code) for e in mine] == [("create", "audited", 201)]
    assert mine[0].username, "the caller is named"
