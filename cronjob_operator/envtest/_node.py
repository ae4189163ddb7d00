"""A real kubelet node (containerd + runc) for the local control plane, leaving the host as it was.

kwok simulates nodes for Job Pods at scale; this node really runs containers, so the
operator's image can be deployed as a Pod. It is built by ``hack/build-node.sh``
(kubelet from the pinned Kubernetes module, containerd from its Go module, a tiny static
pause image) and uses Debian's runc and loopback CNI plugin.

Leaving the host untouched is the design constraint, and each piece serves it:

* Everything runs inside ``unshare --mount --pid --fork --mount-proc --kill-child``: a
  private mount namespace with tmpfs over ``/run``, ``/var/lib`` and ``/var/log`` (what
  kubelet, containerd and runc write to fixed paths lands there and vanishes with the
  namespace), and a PID namespace whose end kills every process in it, shims and
  containers included, however the plane stops.
* ``iptables`` and friends are stubs on the node's ``PATH`` (kubelet otherwise adds
  ``KUBE-*`` chains to the host's tables).
* ``protectKernelDefaults: true`` makes kubelet check, not set, the sysctls it wants; the
  files it reads are bind-mounted read-only, inside the namespace, from files holding
  the values it expects, so the host's sysctls are never written.
* Without ``pod_network`` only ``hostNetwork`` Pods are meant to run (the CNI config
  is loopback only: no bridge, veth, route or Pod network), on 127.0.0.1 ports; the
  kubelet listens on 127.0.0.1. With it, the node has a Pod network in a network
  namespace of its own (``_podnet``).
* Pod cgroups go under an own ``cgroupRoot`` (``cgroupfs`` driver, cgroup v1 allowed),
  removed when the node stops.
* Without CAP_SYS_RESOURCE runc cannot set a negative ``oom_score_adj`` (every sandbox
  then fails with "can't get final child's PID from pipe: EOF"); containerd calls a runc
  wrapper that raises negative values to 0.
* containerd's registry mirror for every registry is ``127.0.0.1:9``, so no pull leaves
  the machine: images come in with ``ctr -n k8s.io images import`` (``import_image``).

The apiserver reaches a kubelet at the Node's InternalIP, which is not where this one
listens on the host's network (kubelet rejects a loopback node IP), so ``kubectl logs``
and ``exec`` work only with the Pod network (``_podnet``: the node's InternalIP is its
gateway there); the Pod logs are files under ``<state>/node/pod-logs`` either way
(``pod_log``).
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from cronjob_operator.envtest import _components, _podnet

NODE_BIN_DIR_ENV = "CRONJOB_OPERATOR_NODE_BIN_DIR"
NODE_NAME = "real-node"
# Only Pods that tolerate it run here; the simulated Job Pods stay on the kwok nodes.
NODE_TAINT = "cronjob-operator.dev/real-node"
NODE_BINARIES = ("kubelet", "containerd", "containerd-shim-runc-v2", "ctr")
RUNC = Path("/usr/sbin/runc")
CNI_BIN_DIR = Path("/usr/lib/cni")
CGROUP_ROOT = Path("/sys/fs/cgroup")
UNREACHABLE_MIRROR = "https://127.0.0.1:9"
# What kubelet's setupKernelTunables wants; with protectKernelDefaults it only checks.
KERNEL_DEFAULTS = {
    "vm/overcommit_memory": "1",
    "vm/panic_on_oom": "0",
    "kernel/panic": "10",
    "kernel/panic_on_oops": "1",
    "kernel/keys/root_maxkeys": "1000000",
    "kernel/keys/root_maxbytes": "25000000",
}
# Paths that the namespace hides under tmpfs: the state directory must not be below one.
HIDDEN_DIRS = (Path("/run"), Path("/var/lib"), Path("/var/log"))
IPTABLES_COMMANDS = (
    "iptables",
    "iptables-save",
    "iptables-restore",
    "ip6tables",
    "ip6tables-save",
    "ip6tables-restore",
)


class NodeError(RuntimeError):
    """The node's binaries are missing, or an image could not be imported."""


