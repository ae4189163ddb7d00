"""The local control plane's real node runs a container and leaves the host as it was.

``ControlPlane(pod_network=True)`` adds a kubelet with containerd and runc (see
cronjob_operator/envtest/_node.py) in a network namespace of its own, with a Pod network
(cronjob_operator/envtest/_podnet.py). The node must become Ready and run a hostNetwork
Pod from an imported image to completion, with its log readable; a Pod off the host
network must get an address of the Pod subnet and reach the API server at the gateway,
its TLS verified against the cluster's CA, its log be read with ``kubectl logs`` and a
command run in a Pod with ``kubectl exec`` (the API server reaching the kubelet in the
node's namespace); and the host must be
exactly as before, compared while the node runs and after it stopped: no iptables
rules, no network interfaces or routes, no sysctl written, no mount, no cgroup left.
"""

from __future__ import annotations

import ipaddress
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cronjob_operator.envtest import REAL_NODE_NAME, REAL_NODE_TAINT, ControlPlane, wait_for
from cronjob_operator.envtest._node import KERNEL_DEFAULTS
from cronjob_operator.envtest._podnet import POD_SUBNET
from tests.images import Image, node_bin_dir, operator_image

SERVICE_ACCOUNT_CA = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
# What the node would change if it were let loose on the host: kubelet's own sysctls
# and those a Pod network or kube-proxy would set.
WATCHED_SYSCTLS = (
    *KERNEL_DEFAULTS,
    "net/ipv4/ip_forward",
    "net/ipv4/conf/all/route_localnet",
    "net/bridge/bridge-nf-call-iptables",
    "net/ipv4/conf/all/forwarding",
)


def host_state() -> dict[str, Any]:
    """The host's firewall rules, links, watched sysctls and mount points."""

    def run(*argv: str) -> str:
        return subprocess.run(argv, capture_output=True, text=True, check=False).stdout

    sysctls = {}
    for key in WATCHED_SYSCTLS:
        path = Path("/proc/sys") / key
        sysctls[key] = path.read_text().strip() if path.exists() else None
    mounts = sorted(
        line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()
    )
    return {
        "iptables -S": run("iptables", "-S"),
        "iptables -t nat -S": run("iptables", "-t", "nat", "-S"),
        "ip link": run("ip", "-o", "link"),
        "ip route": run("ip", "route"),
        "sysctls": sysctls,
        "mounts": mounts,
    }


def hello_pod(image: Image) -> dict[str, Any]:
    return one_shot_pod("hello", image, ["python3", "-c", "print('hello from the real node')"])


def one_shot_pod(
    name: str, image: Image, command: list[str], *, host_network: bool = True
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "hostNetwork": host_network,
            "restartPolicy": "Never",
            "nodeSelector": {"kubernetes.io/hostname": REAL_NODE_NAME},
            "tolerations": [{"key": REAL_NODE_TAINT, "operator": "Exists"}],
            "securityContext": {"runAsNonRoot": True, "runAsUser": 65532},
            "containers": [
                {
                    "name": name,
                    "image": image.name,
                    "imagePullPolicy": "Never",
                    "command": command,
                    "securityContext": {
                        "readOnlyRootFilesystem": True,
                        "allowPrivilegeEscalation": False,
                        "capabilities": {"drop": ["ALL"]},
                    },
                }
            ],
        },
    }


@pytest.fixture(scope="module")
def before() -> dict[str, Any]:
    return host_state()


@pytest.fixture(scope="module")
def plane(before: dict[str, Any]) -> Iterator[ControlPlane]:
    image = operator_image()
    with ControlPlane(pod_network=True, node_bin_dir=node_bin_dir()) as plane:
        plane.import_image(image.archive)
        yield plane


