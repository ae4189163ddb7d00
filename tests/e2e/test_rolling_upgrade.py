"""A rolling upgrade of the operator, and its downgrade, on the real node: no run lost or
repeated, admission answering throughout.

Two images are built from this tree (``tests.images``): the tree's version, and the same
build with ``NEXT_VERSION`` stamped in (``hack/build-image.sh NAME VERSION``); each
manager logs its version when it starts, and the test reads it from every new Pod's log.
config/default (webhooks, the manager's own certificate, its restricted namespace) runs
as it ships, one Deployment of two replicas with the default strategy (RollingUpdate,
25% surge and unavailable: one Pod added, none taken away first), on the real node's
Pod network (``ControlPlane(pod_network=True)``: each Pod its own address, the API
server calling the webhooks at them); the only patches place the Pods on the node and
give them the API server's address (there is no kube-proxy).

CronJobs due every minute (two ``Forbid``, two with ``successfulJobsHistoryLimit: 0``,
one ``BufferOne`` whose 65 s runs keep a time buffered), and one mid-way through a
backfill of 40 past hourly times (``Forbid``, one at a time), run while the managers go
from the first image to the second and back. Each rollout's window spans at least two
scheduled minutes. Then, from the API server's audit log (every Job create, with its
response code): every Job name (a CronJob and its scheduled time) created once; every
scheduled minute from the CronJobs' creation to the last one has its Job, or is counted
in ``status.skippedRuns`` (``BufferOne``'s ``bufferFull``; none for the others) or waits
in ``status.bufferedRun``; the backfill moved on during each rollout, its Jobs are its
first times in order. A probe writes a CronJob about every second throughout; it wrote
during each rollout and did not stop early, and no write is refused, by a webhook failure
or otherwise. The counts, the refusals and the test's time are printed.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cronjob_operator import __version__
from cronjob_operator import schedule as schedules
from cronjob_operator.api import cronjob_rules
from cronjob_operator.api.batch_v1 import BACKFILL_ANNOTATION
from cronjob_operator.envtest import ControlPlane, wait_for
from cronjob_operator.envtest.audit import AuditEvent, writes
from cronjob_operator.runtime.controllerutil import rfc3339
from tests.e2e.support import (
    apply_all,
    cronjob_manifest,
    cronjobs,
    figure_reporter,
    minute_ticks,
    parse_stamp,
    wait_for_second,
)
from tests.e2e.test_default_install import V1, write_kustomization
from tests.e2e.test_in_cluster import (
    DEPLOYMENT,
    SYSTEM,
    Cluster,
    diagnose_on_failure,  # noqa: F401 (an autouse fixture: prints what a failure needs)
    is_ready,
    log_records,
    pod_network_patches,
)
from tests.images import NEXT_VERSION, Image, next_image, node_bin_dir, operator_image

NAMESPACE = "e2e-upgrade"
PROBE = "probe"
REPLICAS = 2
TWO_REPLICAS = ({"op": "replace", "path": "/spec/replicas", "value": REPLICAS},)
DEFAULT_STRATEGY = {
    "type": "RollingUpdate",
    "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"},
}
"""What the API server defaults a Deployment's strategy to (config/default sets none)."""
EVERY_MINUTE: dict[str, dict[str, Any]] = {
    "forbid-a": {"concurrencyPolicy": "Forbid"},
    "forbid-b": {"concurrencyPolicy": "Forbid"},
    "history0-a": {"successfulJobsHistoryLimit": 0},
    "history0-b": {"successfulJobsHistoryLimit": 0},
}
BUFFERED = "buffered"
BUFFERED_RUN = "65s"
"""Longer than a minute: each time comes due while the previous run is active."""
BUFFERED_WAIT = timedelta(seconds=5)
"""A run created later than this after its time waited in ``status.bufferedRun``."""
BACKFILL = "backfill"
BACKFILL_TIMES = 40
BACKFILL_RUN = "15s"
"""40 hourly times one at a time, ~20 s each: still running when the test ends."""
TICKS_PER_ROLLOUT = 2
WEBHOOK_FAILURE = "failed calling webhook"
"""How the API server words a refusal because it could not get a webhook's answer."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    image, upgrade = operator_image(), next_image()
    with ControlPlane(pod_network=True, node_bin_dir=node_bin_dir(), audit=True) as plane:
        plane.import_image(image.archive)
        plane.import_image(upgrade.archive)
        patches = pod_network_patches(plane) + list(TWO_REPLICAS)
        overlay = write_kustomization(tmp_path_factory.mktemp("overlay"), patches, privileged=False)
        yield Cluster(plane, image, overlay)


class AdmissionProbe:
    """While in ``with``: the suspended CronJob ``probe`` created, then updated, about
    every second (each write passes the mutating and the validating webhook); when each
    write was answered, and every refused write, those a webhook failure refused apart.
    What stopped the thread early (a kubectl that hung past its timeout) is kept too."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.answered: list[datetime] = []
        self.webhook_failures: list[str] = []
        self.other_failures: list[str] = []
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @property
    def writes(self) -> int:
        return len(self.answered)

    def writes_within(self, window: Window) -> int:
        """The writes answered while ``window``'s rollout went on."""
        return sum(window.began <= t <= window.ended for t in self.answered)

    def _run(self) -> None:
        try:
            while not self._stop.wait(1.0):
                self._write()
        except BaseException as error:  # read by the test: a stopped probe checks nothing
            self.error = error

    def _write(self) -> None:
        body = cronjob_manifest(PROBE, NAMESPACE, suspend=True)
        body["metadata"]["annotations"] = {"e2e/probe-write": str(self.writes)}
        result = self.cluster.plane.kubectl("apply", "-f", "-", input=json.dumps(body))
        self.answered.append(datetime.now(UTC))
        if result.returncode != 0:
            failures = (
                self.webhook_failures if WEBHOOK_FAILURE in result.stderr else self.other_failures
            )
            failures.append(f"{self.answered[-1]:%H:%M:%S} {result.stderr.strip()}")

    def __enter__(self) -> AdmissionProbe:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(60)


