"""The real node's Pod network: Pods with their own addresses, the host left as it was.

Without it the real node runs ``hostNetwork`` Pods only, so two Pods of one Deployment
cannot share it (they would need the same ports). With it (``ControlPlane(pod_network=
True)``) the node runs in a network namespace of its own: a bridge, ``BRIDGE``, holds
``POD_GATEWAY`` and the CNI bridge plugin gives each Pod an address of ``POD_SUBNET``
on it. Every interface, route and ``net`` sysctl this adds belongs to that namespace and
vanishes with it; the host's stay as they were.

The two namespaces meet at Unix sockets in the node's directory (``_tunnel``):

* the API server's port is relayed into the node's namespace, on its loopback (kubelet's
  kubeconfig names ``127.0.0.1``) and on ``POD_GATEWAY`` (where Pods find the API server;
  its serving certificate names that address too, see ``_certs``);
* the API server reaches Pod addresses (webhooks, through the Service's endpoints, as
  ``--enable-aggregator-routing`` resolves them) through its egress selector: the
  ``cluster`` traffic goes to an HTTP CONNECT proxy listening on ``EGRESS_SOCKET``,
  which dials from inside the node's namespace.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from cronjob_operator.envtest import _tunnel

BRIDGE = "cni0"
POD_SUBNET = "10.85.0.0/24"
"""Apart from the addresses kwok gives the simulated Pods (``_components.POD_CIDR``)."""
POD_GATEWAY = "10.85.0.1"
PREFIX_LENGTH = POD_SUBNET.rpartition("/")[2]
APISERVER_SOCKET = "apiserver.sock"
EGRESS_SOCKET = "egress.sock"
TUNNEL = Path(_tunnel.__file__).resolve()


def cni_config() -> dict[str, object]:
    """The CNI network: the bridge plugin on ``BRIDGE``, host-local addresses, no NAT
    (nothing leaves the namespace but through the sockets)."""
    return {
        "cniVersion": "1.0.0",
        "name": "pods",
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": True,
                "ipMasq": False,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": POD_SUBNET, "gateway": POD_GATEWAY}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                },
            }
        ],
    }


def egress_selector_config(node_directory: Path) -> dict[str, object]:
    """The API server's ``--egress-selector-config-file``: cluster traffic through the
    node's CONNECT proxy."""
    return {
        "apiVersion": "apiserver.k8s.io/v1beta1",
        "kind": "EgressSelectorConfiguration",
        "egressSelections": [
            {
                "name": "cluster",
                "connection": {
                    "proxyProtocol": "HTTPConnect",
                    "transport": {"uds": {"udsName": str(node_directory / EGRESS_SOCKET)}},
                },
            }
        ],
    }


def write_egress_selector_config(path: Path, node_directory: Path) -> None:
    path.write_text(json.dumps(egress_selector_config(node_directory), indent=2))


def host_side(apiserver_port: int) -> str:
    """Shell lines run on the host's network: the API server's socket."""
    return _tunnel_line(
        "relay", f"unix:$node/{APISERVER_SOCKET}", f"tcp:127.0.0.1:{apiserver_port}", log="host"
    )


ENTER_NAMESPACE = 'exec unshare --net /bin/sh "$node/node.sh"'
"""The shell line that runs the rest of the node in its own network namespace."""


def node_side(apiserver_port: int) -> str:
    """Shell lines run first in the node's namespace: its links, and both tunnels."""
    return "\n".join(
        (
            "ip link set lo up",
            f"ip link add {BRIDGE} type bridge",
            f"ip addr add {POD_GATEWAY}/{PREFIX_LENGTH} dev {BRIDGE}",
            f"ip link set {BRIDGE} up",
            _tunnel_line(
                "relay",
                f"tcp:0.0.0.0:{apiserver_port}",
                f"unix:$node/{APISERVER_SOCKET}",
                log="node",
            ),
            _tunnel_line("connect-proxy", f"unix:$node/{EGRESS_SOCKET}", log="egress"),
        )
    )


def _tunnel_line(*args: str, log: str) -> str:
    quoted = " ".join(f'"{arg}"' for arg in args)
    return f'"{sys.executable}" -I "{TUNNEL}" {quoted} >>"$node/tunnel-{log}.log" 2>&1 &'
