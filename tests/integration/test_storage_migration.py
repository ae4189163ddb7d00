"""Moving the CronJobs' stored version to v2 and back on the real API server loses nothing.

The conversion webhook runs in this process (as in ``test_webhooks``: ``clientConfig.url``
and the CA of ``hack/gen-webhook-certs.sh``); only the conversion route is served, so the
objects are written exactly as given. 300 CronJobs with every optional spec and status
field set are read as v1 and as v2 before each move and compared with the same reads
after it; etcd's own keys (its v3 JSON gateway) show which version each object is stored
as, so a rewrite that did not happen cannot pass. No manager runs: the migration must not
change ``metadata.generation`` (what makes a controller act) nor create a Job.
"""

from __future__ import annotations

import base64
import contextlib
import json
import secrets
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from cronjob_operator import migrate
from cronjob_operator.api import batch_v1, batch_v2
from cronjob_operator.api.meta import Condition, ConditionStatus
from cronjob_operator.envtest import ControlPlane, wait_for
from cronjob_operator.runtime import RestClient, load_configuration
from cronjob_operator.runtime.webhook import WebhookServer
from cronjob_operator.webhooks import conversion, manifests
from tests.integration.support import REPO, conversion_patches, install_crds

pytestmark = pytest.mark.cluster

COUNT = 300
PAGE_SIZE = 100
V1, V2 = batch_v1.CRONJOB, batch_v2.CRONJOB
CRD = f"{V1.plural}.{V1.group}"
VOLATILE = ("resourceVersion", "managedFields")
"""Metadata a rewrite changes by design; everything else must come back identical."""


def maximal(name: str, namespace: str, index: int) -> dict[str, Any]:
    """A v1 CronJob with every optional spec field (``schedule`` or ``schedules``)."""
    spec: dict[str, Any] = {
        "timeZone": "Europe/Berlin",
        "startingDeadlineSeconds": 200,
        "concurrencyPolicy": ("Allow", "Forbid", "Replace", "BufferOne")[index % 4],
        "suspend": index % 2 == 0,
        "jobTemplate": {
            "metadata": {"labels": {"run": name}},
            "spec": {
                "backoffLimit": 2,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "c", "image": "busybox", "args": ["true"]}],
                    }
                },
            },
        },
        "successfulJobsHistoryLimit": 5,
        "failedJobsHistoryLimit": 0,
        "staggerSeconds": 30,
        "failurePolicy": {"pauseAfterConsecutiveFailures": 3},
        "catchUpPolicy": "All",
        "runStartTimeoutSeconds": 600,
        "window": {"start": "2026-01-01T00:00:00Z", "end": "2027-01-01T00:00:00Z"},
        "maxScheduledRuns": 100,
        "exclusions": {"dates": ["2026-12-25"], "schedules": ["* * * * 0,6"]},
        "concurrencyGroup": {"name": "nightly", "whenFull": "Skip"},
    }
    if index % 3 == 0:
        spec["schedules"] = ["@daily", "15 */2 * * 1-5"]
    else:
        spec["schedule"] = ("@hourly", "*/5 9-17 * * 1-5", "0 0 1 1 *")[index % 3]
    return {
        "apiVersion": V1.api_version,
        "kind": V1.kind,
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"team": "a"},
            "annotations": {"note": str(index)},
        },
        "spec": spec,
    }


STATUS: dict[str, Any] = {
    "active": [
        {"apiVersion": "batch/v1", "kind": "Job", "namespace": "x", "name": "j", "uid": "u-1"}
    ],
    "lastScheduleTime": "2026-01-02T04:00:00Z",
    "lastSuccessfulTime": "2026-01-02T03:00:00Z",
    "conditions": [
        Condition(
            type="Available",
            status=ConditionStatus.TRUE,
            reason="Scheduling",
            message="next run at 05:00",
            last_transition_time=datetime(2026, 1, 2, 3, 4, 6, tzinfo=UTC),
            observed_generation=1,
        ).model_dump(mode="json", by_alias=True, exclude_none=True)
    ],
    "observedGeneration": 1,
    "observedSchedule": {
        "schedule": "@hourly",
        "schedules": "[]",
        "timeZone": "Europe/Berlin",
        "since": "2026-01-01T00:00:00Z",
    },
    "nextScheduleTime": "2026-01-02T05:00:00Z",
    "lastHandledRunRequest": "r-1",
    "pendingRunRequest": "r-2",
    "lastFailureTime": "2026-01-02T02:00:00Z",
    "consecutiveFailures": 2,
    "bufferedRun": "2026-01-02T04:30:00Z",
    "skippedRuns": {
        "accountedThrough": "2026-01-02T04:00:00Z",
        "deadlinePassed": 1,
        "forbidWhileActive": 2,
        "suspended": 3,
        "pausedAfterFailures": 4,
        "catchUpBound": 5,
        "bufferFull": 6,
        "excluded": 7,
        "groupFull": 8,
    },
    "backfill": {
        "token": "b-1",
        "from": "2026-01-01T00:00:00Z",
        "to": "2026-01-01T06:00:00Z",
        "requested": 6,
        "done": 3,
        "next": "2026-01-01T03:00:00Z",
        "state": "Running",
    },
    "scheduledRuns": {"count": 3, "countedThrough": "2026-01-02T04:00:00Z", "remaining": 97},
    "waitingForGroup": {"group": "nightly", "scheduledTime": "2026-01-02T04:00:00Z"},
}


