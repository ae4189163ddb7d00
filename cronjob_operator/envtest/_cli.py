"""The ``up|down|env|status|import-image`` commands for a persistent local cluster.

``hack/local-cluster.sh`` runs these; ``import-image`` loads an image archive into the
real node of ``up --real-node``. The cluster lives in
``${XDG_CACHE_HOME:-~/.cache}/cronjob-operator/cluster`` and its processes outlive the
command that started them. ``up`` is idempotent: it reuses a healthy cluster and
replaces a broken one. ``up`` and ``env`` print only shell ``export`` lines on stdout
(logs go to stderr), so ``eval "$(hack/local-cluster.sh up)"`` configures a shell.
Commands hold a lock file so two of them never act on one cluster at once.
"""

from __future__ import annotations

import argparse
import fcntl
import logging
import os
import shlex
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cronjob_operator.envtest import _node
from cronjob_operator.envtest.controlplane import ControlPlane, ControlPlaneError

log = logging.getLogger("local-cluster")


def default_cluster_dir() -> Path:
    """``${XDG_CACHE_HOME:-~/.cache}/cronjob-operator/cluster``."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "cronjob-operator" / "cluster"


def main(argv: list[str] | None = None) -> int:
    """Run one command; returns the process exit status."""
    args = _parser().parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="local-cluster: %(message)s")
    state_dir: Path = args.state_dir.expanduser().absolute()
    try:
        with _locked(state_dir):
            if args.command == "up":
                return _up(state_dir, args)
            if args.command == "down":
                return _down(state_dir)
            if args.command == "env":
                return _env(state_dir)
            if args.command == "import-image":
                return _import_image(state_dir, args.archive)
            return _status(state_dir)
    except RuntimeError as error:  # ControlPlaneError, BinariesError, PkiError
        log.error("%s", error)
        return 1


def _up(state_dir: Path, args: argparse.Namespace) -> int:
    existing = _attach(state_dir)
    if existing is not None:
        if existing.healthy():
            log.info("reusing the running cluster at %s", existing.server)
            _print_exports(existing)
            return 0
        log.info("replacing the unhealthy cluster in %s", state_dir)
        existing.stop()
    plane = ControlPlane(
        bin_dir=args.bin_dir,
        state_dir=state_dir,
        pod_run_seconds=args.pod_run_seconds,
        nodes=args.nodes,
        persistent=True,
        real_node=args.real_node,
        node_bin_dir=args.node_bin_dir,
        pod_network=args.pod_network,
    )
    plane.start()
    _print_exports(plane)
    return 0


def _down(state_dir: Path) -> int:
    plane = _attach(state_dir)
    if plane is None:
        log.info("no cluster in %s", state_dir)
        return 0
    plane.stop()
    log.info("stopped the cluster and removed %s", state_dir)
    return 0


def _env(state_dir: Path) -> int:
    plane = _attach(state_dir)
    if plane is None or not plane.healthy():
        log.error("no running cluster in %s; run hack/local-cluster.sh up", state_dir)
        return 1
    _print_exports(plane)
    return 0


def _import_image(state_dir: Path, archive: Path) -> int:
    plane = _attach(state_dir)
    if plane is None or not plane.real_node:
        log.error(
            "no cluster with a real node in %s; run hack/local-cluster.sh up --real-node", state_dir
        )
        return 1
    plane.import_image(archive)
    log.info("imported %s into %s", archive, _node.NODE_NAME)
    return 0


def _status(state_dir: Path) -> int:
    plane = _attach(state_dir)
    if plane is None:
        print(f"no cluster in {state_dir}")
        return 1
    healthy = plane.healthy()
    print(f"cluster: {'running' if healthy else 'NOT HEALTHY'}")
    print(f"server: {plane.server}")
    print(f"kubeconfig: {plane.kubeconfig}")
    print(f"state: {plane.state_dir}")
    nodes = [*plane.node_names, *([_node.NODE_NAME] if plane.real_node else [])]
    print(f"pod run time: {plane.pod_run_seconds:g}s; nodes: {', '.join(nodes)}")
    for entry in plane.status():
        state = "running" if entry.running else "stopped"
        port = "-" if entry.port is None else str(entry.port)
        print(f"  {entry.component:<24} pid {entry.pid!s:<8} {state:<8} port {port:<6} {entry.log}")
    return 0 if healthy else 1


def _attach(state_dir: Path) -> ControlPlane | None:
    try:
        return ControlPlane.attach(state_dir)
    except ControlPlaneError:
        return None


def _print_exports(plane: ControlPlane) -> None:
    print(f"export KUBECONFIG={shlex.quote(str(plane.kubeconfig))}")
    print(f'export PATH={shlex.quote(str(plane.bin_dir))}:"$PATH"')


@contextmanager
def _locked(state_dir: Path) -> Iterator[None]:
    state_dir.parent.mkdir(parents=True, exist_ok=True)
    with (state_dir.parent / f"{state_dir.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m cronjob_operator.envtest",
        description="Manage a persistent local Kubernetes control plane.",
    )
    parser.add_argument(
        "--state-dir", type=Path, default=default_cluster_dir(), help="%(default)s by default"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    up = commands.add_parser("up", help="start the cluster, or reuse a running one")
    up.add_argument("--bin-dir", type=Path, help="binaries (default: hack/build-binaries.sh)")
    up.add_argument("--nodes", type=int, default=1, help="fake kwok nodes (default 1)")
    up.add_argument("--pod-run-seconds", type=float, help="how long Job pods run")
    up.add_argument(
        "--real-node", action="store_true", help="add a real kubelet node (docs/deploy.md)"
    )
    up.add_argument("--node-bin-dir", type=Path, help="its binaries (default: hack/build-node.sh)")
    up.add_argument(
        "--pod-network",
        action="store_true",
        help="give the real node a Pod network (implies --real-node; docs/deploy.md)",
    )
    commands.add_parser("down", help="stop the cluster and remove its state")
    image = commands.add_parser("import-image", help="import an image archive into the real node")
    image.add_argument("archive", type=Path, help="a docker or OCI archive (hack/build-image.sh)")
    commands.add_parser("env", help="print export lines for a running cluster")
    commands.add_parser("status", help="show components, pids, ports and logs")
    return parser