@dataclass(frozen=True)
class NodeLayout:
    """The files of the node, under ``<state>/node``."""

    directory: Path
    bin_dir: Path

    @classmethod
    def of(cls, state_dir: Path, bin_dir: Path) -> NodeLayout:
        """The node's files in the plane whose state is ``state_dir``."""
        return cls(state_dir / "node", bin_dir)

    @property
    def egress_selector_config(self) -> Path:
        """The API server's ``--egress-selector-config-file`` (Pod network only)."""
        return self.directory / "egress-selector.json"

    @property
    def socket(self) -> Path:
        return self.directory / "containerd.sock"

    @property
    def pod_logs(self) -> Path:
        return self.directory / "pod-logs"

    @property
    def cgroup_root(self) -> str:
        """The kubelet's cgroupRoot: one per plane, named after its state directory."""
        return f"/cronjob-operator-{self.directory.parent.name}"


def check_node_bin_dir(bin_dir: Path) -> Path:
    """Return ``bin_dir`` made absolute, or raise if a node binary or runc is missing."""
    missing = [name for name in NODE_BINARIES if not os.access(bin_dir / name, os.X_OK)]
    missing += [] if (bin_dir / "pause.tar").is_file() else ["pause.tar"]
    missing += [] if os.access(RUNC, os.X_OK) else [str(RUNC)]
    missing += [] if os.access(CNI_BIN_DIR / "loopback", os.X_OK) else [str(CNI_BIN_DIR)]
    if missing:
        raise NodeError(
            f"{bin_dir} has no {', '.join(missing)}; run hack/build-node.sh to build them"
        )
    return bin_dir.resolve()


def prepare(
    layout: NodeLayout,
    *,
    kubeconfig: Path,
    client_ca: Path,
    apiserver_port: int,
    pod_network: bool = False,
) -> None:
    """Write the node's configuration, stubs and wrapper, and make its cgroup root;
    with ``pod_network``, the node gets a network namespace of its own (``_podnet``)."""
    state = layout.directory.parent
    if any(state.is_relative_to(hidden) for hidden in HIDDEN_DIRS):
        raise NodeError(f"the node's state {state} is below a directory the node hides")
    layout.directory.mkdir(parents=True)
    layout.pod_logs.mkdir()
    _write_stubs(layout.directory / "stubs")
    _write_kernel_defaults(layout.directory / "sysctl")
    _write_runc_wrapper(layout.directory / "runc")
    _write_registry_hosts(layout.directory / "certs.d")
    _write_cni_config(layout.directory / "cni", pod_network=pod_network)
    if pod_network:
        _podnet.write_egress_selector_config(layout.egress_selector_config, layout.directory)
    (layout.directory / "containerd.toml").write_text(_containerd_config(layout))
    kubelet_port, healthz_port = _components.free_ports(2)
    config = _kubelet_config(layout, client_ca, kubelet_port, healthz_port)
    if pod_network:
        # Its own namespace: reachable at the Node's InternalIP (the Pod gateway) through
        # the API server's egress proxy, so `kubectl logs` and `exec` work.
        config["address"] = "0.0.0.0"
    (layout.directory / "kubelet.yaml").write_text(json.dumps(config, indent=2))
    (layout.directory / "run.sh").write_text(_run_script(layout, apiserver_port, pod_network))
    (layout.directory / "node.sh").write_text(
        _node_script(layout, kubeconfig, apiserver_port, pod_network)
    )
    _make_cgroups(layout.cgroup_root)


def command(layout: NodeLayout) -> list[str]:
    """The node's argv: its run script in fresh mount and PID namespaces."""
    return [
        "unshare",
        "--mount",
        "--propagation=private",
        "--pid",
        "--fork",
        "--mount-proc",
        "--kill-child",
        "/bin/sh",
        str(layout.directory / "run.sh"),
    ]


def import_image(layout: NodeLayout, archive: Path, *, timeout: float = 300.0) -> None:
    """Import a docker or OCI archive into the node's containerd (``k8s.io`` namespace)."""
    argv = [
        str(layout.bin_dir / "ctr"),
        f"--address={layout.socket}",
        "--namespace=k8s.io",
        "images",
        "import",
        str(archive),
    ]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if result.returncode != 0:
        raise NodeError(f"ctr images import {archive} failed: {result.stderr.strip()}")