def aliases(model: Any) -> set[str]:
    """The JSON names of a pydantic model's fields."""
    return {field.alias or name for name, field in model.model_fields.items()}


def comparable(obj: dict[str, Any]) -> dict[str, Any]:
    metadata = {k: v for k, v in obj["metadata"].items() if k not in VOLATILE}
    return obj | {"metadata": metadata}


def read_all(rest: RestClient, kind: Any, namespace: str) -> dict[str, dict[str, Any]]:
    items = rest.request("GET", kind.collection_path(namespace))["items"]
    return {item["metadata"]["name"]: comparable(item) for item in items}


def stored_versions_in_etcd(control_plane: ControlPlane, namespace: str) -> list[str]:
    """The apiVersion of each CronJob of ``namespace`` as etcd holds it."""
    return list(stored_versions_by_name(control_plane, namespace).values())


def stored_versions_by_name(control_plane: ControlPlane, namespace: str) -> dict[str, str]:
    """Each CronJob of ``namespace`` (by name) and its apiVersion as etcd holds it."""
    prefix = f"/registry/{V1.group}/{V1.plural}/{namespace}/".encode()
    end = prefix[:-1] + bytes([prefix[-1] + 1])
    body = {"key": base64.b64encode(prefix).decode(), "range_end": base64.b64encode(end).decode()}
    request = urllib.request.Request(
        f"{control_plane.etcd_url}/v3/kv/range", data=json.dumps(body).encode(), method="POST"
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        kvs = json.loads(response.read()).get("kvs", [])
    return {
        base64.b64decode(kv["key"]).decode().rpartition("/")[2]: json.loads(
            base64.b64decode(kv["value"])
        )["apiVersion"]
        for kv in kvs
    }


def crd_status_versions(rest: RestClient) -> list[str]:
    versions: list[str] = rest.request("GET", migrate.CRD_PATH)["status"]["storedVersions"]
    return versions


def restore_v1_storage(rest: RestClient) -> None:
    """Rewrite every CronJob as v1 if a test stopped half-way (storedVersions is not
    [v1]). Not after a passing test, which ends there: this walk is of the whole
    cluster's CronJobs, and under load it pushed the module's last test past its
    timeout."""
    if crd_status_versions(rest) != ["v1"]:
        migrate.migrate_storage(rest, "v1")


@pytest.fixture(scope="module")
def conversion_served(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RestClient]:
    """The CRD with v2 served through the in-process conversion webhook; restored after."""
    install_crds(control_plane)
    cert_dir = tmp_path_factory.mktemp("conversion-certs")
    subprocess.run(
        ["bash", str(REPO / "hack" / "gen-webhook-certs.sh"), str(cert_dir)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    server = WebhookServer(("127.0.0.1", 0), cert_dir, {conversion.PATH: conversion.review})
    server.start()
    client_config = manifests.url_client_config(
        f"https://127.0.0.1:{server.port}", (cert_dir / "ca.crt").read_bytes()
    )
    forward, back = conversion_patches(client_config(conversion.PATH))
    rest = RestClient(load_configuration(str(control_plane.kubeconfig)))
    with contextlib.ExitStack() as cleanup:
        cleanup.callback(rest.close)
        cleanup.callback(server.stop)
        cleanup.callback(control_plane.kubectl, "patch", "crd", CRD, "--type=json", "-p", back)
        cleanup.callback(restore_v1_storage, rest)
        control_plane.kubectl("patch", "crd", CRD, "--type=json", "-p", forward, check=True)
        wait_for(
            lambda: (
                control_plane.kubectl("get", f"{V2.plural}.{V2.version}.{V2.group}").returncode == 0
            ),
            60,
            message="CronJob v2 served",
        )
        yield rest


@pytest.fixture(scope="module")
def cronjobs(control_plane: ControlPlane, conversion_served: RestClient) -> Iterator[str]:
    """A namespace of COUNT maximal CronJobs with every status field; deleted after."""
    rest = conversion_served
    # First in etcd's key order, so the first cluster-wide LIST page is these CronJobs
    # and no other test's (one named test-storage-... once found 60 of another
    # namespace's CronJobs ahead of it, and that page rewrote only 40 of its own).
    namespace = f"0-storage-{secrets.token_hex(4)}"
    control_plane.kubectl("create", "namespace", namespace, check=True)
    try:
        for index in range(COUNT):
            obj = maximal(f"cj-{index:03d}", namespace, index)
            created = rest.request("POST", V1.collection_path(namespace), body=obj)
            created["status"] = STATUS
            rest.request(
                "PUT", V1.object_path(namespace, obj["metadata"]["name"], "status"), body=created
            )
        yield namespace
    finally:
        # 300 deletes through the conversion webhook: slow under load.
        rest.request("DELETE", V1.collection_path(namespace), timeout=300)
        control_plane.kubectl("delete", "namespace", namespace, "--wait=false")


def test_the_objects_set_every_v1_and_v2_field(
    conversion_served: RestClient, cronjobs: str
) -> None:
    as_v1 = read_all(conversion_served, V1, cronjobs)
    as_v2 = read_all(conversion_served, V2, cronjobs)
    one_of = {"schedule", "schedules"}
    for reads, model in ((as_v1, batch_v1), (as_v2, batch_v2)):
        for obj in reads.values():
            assert aliases(model.CronJobSpec) - one_of <= obj["spec"].keys()
            assert len(one_of & obj["spec"].keys()) == 1
            assert aliases(batch_v1.CronJobStatus) == obj["status"].keys()
            model.CronJob.model_validate(obj)


@pytest.mark.timeout(1500)  # two walks of 300 CronJobs through the in-process conversion
# webhook, and the module's teardown: 511 s for the walks alone on a loaded CI machine
def test_storage_moves_to_v2_and_back_losing_nothing(
    control_plane: ControlPlane, conversion_served: RestClient, cronjobs: str
) -> None:
    rest = conversion_served
    before = {kind.version: read_all(rest, kind, cronjobs) for kind in (V1, V2)}
    assert set(stored_versions_in_etcd(control_plane, cronjobs)) == {V1.api_version}

    # Interrupted after one page: only that page is rewritten; storedVersions untouched.
    page = rest.request("GET", V1.collection_path(), params={"limit": PAGE_SIZE})["items"]
    assert {obj["metadata"]["namespace"] for obj in page} == {cronjobs}
    first = migrate.migrate_storage(rest, "v2", page_size=PAGE_SIZE, max_pages=1)
    assert first.migrated == PAGE_SIZE
    assert first.continue_token
    assert stored_versions_in_etcd(control_plane, cronjobs).count(V2.api_version) == PAGE_SIZE
    assert crd_status_versions(rest) == ["v1", "v2"]

    rest_of_it = migrate.migrate_storage(
        rest, "v2", page_size=PAGE_SIZE, continue_token=first.continue_token
    )
    assert rest_of_it.continue_token is None
    # The walk is cluster-wide: CronJobs other tests left in namespaces after this one are
    # rewritten too (this namespace's are checked in etcd below).
    assert first.migrated + rest_of_it.migrated >= COUNT
    print(
        f"\nto v2: {COUNT} CronJobs in {first.seconds + rest_of_it.seconds:.1f}s "
        f"(one page, then resumed)"
    )
    assert set(stored_versions_in_etcd(control_plane, cronjobs)) == {V2.api_version}
    assert crd_status_versions(rest) == ["v2"]
    after = {kind.version: read_all(rest, kind, cronjobs) for kind in (V1, V2)}
    assert after == before, "a v1 or v2 read differs after the move to v2"

    # Back to v1, through the command as a user types it.
    command = [sys.executable, "-m", "cronjob_operator", "migrate-storage", "--to", "v1"]
    command += ["--kubeconfig", str(control_plane.kubeconfig)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    assert "CronJobs rewritten as v1" in result.stdout
    assert "storedVersions is [v1]" in result.stdout
    print(f"to v1: {result.stdout.strip()}")
    assert set(stored_versions_in_etcd(control_plane, cronjobs)) == {V1.api_version}
    assert crd_status_versions(rest) == ["v1"]
    back = {kind.version: read_all(rest, kind, cronjobs) for kind in (V1, V2)}
    assert back == before, "a v1 or v2 read differs after the move back to v1"
    jobs = rest.request("GET", f"/apis/batch/v1/namespaces/{cronjobs}/jobs")["items"]
    assert jobs == [], "the migration started a run"
