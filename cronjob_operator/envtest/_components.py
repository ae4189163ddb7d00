"""The five processes of the control plane and the flags each one runs with.

This module is the one place that knows the command lines: which port each component
listens on, which files of the state directory it reads, and which controllers run.
``Layout`` names the files of a state directory; ``command`` turns a component plus a
layout into its argv. Flags follow the notes in docs/local-control-plane.md.
"""

from __future__ import annotations

import enum
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cronjob_operator.envtest import _certs

# The built-in controllers the tests rely on; cronjob runs so the operator can be
# compared with the upstream CronJob controller.
CONTROLLERS = (
    "job-controller",
    "cronjob-controller",
    "garbage-collector-controller",
    "namespace-controller",
    "deployment-controller",
    "replicaset-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "node-lifecycle-controller",
    "ttl-after-finished-controller",
)
SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
POD_CIDR = "10.244.0.0/16"
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
FAKE_NODE_ANNOTATION = ("kwok.x-k8s.io/node", "fake")
NODE_CAPACITY = {"cpu": "32", "memory": "256Gi", "pods": "1000"}
ADMISSION_PLUGINS = ("OwnerReferencesPermissionEnforcement",)
"""Admission plugins off by default that hardened clusters (OpenShift) turn on, so the
operator meets them here: an ownerReference with ``blockOwnerDeletion: true`` is admitted
only from who may update the owner's ``finalizers`` (docs/local-control-plane.md)."""


class Component(enum.StrEnum):
    """A control-plane process, named after its binary."""

    ETCD = "etcd"
    APISERVER = "kube-apiserver"
    CONTROLLER_MANAGER = "kube-controller-manager"
    SCHEDULER = "kube-scheduler"
    KWOK = "kwok"
    NODE = "node"
    """The optional real node (kubelet + containerd, see ``_node``); not a binary."""


START_ORDER = (
    Component.ETCD,
    Component.APISERVER,
    Component.CONTROLLER_MANAGER,
    Component.SCHEDULER,
    Component.KWOK,
    Component.NODE,
)
# What a real cluster gives a Pod and the simulated one does without: a token volume
# (ServiceAccount admission) and the kube-root-ca.crt ConfigMap it mounts; and the
# EndpointSlices of a Service whose Pods run there (the webhook Service's endpoints, which
# the API server calls directly: --enable-aggregator-routing).
REAL_NODE_CONTROLLERS = ("root-ca-certificate-publisher-controller", "endpointslice-controller")


@dataclass(frozen=True)
class Ports:
    """The 127.0.0.1 ports of one plane, fixed for its life (restarts reuse them)."""

    etcd_client: int
    etcd_peer: int
    apiserver: int
    scheduler: int

    @classmethod
    def allocate(cls) -> Ports:
        etcd_client, etcd_peer, apiserver, scheduler = free_ports(4)
        return cls(etcd_client, etcd_peer, apiserver, scheduler)


@dataclass(frozen=True)
class Layout:
    """The files of a plane's state directory."""

    state_dir: Path
    bin_dir: Path

    @property
    def pki(self) -> _certs.Pki:
        return _certs.Pki(self.state_dir / "pki")

    @property
    def kubeconfig(self) -> Path:
        return self.state_dir / "kubeconfig"

    @property
    def kwok_config(self) -> Path:
        return self.state_dir / "kwok-stages.yaml"

    def log(self, component: Component) -> Path:
        return self.state_dir / f"{component}.log"

    def binary(self, name: str) -> Path:
        return self.bin_dir / name


def free_ports(count: int) -> list[int]:
    """``count`` distinct free TCP ports on 127.0.0.1 (all held open while choosing)."""
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def command(
    component: Component,
    layout: Layout,
    ports: Ports,
    *,
    controllers: Sequence[str] = CONTROLLERS,
    feature_gates: Mapping[str, bool] | None = None,
    extra_args: Mapping[str, Sequence[str]] | None = None,
    real_node: bool = False,
) -> list[str]:
    """The full argv of ``component`` (any but ``NODE``, whose argv is ``_node``'s).

    ``controllers``: what kube-controller-manager runs; ``feature_gates``: passed to
    kube-apiserver as ``--feature-gates`` (e.g. ``{"WatchList": False}``);
    ``extra_args``: flags appended per component name (e.g.
    ``{"kube-controller-manager": ["--kube-api-qps=20"]}``); ``real_node``: Pods get
    service-account tokens and the root CA as in a real cluster.
    """
    if real_node:
        controllers = (*controllers, *REAL_NODE_CONTROLLERS)
    argv = _argv(
        component,
        layout,
        ports,
        controllers=controllers,
        feature_gates=feature_gates,
        real_node=real_node,
    )
    return [*argv, *(extra_args or {}).get(str(component), ())]


