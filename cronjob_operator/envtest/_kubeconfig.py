"""Kubeconfig files for the control plane: admin (client certificate) and token users.

Credentials are embedded (``*-data`` fields) so a kubeconfig stays valid wherever it is
copied, and files are written with mode 0600 because they hold keys or tokens.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import yaml

CLUSTER = "cronjob-operator-envtest"


def write_cert_kubeconfig(
    path: Path, *, server: str, ca_cert: Path, client_cert: Path, client_key: Path, user: str
) -> None:
    """Write a kubeconfig that authenticates with a client certificate."""
    credentials = {
        "client-certificate-data": _b64(client_cert.read_bytes()),
        "client-key-data": _b64(client_key.read_bytes()),
    }
    _write(path, server=server, ca_cert=ca_cert, user=user, credentials=credentials)


def write_token_kubeconfig(
    path: Path, *, server: str, ca_cert: Path, token: str, user: str
) -> None:
    """Write a kubeconfig that authenticates with a bearer token."""
    _write(path, server=server, ca_cert=ca_cert, user=user, credentials={"token": token})


def _write(
    path: Path, *, server: str, ca_cert: Path, user: str, credentials: dict[str, str]
) -> None:
    config: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": CLUSTER,
                "cluster": {
                    "server": server,
                    "certificate-authority-data": _b64(ca_cert.read_bytes()),
                },
            }
        ],
        "users": [{"name": user, "user": credentials}],
        "contexts": [{"name": CLUSTER, "context": {"cluster": CLUSTER, "user": user}}],
        "current-context": CLUSTER,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as file:
        yaml.safe_dump(config, file, sort_keys=False)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()
