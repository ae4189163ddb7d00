"""The Go side of bench/fire.py: kubebuilder's CronJob tutorial controller, run as built.

Issue 38 compares the operator's CPU per run with the Go controller of kubebuilder's
CronJob tutorial (controller-runtime v0.24.1). ``hack/build-go-tutorial.sh`` builds its
``manager`` and copies its CRD into a cache directory outside the repository; this module
finds that directory (``locate``: never builds, so a machine without it skips the Go
phase with one line), swaps the tutorial's CRD in for ours (the same group, kind and
name, so the two cannot be installed side by side) and runs the manager as the tutorial
documents running it locally (``ENABLE_WEBHOOKS=false``), unmodified: one worker (its
``MaxConcurrentReconciles`` default), no metrics server, no leader election.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import _cluster, _common
from bench._runner import ChildProcess
from bench.skew import Watcher
from cronjob_operator.api.batch_v1 import CRONJOB
from cronjob_operator.envtest import ControlPlane
from cronjob_operator.envtest._components import free_ports
from cronjob_operator.runtime.kinds import Kind

MANAGER = "manager"
CRD_FILE = "batch.tutorial.kubebuilder.io_cronjobs.yaml"
BUILD_SCRIPT = _common.REPO / "hack" / "build-go-tutorial.sh"
RECONCILED_CONDITION = "Available"
"""The condition the tutorial's first full reconcile of a CronJob sets (its first status
write sets only ``Progressing``)."""
WORKERS = 1
"""The tutorial's MaxConcurrentReconciles: controller-runtime's default, which it keeps."""


def locate(explicit: Path | None) -> tuple[Path | None, str]:
    """The directory holding the tutorial's manager and CRD, or None and why not.

    ``explicit`` (``--go-tutorial DIR``) is checked; without it the cache is asked
    (``hack/build-go-tutorial.sh --cached``, which never builds).
    """
    if explicit is None:
        done = subprocess.run(
            ["bash", str(BUILD_SCRIPT), "--cached"], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            lines = done.stderr.strip().splitlines() or [f"exit {done.returncode}"]
            return None, lines[-1]
        explicit = Path(done.stdout.strip().splitlines()[-1])
    missing = [name for name in (MANAGER, CRD_FILE) if not (explicit / name).is_file()]
    if missing:
        return None, f"{explicit} has no {' or '.join(missing)} (hack/build-go-tutorial.sh)"
    return explicit, ""


def install_crd(plane: ControlPlane, directory: Path) -> None:
    """Replace our CronJob CRD with the tutorial's (every CronJob goes with ours)."""
    crd = f"crd/{_cluster.CRONJOB_CRD}"
    plane.kubectl("delete", crd, "--wait=true", "--timeout=300s", check=True)
    plane.kubectl("create", "-f", str(directory / CRD_FILE), check=True)
    _cluster.wait_established(plane, _cluster.CRONJOB_CRD)


@dataclass
class ReconciledWatcher(Watcher):
    """The CronJobs whose status shows a first full reconcile (the ``Available``
    condition, which ours and the tutorial's both set), and when the watch saw the last
    of them."""

    kind: Kind = CRONJOB
    reconciled: set[str] = field(default_factory=set)
    last_seen: float = 0.0

    def _record(self, event: dict[str, Any], received: float) -> None:
        obj = event.get("object") or {}
        conditions = (obj.get("status") or {}).get("conditions") or ()
        if any(c.get("type") == RECONCILED_CONDITION for c in conditions):
            metadata = obj["metadata"]
            key = f"{metadata['namespace']}/{metadata['name']}"
            if key not in self.reconciled:
                self.reconciled.add(key)
                self.last_seen = received


class GoManager(ChildProcess):
    """The tutorial's manager in a subprocess (see ``ChildProcess``)."""

    def __init__(self, plane: ControlPlane, directory: Path, log: Path) -> None:
        (probe_port,) = free_ports(1)
        argv = [
            str(directory / MANAGER),
            f"--kubeconfig={plane.kubeconfig}",
            "--metrics-bind-address=0",
            f"--health-probe-bind-address=127.0.0.1:{probe_port}",
            "--leader-elect=false",
            "--zap-log-level=error",  # ours runs at warning; zap has no level between
        ]
        env = {
            **os.environ,
            "ENABLE_WEBHOOKS": "false",
            "KUBECONFIG": str(plane.kubeconfig),
            "TZ": "UTC",  # robfig/cron reads a schedule in the process's zone; ours in UTC
        }
        super().__init__("the Go tutorial's manager", argv, env, log)