def pod_log(layout: NodeLayout, namespace: str, pod: str, container: str) -> str:
    """Everything the container logged on this node (all restarts), '' if nothing yet."""
    texts = []
    for directory in sorted(layout.pod_logs.glob(f"{namespace}_{pod}_*/{container}")):
        for path in sorted(directory.glob("*.log"), key=lambda p: int(p.stem or 0)):
            texts.append(path.read_text(errors="replace"))
    return "".join(texts)


def remove_cgroups(cgroup_root: str) -> None:
    """Remove ``cgroup_root`` and everything below it from every hierarchy (bottom up)."""
    for hierarchy in _hierarchies():
        top = hierarchy / cgroup_root.lstrip("/")
        if not top.is_dir():
            continue
        for directory, _, _ in sorted(os.walk(top), key=lambda e: -len(e[0])):
            try:
                os.rmdir(directory)
            except OSError:
                continue


def _hierarchies() -> list[Path]:
    if (CGROUP_ROOT / "cgroup.controllers").exists():
        return [CGROUP_ROOT]
    return [path for path in CGROUP_ROOT.iterdir() if path.is_dir() and not path.is_symlink()]


def _make_cgroups(cgroup_root: str) -> None:
    """kubelet insists that its cgroupRoot exists; a cpuset one needs cpus and mems."""
    for hierarchy in _hierarchies():
        directory = hierarchy / cgroup_root.lstrip("/")
        directory.mkdir(exist_ok=True)
        for name in ("cpuset.cpus", "cpuset.mems"):
            parent = hierarchy / name
            if parent.exists() and not (hierarchy / "cgroup.controllers").exists():
                (directory / name).write_text(parent.read_text())


def _write_stubs(directory: Path) -> None:
    directory.mkdir()
    stub = (
        "#!/bin/sh\n# The node's iptables: does nothing, so the host's tables stay as they are.\n"
        'case "$*" in *--version*) echo "iptables v1.8.9 (legacy)";; esac\nexit 0\n'
    )
    for name in IPTABLES_COMMANDS:
        path = directory / name
        path.write_text(stub)
        path.chmod(0o755)


def _write_kernel_defaults(directory: Path) -> None:
    for key, value in KERNEL_DEFAULTS.items():
        path = directory / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{value}\n")


def _write_runc_wrapper(path: Path) -> None:
    path.write_text(
        "#!/bin/sh\n"
        "# runc, with negative oom_score_adj raised to 0 (no CAP_SYS_RESOURCE here).\n"
        'bundle=""; previous=""\n'
        'for arg in "$@"; do\n'
        '  case "$previous" in --bundle|-b) bundle="$arg";; esac\n'
        '  case "$arg" in --bundle=*) bundle="${arg#--bundle=}";; esac\n'
        '  previous="$arg"\n'
        "done\n"
        'if [ -n "$bundle" ] && [ -f "$bundle/config.json" ]; then\n'
        '  sed -i \'s/"oomScoreAdj":-[0-9]*/"oomScoreAdj":0/\' "$bundle/config.json"\n'
        "fi\n"
        f'exec {RUNC} "$@"\n'
    )
    path.chmod(0o755)


def _write_registry_hosts(directory: Path) -> None:
    default = directory / "_default"
    default.mkdir(parents=True)
    (default / "hosts.toml").write_text(
        f'server = "{UNREACHABLE_MIRROR}"\n\n'
        f'[host."{UNREACHABLE_MIRROR}"]\n  capabilities = ["pull", "resolve"]\n'
    )


def _write_cni_config(directory: Path, *, pod_network: bool) -> None:
    directory.mkdir()
    if pod_network:
        (directory / "10-pods.conflist").write_text(json.dumps(_podnet.cni_config(), indent=2))
        return
    config = {"cniVersion": "1.0.0", "name": "loopback", "plugins": [{"type": "loopback"}]}
    (directory / "10-loopback.conflist").write_text(json.dumps(config, indent=2))


def _pause_image(layout: NodeLayout) -> str:
    return (layout.bin_dir / "pause.image").read_text().strip()


