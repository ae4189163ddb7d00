"""Readiness checks: how the harness knows each component is doing its job.

Each check makes one cheap request and returns True or False, raising
``_http.HttpError`` while a port is not answering yet (callers poll with ``wait_for``
and treat that as "not yet"). The controller manager serves no port here
(``--secure-port=0``), so its readiness is the first object it creates: the ``default``
ServiceAccount. kwok's is every fake node Ready with no NoSchedule or NoExecute taint,
which also proves the node-lifecycle controller has run.
"""

from __future__ import annotations

import json

from cronjob_operator.envtest import _http


def etcd_healthy(etcd_url: str) -> bool:
    return bool(json.loads(_http.get(f"{etcd_url}/health")).get("health") == "true")


def apiserver_ready(admin: _http.AdminClient) -> bool:
    return admin.get("/readyz") == b"ok" and bool(admin.get_json("/api/v1/namespaces/default"))


def controller_manager_ready(admin: _http.AdminClient) -> bool:
    return bool(admin.get_json("/api/v1/namespaces/default/serviceaccounts/default"))


def scheduler_healthy(port: int) -> bool:
    return _http.get(f"https://127.0.0.1:{port}/healthz", verify=False) == b"ok"


def node_ready(admin: _http.AdminClient, name: str, *, own_taint: str | None = None) -> bool:
    """Ready, and no NoSchedule/NoExecute taint left but the node's ``own_taint``."""
    node = admin.get_json(f"/api/v1/nodes/{name}")
    conditions = node.get("status", {}).get("conditions", [])
    ready = any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
    taints = [t for t in node.get("spec", {}).get("taints", []) if t["key"] != own_taint]
    return ready and not any(t["effect"] in {"NoSchedule", "NoExecute"} for t in taints)
