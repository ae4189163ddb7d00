"""CronJobs that validation should have kept out, stored anyway: reported, never looped on.

An old object, a cluster without the CRD's validation, or a write that bypassed it can
leave a CronJob the controller cannot run. Each one must get a Warning event and a
``Degraded`` condition naming the problem, must not be reconciled in a hot loop, and
must not stop the other CronJobs of the same manager. Inputs the CRD schema accepts are
applied as they are; for the two it rejects (an unknown time zone, a name too long for
its Jobs) the module relaxes the CRD's CEL rules for its duration and restores them.
The manager runs in-process with a fake clock. The quiet window starts once the
controller is quiet by what it observed (``RunningManager.settle``: its cache holds the
stored version of each CronJob, then nothing is queued or running), and counts the
reconciles and the Warnings the controller asked for inside it.
"""

from __future__ import annotations

import copy
import json
import time
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from cronjob_operator.api.batch_v1 import CRONJOB
from cronjob_operator.controllers import cronjob
from cronjob_operator.envtest import RUN_DURATION_ANNOTATION, ControlPlane, wait_for
from cronjob_operator.runtime.clock import FakeClock
from cronjob_operator.runtime.controller import Request
from cronjob_operator.runtime.controllerutil import parse_time
from cronjob_operator.runtime.manager import Options
from tests.e2e.support import FaultRow, FaultTable
from tests.integration.support import ReconcileWitness, RunningManager, apply, install_crds
from tests.integration.support import running_manager as run_manager

CRD = "cronjobs.batch.tutorial.kubebuilder.io"
LONG_NAME = "a-cronjob-whose-name-is-much-too-long-for-the-jobs-it-makes"
QUIET_WINDOW = 5.0


def cronjob_object(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    container = spec.pop("container", "main")
    return {
        "apiVersion": "batch.tutorial.kubebuilder.io/v1",
        "kind": "CronJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "schedule": "*/5 * * * *",
            "jobTemplate": {
                "spec": {
                    "backoffLimit": 0,
                    "template": {
                        "metadata": {"annotations": {RUN_DURATION_ANNOTATION: "1s"}},
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [{"name": container, "image": "busybox"}],
                        },
                    },
                }
            },
            **spec,
        },
    }


# name -> (spec overrides, Degraded reason, words the message must contain, Warning event)
BAD = {
    "unparseable": (
        {"schedule": "obvious error schedule"},
        "UnparseableSchedule",
        ("spec.schedule",),
        "UnparseableSchedule",
    ),
    "never-fires": (
        {"schedule": "59 23 31 2 *"},
        "InvalidSchedule",
        ("spec.schedule", "never fires"),
        "InvalidSchedule",
    ),
    "unknown-zone": (
        {"timeZone": "Mars/Olympus_Mons"},
        "UnknownTimeZone",
        ("timeZone", "Mars/Olympus_Mons"),
        "UnknownTimeZone",
    ),
    "bad-template": (
        {"container": "Main_Container"},
        "InvalidJobTemplate",
        ("spec.jobTemplate", "Main_Container"),
        "FailedCreate",
    ),
    LONG_NAME: ({}, "NameTooLong", ("metadata.name", "at most 52"), "FailedCreate"),
}


def _dry_run_accepts(control_plane: ControlPlane, obj: dict[str, Any]) -> bool:
    result = control_plane.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(obj))
    return result.returncode == 0


LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