def _containerd_config(layout: NodeLayout) -> str:
    node = layout.directory
    cri_runtime = '[plugins."io.containerd.cri.v1.runtime"'
    return f"""version = 3
root = "{node / "containerd"}"
state = "/run/containerd"
disabled_plugins = [
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.blockfile",
  "io.containerd.nri.v1.nri",
  "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.internal.v1.tracing",
]

[grpc]
  address = "{layout.socket}"

[ttrpc]
  address = "{layout.socket}.ttrpc"

{cri_runtime}]
  enable_selinux = false

{cri_runtime}.containerd]
  default_runtime_name = "runc"

{cri_runtime}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

{cri_runtime}.containerd.runtimes.runc.options]
  BinaryName = "{node / "runc"}"
  SystemdCgroup = false

{cri_runtime}.cni]
  bin_dirs = ["{CNI_BIN_DIR}"]
  conf_dir = "{node / "cni"}"

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"

[plugins."io.containerd.cri.v1.images".pinned_images]
  sandbox = "{_pause_image(layout)}"

[plugins."io.containerd.cri.v1.images".registry]
  config_path = "{node / "certs.d"}"

[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
"""


def _kubelet_config(
    layout: NodeLayout, client_ca: Path, port: int, healthz_port: int
) -> dict[str, object]:
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": "127.0.0.1",
        "port": port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": healthz_port,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(client_ca)},
        },
        "authorization": {"mode": "Webhook"},
        "containerRuntimeEndpoint": f"unix://{layout.socket}",
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": layout.cgroup_root,
        "failCgroupV1": False,
        "failSwapOn": False,
        "protectKernelDefaults": True,
        "oomScoreAdj": 0,
        "podLogsDir": str(layout.pod_logs),
        "serializeImagePulls": False,
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%"},
        "rotateCertificates": False,
        "serverTLSBootstrap": False,
        "registerNode": True,
        "registerWithTaints": [{"key": NODE_TAINT, "value": "true", "effect": "NoSchedule"}],
        "maxPods": 20,
        "localStorageCapacityIsolation": False,
    }


def _run_script(layout: NodeLayout, apiserver_port: int, pod_network: bool) -> str:
    node = layout.directory
    binds = "\n".join(
        f'mount --bind -o ro "$node/sysctl/{key}" /proc/sys/{key}' for key in KERNEL_DEFAULTS
    )
    network = (
        f"{_podnet.host_side(apiserver_port)}\n{_podnet.ENTER_NAMESPACE}"
        if pod_network
        else 'exec /bin/sh "$node/node.sh"'
    )
    return f"""#!/bin/sh
# The node: runs as PID 1 of its own PID and mount namespaces (see _node.py).
set -eu
node="{node}"
for dir in /run /var/lib /var/log; do mount -t tmpfs -o mode=0755 node-tmpfs "$dir"; done
{binds}
{network}
"""


def _node_script(
    layout: NodeLayout, kubeconfig: Path, apiserver_port: int, pod_network: bool
) -> str:
    node = layout.directory
    network = _podnet.node_side(apiserver_port) if pod_network else ""
    node_ip = f" --node-ip={_podnet.POD_GATEWAY}" if pod_network else ""
    return f"""#!/bin/sh
# containerd and kubelet, started by run.sh (see _node.py).
set -eu
node="{node}"
bin="{layout.bin_dir}"
export PATH="$node/stubs:$PATH"
{network}
"$bin/containerd" --config "$node/containerd.toml" >>"$node/containerd.log" 2>&1 &
tries=0
until "$bin/ctr" --address "{layout.socket}" version >/dev/null 2>&1; do
  tries=$((tries + 1)); [ "$tries" -lt 300 ] || {{ echo "containerd did not start"; exit 1; }}
  sleep 0.1
done
"$bin/ctr" --address "{layout.socket}" --namespace k8s.io images import "$bin/pause.tar"
"$bin/kubelet" --config "$node/kubelet.yaml" --kubeconfig "{kubeconfig}" \\
  --hostname-override {NODE_NAME}{node_ip} >>"$node/kubelet.log" 2>&1 &
kubelet=$!
wait "$kubelet"
"""