def run_to_completion(plane: ControlPlane, pod: dict[str, Any]) -> dict[str, Any]:
    """Create ``pod`` and wait until it ended; the Pod as it ended."""
    name = pod["metadata"]["name"]
    plane.kubectl("apply", "-f", "-", input=json.dumps(pod), check=True)

    def get() -> dict[str, Any]:
        found: dict[str, Any] = plane.kubectl_json("get", "pod", name, "-n", "default")
        return found

    try:
        wait_for(
            lambda: get()["status"].get("phase") in {"Succeeded", "Failed"},
            120,
            message=f"the Pod {name} to finish",
        )
    finally:
        print(plane.kubectl("describe", "pod", name, "-n", "default").stdout)
    return get()


def test_a_hostnetwork_pod_runs_to_completion(plane: ControlPlane, before: dict[str, Any]) -> None:
    pod = run_to_completion(plane, hello_pod(operator_image()))
    assert pod["status"]["phase"] == "Succeeded"
    assert "hello from the real node" in plane.pod_log("default", "hello", "hello")
    assert host_state() == before


def test_a_pod_on_the_pod_network_reaches_the_api_server_at_the_gateway(
    plane: ControlPlane, before: dict[str, Any]
) -> None:
    url = f"https://{plane.pod_gateway}:{plane.ports.apiserver}/version"
    fetch = (
        "import json, ssl, urllib.request\n"
        f"context = ssl.create_default_context(cafile={SERVICE_ACCOUNT_CA!r})\n"
        f"answer = json.load(urllib.request.urlopen({url!r}, context=context, timeout=10))\n"
        "print('server', answer['gitVersion'])\n"
    )
    command = ["python3", "-c", fetch]
    pod = run_to_completion(
        plane, one_shot_pod("net", operator_image(), command, host_network=False)
    )
    log = plane.pod_log("default", "net", "net")
    assert pod["status"]["phase"] == "Succeeded", log
    assert ipaddress.ip_address(pod["status"]["podIP"]) in ipaddress.ip_network(POD_SUBNET)
    assert f"server {plane.kubectl_json('version')['serverVersion']['gitVersion']}" in log
    assert host_state() == before


def test_kubectl_logs_and_exec_reach_the_kubelet_on_the_pod_network(plane: ControlPlane) -> None:
    logs = plane.kubectl("logs", "net", "-n", "default")
    assert logs.returncode == 0, logs.stderr
    assert logs.stdout.startswith("server v")
    sleeper = one_shot_pod(
        "sleeper", operator_image(), ["python3", "-c", "import time; time.sleep(300)"],
        host_network=False,
    )  # fmt: skip
    plane.kubectl("apply", "-f", "-", input=json.dumps(sleeper), check=True)
    plane.kubectl("wait", "--for=condition=Ready", "pod/sleeper", "--timeout=120s", check=True)
    command = ["python3", "-c", "print('exec', 6 * 7)"]
    executed = plane.kubectl("exec", "sleeper", "-n", "default", "--", *command)
    plane.kubectl("delete", "pod", "sleeper", "--grace-period=0", "--wait=false")
    assert executed.returncode == 0, executed.stderr
    assert executed.stdout.strip() == "exec 42"


def test_pods_get_a_service_account_token_and_the_root_ca(plane: ControlPlane) -> None:
    configmap = plane.kubectl_json("get", "configmap", "kube-root-ca.crt", "-n", "default")
    pod = plane.kubectl_json("get", "pod", "hello", "-n", "default")
    volumes = {volume["name"] for volume in pod["spec"]["volumes"]}
    assert "ca.crt" in configmap["data"]
    assert any(name.startswith("kube-api-access-") for name in volumes)


def test_the_host_is_as_before_once_the_node_stopped(
    plane: ControlPlane, before: dict[str, Any]
) -> None:
    cgroup_root = f"cronjob-operator-{plane.state_dir.name}"
    plane.stop()
    assert host_state() == before
    assert not list(Path("/sys/fs/cgroup").glob(f"*/{cgroup_root}"))