def _argv(
    component: Component,
    layout: Layout,
    ports: Ports,
    *,
    controllers: Sequence[str],
    feature_gates: Mapping[str, bool] | None,
    real_node: bool,
) -> list[str]:
    pki = layout.pki
    kubeconfig = str(layout.kubeconfig)
    binary = str(layout.binary(component))
    state = layout.state_dir
    if component is Component.ETCD:
        peer = f"http://127.0.0.1:{ports.etcd_peer}"
        client = f"http://127.0.0.1:{ports.etcd_client}"
        return [
            binary,
            "--name=envtest",
            f"--data-dir={state / 'etcd'}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=envtest={peer}",
            "--unsafe-no-fsync",
            "--log-level=warn",
        ]
    if component is Component.APISERVER:
        return [
            binary,
            f"--etcd-servers=http://127.0.0.1:{ports.etcd_client}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            # Nothing keeps the `kubernetes` Service's endpoints: a loopback address may
            # not be one (1.36 logs that every 10 s, 1.37 exits at start), and pods on the
            # real node reach the API server through KUBERNETES_SERVICE_HOST instead.
            "--endpoint-reconciler-type=none",
            f"--secure-port={ports.apiserver}",
            f"--cert-dir={state / 'apiserver'}",
            f"--tls-cert-file={pki.serving_cert}",
            f"--tls-private-key-file={pki.serving_key}",
            f"--client-ca-file={pki.ca_cert}",
            f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
            "--authorization-mode=RBAC",
            f"--enable-admission-plugins={','.join(ADMISSION_PLUGINS)}",
            f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
            f"--service-account-key-file={pki.service_account_public_key}",
            f"--service-account-signing-key-file={pki.service_account_key}",
            *([] if real_node else ["--disable-admission-plugins=ServiceAccount"]),
            # The admin certificate for calls to a kubelet (logs, exec): the real node's
            # authorizes them with a SubjectAccessReview (system:masters may).
            f"--kubelet-client-certificate={pki.admin_cert}",
            f"--kubelet-client-key={pki.admin_key}",
            # At its InternalIP: its Hostname address is the name it registered with.
            "--kubelet-preferred-address-types=InternalIP",
            "--allow-privileged=true",
            # A webhook's Service is called at its endpoints, not its ClusterIP: there is
            # no kube-proxy (the aggregator and the webhooks share this service resolver).
            "--enable-aggregator-routing=true",
            *_feature_gates_flag(feature_gates),
        ]
    if component is Component.CONTROLLER_MANAGER:
        return [
            binary,
            f"--kubeconfig={kubeconfig}",
            "--leader-elect=false",
            f"--controllers={','.join(controllers)}",
            f"--service-account-private-key-file={pki.service_account_key}",
            f"--root-ca-file={pki.ca_cert}",
            "--secure-port=0",
        ]
    if component is Component.SCHEDULER:
        return [
            binary,
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            f"--secure-port={ports.scheduler}",
            f"--cert-dir={state / 'scheduler'}",
        ]
    if component is Component.NODE:
        raise ValueError("the real node's argv comes from _node.command")
    key, value = FAKE_NODE_ANNOTATION
    return [
        binary,
        f"--kubeconfig={kubeconfig}",
        f"--config={layout.kwok_config}",
        "--manage-all-nodes=false",
        f"--manage-nodes-with-annotation-selector={key}={value}",
        "--node-lease-duration-seconds=40",
        f"--cidr={POD_CIDR}",
    ]


def fake_node(name: str) -> dict[str, Any]:
    """A Node for kwok to manage: annotated for it, untainted, with room for any test."""
    key, value = FAKE_NODE_ANNOTATION
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {key: value, "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
            },
        },
        "spec": {},
        "status": {"capacity": NODE_CAPACITY, "allocatable": NODE_CAPACITY},
    }


def _feature_gates_flag(gates: Mapping[str, bool] | None) -> list[str]:
    if not gates:
        return []
    pairs = ",".join(f"{name}={str(on).lower()}" for name, on in sorted(gates.items()))
    return [f"--feature-gates={pairs}"]