def started_version(cluster: Cluster, pod: str) -> str:
    """The version the manager in ``pod`` logged when it started."""
    for record in log_records(cluster.manager_log(pod)):
        if record.get("msg") == "starting manager":
            return str(record["version"])
    raise AssertionError(f"no 'starting manager' line in the log of {pod}")


def roll_out(cluster: Cluster, image: Image) -> list[str]:
    """Set the Deployment's image and wait for its rollout; the new Pods' names."""
    cluster.plane.kubectl(
        "set", "image", f"deployment/{DEPLOYMENT}", f"manager={image.name}", "-n", SYSTEM,
        check=True,
    )  # fmt: skip
    cluster.wait_rolled_out(DEPLOYMENT)
    return running_replicas(cluster, image)


def running_replicas(cluster: Cluster, image: Image) -> list[str]:
    """The Deployment's Pods once exactly ``REPLICAS`` are left, all Ready on ``image``
    (a replaced Pod may not yet be marked for deletion when the rollout is complete)."""

    def pods() -> list[dict[str, Any]]:
        return cluster.manager_pods()

    def settled() -> bool:
        current = pods()
        images = {pod["spec"]["containers"][0]["image"] for pod in current}
        return len(current) == REPLICAS and images == {image.name} and all(map(is_ready, current))

    wait_for(settled, 60, message=f"{REPLICAS} Ready Pods on {image.name}",
             detail=lambda: str([p["metadata"]["name"] for p in pods()]))  # fmt: skip
    return sorted(str(pod["metadata"]["name"]) for pod in pods())