@pytest.fixture(scope="module")
def relaxed_crd(control_plane: ControlPlane) -> Iterator[None]:
    """The CronJob CRD without its name-length and known-zone CEL rules, then restored."""
    install_crds(control_plane)
    original = control_plane.kubectl_json("get", "crd", CRD)
    relaxed = copy.deepcopy(original)
    for version in relaxed["spec"]["versions"]:
        schema = version["schema"]["openAPIV3Schema"]
        schema.pop("x-kubernetes-validations", None)
        schema["properties"]["spec"]["properties"]["timeZone"].pop("x-kubernetes-validations", None)
    probe = cronjob_object(LONG_NAME, "default", timeZone="Mars/Olympus_Mons")
    # kubectl replace would rewrite apply's last-applied annotation with the live object
    # (resourceVersion included), breaking every later `kubectl apply` of the CRDs.
    relaxed["metadata"].get("annotations", {}).pop(LAST_APPLIED, None)
    result = control_plane.kubectl("replace", "-f", "-", input=json.dumps(relaxed))
    assert result.returncode == 0, result.stderr
    try:
        wait_for(lambda: _dry_run_accepts(control_plane, probe), 30, message="relaxed CRD")
        yield
    finally:
        current = control_plane.kubectl_json("get", "crd", CRD)
        current["spec"] = original["spec"]
        current["metadata"].get("annotations", {}).pop(LAST_APPLIED, None)
        result = control_plane.kubectl("replace", "-f", "-", input=json.dumps(current))
        assert result.returncode == 0, result.stderr
        install_crds(control_plane)  # back to exactly what config/crd says, annotation included
        wait_for(lambda: not _dry_run_accepts(control_plane, probe), 30, message="restored CRD")


@pytest.fixture(scope="module")
def table(request: pytest.FixtureRequest) -> Iterator[FaultTable]:
    results = FaultTable("bad input results (tests/integration/test_bad_input.py)")
    yield results
    results.print(request.config)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def operator(
    control_plane: ControlPlane, relaxed_crd: None, namespace: str, clock: FakeClock
) -> Iterator[RunningManager]:
    setups = {"cronjob": lambda mgr: cronjob.setup(mgr, clock=clock)}
    options = Options(namespace=namespace, health_probe_bind_address="0")
    with run_manager(control_plane, setups, options=options) as running:
        yield running


