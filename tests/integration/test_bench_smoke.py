"""The benchmarks' synthetic Jobs have the shape of a real one, and run from a real one.

bench/ builds its Jobs from ``bench._common.JOB_TEMPLATE`` so that sizes, decode and
freeze costs match what the API server sends. This test creates a Job in the local
control plane, owned by a CronJob, waits for it to complete, and checks that every field
path of the real Job exists in the template (so the template is refreshed when the API
server grows a field); then it runs each benchmark at a tiny size with the real Job as
its ``--template``. No figure is asserted.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench import _common, index_vs_scan, ingest, memory, read_cost
from cronjob_operator.envtest import ControlPlane, wait_for

QUICK = ["--repeat", "1", "--min-time", "0.0005"]
OPAQUE = {"labels", "annotations", "matchLabels", "fieldsV1", "requests", "limits"}
"""Maps whose keys are data, not schema: their own keys are not compared."""


def field_paths(value: Any, prefix: str = "") -> Iterator[str]:
    """Every field path in ``value`` ("spec.template.spec.containers[].image", ...)."""
    if isinstance(value, dict):
        for key, item in value.items():
            path = f"{prefix}.{key}" if prefix else key
            yield path
            if key not in OPAQUE:
                yield from field_paths(item, path)
    elif isinstance(value, list):
        for item in value:
            yield from field_paths(item, f"{prefix}[]")


@pytest.fixture(scope="module")
def real_job(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Path]:
    """A completed Job owned by a (suspended) CronJob, as the API server returns it."""
    namespace = f"bench-{secrets.token_hex(4)}"
    control_plane.kubectl("create", "namespace", namespace, check=True)
    try:
        yield _completed_job(control_plane, namespace, tmp_path_factory.mktemp("bench"))
    finally:
        control_plane.kubectl("delete", "namespace", namespace, "--wait=false")


def _completed_job(control_plane: ControlPlane, namespace: str, directory: Path) -> Path:
    pod_spec = _common.JOB_TEMPLATE["spec"]["template"]["spec"]
    container = pod_spec["containers"][0]
    cronjob = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "bench-owner", "namespace": namespace},
        "spec": {
            "schedule": "0 0 1 1 *",
            "suspend": True,
            "jobTemplate": {"spec": {"template": {"spec": pod_spec}}},
        },
    }
    owner = control_plane.kubectl_json("create", "-f", "-", input=json.dumps(cronjob))
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "bench-owner-29000000",
            "namespace": namespace,
            "labels": {"app": "hello", "team": "payments"},
            "annotations": {_common.SCHEDULED_AT: "2026-01-01T00:00:00+00:00"},
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "CronJob",
                    "name": "bench-owner",
                    "uid": owner["metadata"]["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "backoffLimit": 6,
            "template": {
                "metadata": {"labels": {"app": "hello"}},
                "spec": {
                    "restartPolicy": pod_spec["restartPolicy"],
                    "containers": [
                        {key: container[key] for key in ("name", "image", "command", "resources")}
                    ],
                },
            },
        },
    }
    control_plane.kubectl("create", "-f", "-", input=json.dumps(job), check=True)

    def completed() -> dict[str, Any] | None:
        found: dict[str, Any] = control_plane.kubectl_json(
            "get", "job", "bench-owner-29000000", "-n", namespace
        )
        return found if (found.get("status") or {}).get("completionTime") else None

    found = wait_for(completed, 90, message="the Job to complete")
    path = directory / "job.json"
    path.write_text(json.dumps(found))
    return path


def test_the_template_has_every_field_of_a_real_job(real_job: Path) -> None:
    real = set(field_paths(json.loads(real_job.read_text())))
    synthetic = set(field_paths(_common.JOB_TEMPLATE))
    assert real - synthetic == set(), "refresh bench._common.JOB_TEMPLATE from a real Job"


@pytest.mark.parametrize(
    ("main", "argv"),
    [
        pytest.param(index_vs_scan.main, ["--sizes", "30", *QUICK], id="index_vs_scan"),
        pytest.param(read_cost.main, ["--jobs", "30", *QUICK], id="read_cost"),
        pytest.param(memory.main, ["--jobs", "50"], id="memory"),
        pytest.param(ingest.main, ["--events", "80", "--repeat", "1"], id="ingest"),
    ],
)
def test_a_benchmark_runs_from_a_real_job(
    main: Any, argv: list[str], real_job: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*argv, "--template", str(real_job)]) == 0
    assert "|:" in capsys.readouterr().out