class Window:
    """One rollout: when it began and ended, and the versions its new Pods started."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.began = datetime.now(UTC)
        self.ended = self.began
        self.started: dict[str, str] = {}

    def ticks(self) -> list[datetime]:
        return minute_ticks(self.began, self.ended)


def rolling_update(cluster: Cluster, image: Image, name: str) -> Window:
    """The Deployment to ``image``; the window ends once it spans ``TICKS_PER_ROLLOUT``
    scheduled minutes (waiting for the next one when it does not)."""
    window = Window(name)
    for pod in roll_out(cluster, image):
        window.started[pod] = started_version(cluster, pod)
    while len(minute_ticks(window.began, datetime.now(UTC))) < TICKS_PER_ROLLOUT:
        time.sleep(61 - datetime.now(UTC).second)
    window.ended = datetime.now(UTC)
    return window


def the_cronjobs(now: datetime) -> list[dict[str, Any]]:
    """The every-minute CronJobs, the buffered one, and the backfill of past hours."""
    objects = [cronjob_manifest(name, NAMESPACE, **spec) for name, spec in EVERY_MINUTE.items()]
    objects.append(
        cronjob_manifest(BUFFERED, NAMESPACE, run=BUFFERED_RUN, concurrencyPolicy="BufferOne")
    )
    schedule = f"{backfill_minute(now)} * * * *"
    backfill = cronjob_manifest(
        BACKFILL, NAMESPACE, schedule=schedule, run=BACKFILL_RUN, concurrencyPolicy="Forbid"
    )
    first = backfill_times(now)[0]
    request = {
        "token": "upgrade",
        "from": rfc3339(first),
        "to": rfc3339(first + timedelta(hours=BACKFILL_TIMES)),
    }
    backfill["metadata"]["annotations"] = {BACKFILL_ANNOTATION: json.dumps(request)}
    objects.append(backfill)
    return objects


def backfill_minute(now: datetime) -> int:
    """The minute of the hour the backfill CronJob is scheduled at: half an hour from
    ``now``, so none of its own times falls within the test (at the top of the hour, its
    time would wait behind the backfill's Jobs under Forbid, neither run nor skipped yet)."""
    return (now.minute + 30) % 60


def backfill_times(now: datetime) -> list[datetime]:
    """The backfill's hourly times: ``BACKFILL_TIMES`` of them, from two days back."""
    start = now.replace(minute=backfill_minute(now), second=0, microsecond=0)
    first = start - timedelta(days=2)
    return [first + timedelta(hours=hour) for hour in range(BACKFILL_TIMES)]


Creates = dict[tuple[str, datetime], list[AuditEvent]]
"""(CronJob, scheduled time) -> each create of its Job the API server logged."""


def job_creates(plane: ControlPlane) -> Creates:
    """Every Job create the API server answered 201, by its Job's CronJob and time (a
    Job is named ``<cronjob>-<unix seconds of its scheduled time>``)."""
    created: Creates = {}
    for event in writes(plane.audit_events(), resource="jobs"):
        if event.verb == "create" and event.namespace == NAMESPACE and event.code == 201:
            owner, _, stamp = event.name.rpartition("-")
            key = (owner, datetime.fromtimestamp(int(stamp), UTC))
            created.setdefault(key, []).append(event)
    return created


def most_manager_pods_at_once(plane: ControlPlane) -> int:
    """From the audit log: the most manager Pods that existed at once, not yet being
    deleted (a create adds one; the first delete of a Pod, the ReplicaSet's graceful
    one, takes it away)."""
    existing = most = 0
    deleted: set[str] = set()
    for event in writes(plane.audit_events(), resource="pods"):
        if event.namespace != SYSTEM or event.subresource or event.code >= 300:
            continue
        if event.verb == "create":
            existing += 1
        elif event.verb == "delete" and event.name not in deleted:
            deleted.add(event.name)
            existing -= 1
        most = max(most, existing)
    return most


def backfill_done(cluster: Cluster) -> int:
    status = cronjobs(cluster.plane, NAMESPACE)[BACKFILL].get("status") or {}
    return int((status.get("backfill") or {}).get("done") or 0)


def scheduled_times(cronjob: dict[str, Any], since: datetime, last: datetime) -> list[datetime]:
    """The times in (since, last] ``cronjob`` (read as v1) is scheduled at, by the
    operator's own schedule rules; a cron schedule has at most one time a minute."""
    schedule = cronjob_rules.parse_spec_schedule(cronjob["spec"])
    minutes = int((last - since).total_seconds() // 60) + 1
    return list(schedules.times_between(schedule, since, last, limit=minutes))


def runs_not_made(cluster: Cluster, created: Creates, last: datetime) -> dict[str, int]:
    """Per CronJob (the probe aside), its scheduled times up to ``last`` with no Job and
    not waiting in ``status.bufferedRun``, less those ``status.skippedRuns`` counts (any
    reason): above 0, a time lost."""
    lost = {}
    for name, cronjob in cronjobs(cluster.plane, NAMESPACE, V1).items():
        if name == PROBE:
            continue
        status = cronjob.get("status") or {}
        waiting = {parse_stamp(status["bufferedRun"])} if status.get("bufferedRun") else set()
        since = parse_stamp(cronjob["metadata"]["creationTimestamp"])
        missing = [
            t
            for t in scheduled_times(cronjob, since, last)
            if (name, t) not in created and t not in waiting
        ]
        lost[name] = len(missing) - skipped(status)
    return lost


def skipped(status: dict[str, Any]) -> int:
    """The times ``status.skippedRuns`` counts, every reason."""
    runs = status.get("skippedRuns") or {}
    return sum(count for key, count in runs.items() if key != "accountedThrough")


def install_two_replicas(cluster: Cluster) -> None:
    """config/default's Deployment, its two replicas Ready on the first image, with the
    strategy the API server defaults."""
    cluster.roll_out_overlay()
    for pod in running_replicas(cluster, cluster.image):
        assert started_version(cluster, pod) == __version__
    deployment = cluster.get("deployment", DEPLOYMENT, "-n", SYSTEM)
    assert deployment["spec"]["strategy"] == DEFAULT_STRATEGY


def wait_for_every_run(cluster: Cluster, last: datetime) -> None:
    """Until every scheduled minute up to ``last`` has its Job, waits in the buffer or is
    counted skipped (the last minute's Jobs are created shortly after it)."""

    def lost() -> dict[str, int]:
        return runs_not_made(cluster, job_creates(cluster.plane), last)

    wait_for(
        lambda: all(n <= 0 for n in lost().values()),
        90,
        interval=2,
        message=f"a Job, a buffered time or a skip counted for every scheduled minute to {last}",
        detail=lambda: str(lost()),
    )


def test_a_rolling_upgrade_and_downgrade_lose_no_run_and_keep_admission(
    cluster: Cluster, request: pytest.FixtureRequest
) -> None:
    report = figure_reporter(request, "rolling upgrade")
    began = time.monotonic()
    install_two_replicas(cluster)
    cluster.plane.kubectl("create", "namespace", NAMESPACE, check=True)
    now = datetime.now(UTC)
    apply_all(cluster.plane, the_cronjobs(now))
    windows, done = [], [backfill_done(cluster)]
    with AdmissionProbe(cluster) as probe:
        for name, image, version in (
            ("upgrade", next_image(), NEXT_VERSION),
            ("downgrade", cluster.image, __version__),
        ):
            wait_for_second(45, 55)  # the first scheduled minute comes within the rollout
            window = rolling_update(cluster, image, name)
            windows.append(window)
            done.append(backfill_done(cluster))
            assert set(window.started.values()) == {version}, window.started
        last = windows[-1].ticks()[-1]
        wait_for_every_run(cluster, last)
    created = job_creates(cluster.plane)
    statuses = {n: c.get("status") or {} for n, c in cronjobs(cluster.plane, NAMESPACE).items()}
    skips = {name: skipped(status) for name, status in statuses.items() if name != PROBE}
    buffered = [
        t
        for (owner, t), creates in created.items()
        if owner == BUFFERED and creates[0].received - t > BUFFERED_WAIT
    ]
    for window in windows:
        ticks = [f"{t:%H:%M}" for t in window.ticks()]
        report(f"{window.name} {window.began:%H:%M:%S}-{window.ended:%H:%M:%S}: scheduled "
               f"minutes {ticks}, new Pods and their versions {window.started}")  # fmt: skip
    per_time = Counter(len(creates) for creates in created.values())
    per_cronjob = Counter(owner for owner, _ in created)
    writers = Counter(c.user_agent.split(" ")[0] for creates in created.values() for c in creates)
    report(f"times with a Job per CronJob {dict(per_cronjob)}; Job creates per (CronJob, "
           f"scheduled time) -> how many times: {dict(per_time)}; "
           f"skipped {skips}; {len(buffered)} {BUFFERED} runs started from the buffer, "
           f"{statuses[BUFFERED].get('bufferedRun')} buffered at the end; "
           f"backfill done {done} of {BACKFILL_TIMES}; creates by {dict(writers)}")  # fmt: skip
    within = {window.name: probe.writes_within(window) for window in windows}
    most_pods = most_manager_pods_at_once(cluster.plane)
    report(f"most manager Pods at once: {most_pods} (replicas {REPLICAS})")
    report(f"admission probe: {probe.writes} writes ({within} during the rollouts), "
           f"{len(probe.webhook_failures)} refused by a webhook failure, "
           f"{len(probe.other_failures)} otherwise; "
           f"test time {time.monotonic() - began:.0f}s")  # fmt: skip

    assert all(len(window.ticks()) >= TICKS_PER_ROLLOUT for window in windows)
    # The Deployment surges by replica counts, and the old ReplicaSet deletes its Pod a
    # little later, so under load a fourth Pod may briefly exist: at least one more.
    assert most_pods >= REPLICAS + 1, "the default RollingUpdate adds a Pod before it removes"
    assert {key: n for key, n in created.items() if len(n) > 1} == {}
    assert runs_not_made(cluster, created, last) == dict.fromkeys(skips, 0)
    assert all(skips[name] == 0 for name in EVERY_MINUTE), skips
    assert buffered, f"no {BUFFERED} run waited in the buffer"
    assert probe.error is None, repr(probe.error)
    assert all(within.values()), f"a rollout with no probe write: {within}"
    assert probe.webhook_failures == []
    assert probe.other_failures == []
    assert done[0] < done[1] < done[2] < BACKFILL_TIMES, done
    backfilled = sorted(t for (owner, t) in created if owner == BACKFILL and t < now)
    assert backfilled == backfill_times(now)[: len(backfilled)]
