"""The local control plane is a real cluster: what the operator's tests rely on works.

Jobs run on kwok's fake node and complete (or fail when labelled to), owner references
cascade through the garbage collector, namespaces finish deleting, RBAC denies users
without bindings, and the harness's fault-injection helpers (restarting the API server,
compacting etcd) leave a working cluster behind.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from cronjob_operator.envtest import FAIL_LABEL, RUN_DURATION_ANNOTATION, ControlPlane, wait_for


def job_manifest(name: str, *, fail: bool = False, run_duration: str | None = None) -> str:
    pod_metadata: dict[str, Any] = {}
    if fail:
        pod_metadata["labels"] = {FAIL_LABEL: "true"}
    if run_duration is not None:
        pod_metadata["annotations"] = {RUN_DURATION_ANNOTATION: run_duration}
    return json.dumps(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name},
            "spec": {
                "backoffLimit": 0,
                "template": {
                    "metadata": pod_metadata,
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "main", "image": "busybox"}],
                    },
                },
            },
        }
    )


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    """The condition of type ``kind`` in ``obj``'s status, or {} when it has none."""
    for entry in obj.get("status", {}).get("conditions", []):
        if entry["type"] == kind:
            return dict(entry)
    return {}


def wait_for_condition(
    plane: ControlPlane, resource: str, name: str, namespace: str, kind: str, timeout: float
) -> dict[str, Any]:
    """Wait until the object has a condition of type ``kind`` that is True; return it."""

    def fetch() -> dict[str, Any] | None:
        obj: dict[str, Any] = plane.kubectl_json("get", resource, name, "-n", namespace)
        return obj if condition(obj, kind).get("status") == "True" else None

    found = wait_for(fetch, timeout, message=f"{resource} {namespace}/{name} to be {kind}")
    assert found is not None
    return found


def get_json(plane: ControlPlane, *args: str) -> Any:
    return plane.kubectl_json("get", *args)


def absent(plane: ControlPlane, *args: str) -> bool:
    result = plane.kubectl("get", *args, "-o", "name")
    return result.returncode != 0 and "NotFound" in result.stderr


def test_kwok_node_is_ready(control_plane: ControlPlane) -> None:
    nodes = get_json(control_plane, "nodes")["items"]

    assert len(nodes) >= 1
    node = nodes[0]
    assert node["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
    assert condition(node, "Ready")["status"] == "True"
    assert node["status"]["allocatable"]["cpu"] == "32"
    assert not [t for t in node["spec"].get("taints", []) if t["effect"] == "NoSchedule"]


def test_job_runs_then_completes(control_plane: ControlPlane, namespace: str) -> None:
    control_plane.kubectl("apply", "-n", namespace, "-f", "-", input=job_manifest("ok"), check=True)

    running = wait_for(
        lambda: get_json(control_plane, "job", "ok", "-n", namespace)["status"].get("ready"),
        10,
        message="the Job's pod to be running and ready",
    )
    assert running == 1
    job = wait_for_condition(control_plane, "job", "ok", namespace, "Complete", 30)
    assert job["status"]["succeeded"] == 1
    pods = get_json(control_plane, "pods", "-n", namespace, "-l", "job-name=ok")["items"]
    assert [p["status"]["phase"] for p in pods] == ["Succeeded"]


def test_job_with_fail_label_fails(control_plane: ControlPlane, namespace: str) -> None:
    manifest = job_manifest("bad", fail=True, run_duration="500ms")
    control_plane.kubectl("apply", "-n", namespace, "-f", "-", input=manifest, check=True)

    job = wait_for_condition(control_plane, "job", "bad", namespace, "Failed", 30)
    assert condition(job, "Failed")["reason"] == "BackoffLimitExceeded"
    assert condition(job, "Complete") == {}
    pods = get_json(control_plane, "pods", "-n", namespace, "-l", "job-name=bad")["items"]
    assert [p["status"]["phase"] for p in pods] == ["Failed"]


def test_deleting_owner_collects_dependent(control_plane: ControlPlane, namespace: str) -> None:
    control_plane.kubectl("create", "configmap", "owner", "-n", namespace, check=True)
    owner = get_json(control_plane, "configmap", "owner", "-n", namespace)
    dependent = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "dependent",
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "name": "owner",
                    "uid": owner["metadata"]["uid"],
                    "blockOwnerDeletion": True,
                }
            ],
        },
    }
    control_plane.kubectl(
        "apply", "-n", namespace, "-f", "-", input=json.dumps(dependent), check=True
    )

    control_plane.kubectl("delete", "configmap", "owner", "-n", namespace, check=True)

    wait_for(
        lambda: absent(control_plane, "configmap", "dependent", "-n", namespace),
        30,
        message="the garbage collector to delete the dependent ConfigMap",
    )


def test_namespace_deletion_completes(control_plane: ControlPlane) -> None:
    name = "doomed"
    control_plane.kubectl("create", "namespace", name, check=True)
    # A Job whose pod would run for an hour: deletion must terminate it, as a kubelet does.
    manifest = job_manifest("long", run_duration="1h")
    control_plane.kubectl("apply", "-n", name, "-f", "-", input=manifest, check=True)
    wait_for(
        lambda: get_json(control_plane, "job", "long", "-n", name)["status"].get("active"),
        10,
        message="the Job's pod to be active",
    )

    control_plane.kubectl("delete", "namespace", name, "--wait=false", check=True)

    wait_for(
        lambda: absent(control_plane, "namespace", name),
        60,
        message=f"namespace {name} to finish deleting",
    )


def test_rbac_denies_user_without_bindings(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    can_i = control_plane.kubectl("auth", "can-i", "list", "pods", "-n", namespace, "--as=nobody")
    assert (can_i.returncode, can_i.stdout.strip()) == (1, "no")

    kubeconfig = control_plane.token_kubeconfig(namespace, "nobody", tmp_path / "nobody.yaml")
    kubectl = str(control_plane.bin_dir / "kubectl")
    as_nobody = subprocess.run(
        [kubectl, f"--kubeconfig={kubeconfig}", "get", "configmaps", "-n", namespace],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert as_nobody.returncode == 1
    assert "Forbidden" in as_nobody.stderr
    assert f"system:serviceaccount:{namespace}:nobody" in as_nobody.stderr


def test_apiserver_restarts_with_its_data(control_plane: ControlPlane, namespace: str) -> None:
    control_plane.kubectl("create", "configmap", "kept", "-n", namespace, check=True)

    control_plane.stop_component("kube-apiserver", kill=True)
    down = control_plane.kubectl("get", "configmap", "kept", "-n", namespace, timeout=30)
    assert down.returncode != 0
    control_plane.start_component("kube-apiserver")

    assert get_json(control_plane, "configmap", "kept", "-n", namespace)["metadata"]["name"]


def test_etcd_compaction_and_metrics(control_plane: ControlPlane) -> None:
    revision = control_plane.compact_etcd()

    assert revision > 0
    assert control_plane.compact_etcd() >= revision
    assert "apiserver_request_total" in control_plane.apiserver_metrics()