def test_bad_cronjobs_are_reported_without_hot_loops_and_others_keep_running(
    control_plane: ControlPlane,
    namespace: str,
    clock: FakeClock,
    operator: RunningManager,
    table: FaultTable,
) -> None:
    running = operator
    # Before the CronJobs exist, show a time 30 s past a 5-minute mark: their first
    # reconciles requeue for the next mark (*/5), 4.5 minutes away, never inside the quiet
    # window below. From the real time, a requeue for a mark a few seconds off reached
    # the window when the test started just before one (it failed so in CI).
    shown = clock.now.replace(second=30, microsecond=0)
    clock.set(shown - timedelta(minutes=shown.minute % 5 + 5))
    first_seen = clock.now
    controller = running.controllers["cronjob"]
    witness = controller.reconciler
    assert isinstance(witness, ReconcileWitness)

    def reconciles() -> Counter[str]:
        return Counter({name: witness.started(Request(namespace, name)) for name in BAD})

    for name, (spec, *_rest) in BAD.items():
        apply(control_plane, cronjob_object(name, namespace, **spec))
    apply(control_plane, cronjob_object("good", namespace))
    items = control_plane.kubectl_json("get", CRD, "-n", namespace)["items"]
    newest = max(parse_time(c["metadata"]["creationTimestamp"]) or first_seen for c in items)
    first = newest.replace(second=0, microsecond=0) + timedelta(minutes=5 - newest.minute % 5)
    clock.set(first + timedelta(seconds=1))
    for name in [*BAD, "good"]:
        running.kick("cronjob", namespace, name)

    def stored() -> dict[str, dict[str, Any]]:
        found = control_plane.kubectl_json("get", CRD, "-n", namespace)["items"]
        return {c["metadata"]["name"]: c for c in found}

    def degraded(obj: dict[str, Any]) -> dict[str, Any]:
        conditions = (obj.get("status") or {}).get("conditions") or []
        return next((c for c in conditions if c["type"] == "Degraded"), {})

    def warnings() -> Counter[tuple[str, str]]:
        events = control_plane.kubectl_json("get", "events", "-n", namespace)["items"]
        counts: Counter[tuple[str, str]] = Counter()
        for event in events:
            if event["type"] == "Warning" and event["involvedObject"]["kind"] == "CronJob":
                key = (event["involvedObject"]["name"], event["reason"])
                counts[key] += int(event.get("count") or 1)
        return counts

    def versions() -> dict[tuple[str, str], str]:
        return {
            (namespace, name): obj["metadata"]["resourceVersion"] for name, obj in stored().items()
        }

    def job_names() -> list[str]:
        items = control_plane.kubectl_json("get", "jobs", "-n", namespace)["items"]
        return sorted(j["metadata"]["name"] for j in items)

    def settled() -> bool:
        objs = stored()
        seen = warnings()
        return (
            all(
                degraded(objs[name]).get("reason") == reason and seen[(name, event)] >= 1
                for name, (_spec, reason, _words, event) in BAD.items()
            )
            and f"good-{int(first.timestamp())}" in job_names()
        )

    wait_for(settled, 60, interval=0.5, message="every bad CronJob reported, the good one run")
    # Quiet means the controller has seen its own last writes (their watch events could
    # still bring reconciles otherwise) and has nothing queued or running.
    running.settle("cronjob", CRONJOB, versions)
    before, asked_before = reconciles(), len(running.events.asked())
    time.sleep(QUIET_WINDOW)  # a measurement window: how often is each one reconciled?
    during = reconciles() - before
    # What the controller asked to record in the window (the recorder posts later, from
    # its own thread: the server's events would also show ones asked for before it).
    warned_during = [
        (name, reason)
        for name, type_, reason in running.events.asked()[asked_before:]
        if type_ == "Warning"
    ]

    objs = stored()
    for name, (_spec, reason, words, _event) in BAD.items():
        condition = degraded(objs[name])
        assert condition["status"] == "True", (name, condition)
        assert condition["reason"] == reason, (name, condition)
        for word in words:
            assert word in condition["message"], (name, word, condition["message"])
        assert during[name] == 0, (name, during)
        assert controller.queue.num_requeues(Request(namespace, name)) == 0, name
        assert not [key for key in warned_during if key[0] == name], warned_during
        assert not [j for j in job_names() if j.startswith(f"{name}-")], name
    assert degraded(objs["good"])["status"] == "False"

    # The good CronJob keeps running on schedule next to them.
    second = first + timedelta(minutes=5)
    clock.set(second + timedelta(seconds=1))
    for name in [*BAD, "good"]:
        running.kick("cronjob", namespace, name)
    wait_for(
        lambda: f"good-{int(second.timestamp())}" in job_names(),
        30,
        message="the good CronJob's second run",
    )
    running.settle("cronjob", CRONJOB, versions)
    total = reconciles()
    good_jobs = [j for j in job_names() if j.startswith("good-")]
    assert good_jobs == sorted(f"good-{int(t.timestamp())}" for t in (first, second))
    final = stored()
    seen = warnings()
    for name, (_spec, reason, _words, event) in BAD.items():
        assert degraded(final[name])["reason"] == reason
        assert total[name] <= 8, (name, total)  # creation, the kicks, its own status writes
        requeues = controller.queue.num_requeues(Request(namespace, name))
        table.add(
            FaultRow.from_runs(
                f"bad input: {name if name != LONG_NAME else 'name too long'}",
                f"{_spec or f'a {len(LONG_NAME)}-character name'} stored"
                + (" (CEL relaxed)" if name in {"unknown-zone", LONG_NAME} else ""),
                1,
                expected=set(),  # a CronJob that cannot run creates nothing
                created=[j for j in job_names() if j.startswith(f"{name}-")],
                observed=f"Degraded={degraded(final[name])['reason']}, Warning {event} "
                f"x{seen[(name, event)]}; {total[name]} reconciles in all, {during[name]} in a "
                f"{QUIET_WINDOW:g}s quiet window, {requeues} requeues",
            )
        )
    table.add(
        FaultRow.from_runs(
            "bad input: the good CronJob beside them",
            "valid */5 CronJob in the same manager",
            1,
            expected={f"good-{int(t.timestamp())}" for t in (first, second)},
            created=good_jobs,
            observed=f"runs created: {', '.join(good_jobs)}; "
            f"Degraded={degraded(final['good'])['status']}",
        )
    )
