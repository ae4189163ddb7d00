"""Shared helpers for tests that run our manager against the local control plane.

``install_crds`` applies config/crd and waits until the API server serves the kinds;
``running_manager`` runs a ``Manager`` in a background thread for the length of a
``with`` block (controllers chosen by the caller, clock injectable) and stops it
gracefully at the end. ``wall_clock`` gives the runtime's ``FakeClock`` (the clock
tests move by hand, so schedule decisions never depend on the wall clock) starting at
the time the API server stamps on objects.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cronjob_operator.envtest import ControlPlane, wait_for
from cronjob_operator.runtime.controller import Controller
from cronjob_operator.runtime.fake import FakeClock
from cronjob_operator.runtime.manager import Manager, Options
from cronjob_operator.runtime.rest import RestClient, load_configuration

REPO = Path(__file__).resolve().parents[2]
CRD_NAMES = (
    "cronjobs.batch.tutorial.kubebuilder.io",
    "configdeployments.apps.tutorial.kubebuilder.io",
)


def install_crds(control_plane: ControlPlane) -> None:
    """Apply config/crd (idempotent) and wait until both CRDs are established."""
    result = control_plane.kubectl("apply", "-k", str(REPO / "config" / "crd"))
    assert result.returncode == 0, result.stderr
    for name in CRD_NAMES:
        wait_for(
            lambda n=name: (
                control_plane.kubectl(  # type: ignore[misc]
                    "wait", "--for=condition=Established", f"crd/{n}", "--timeout=10s"
                ).returncode
                == 0
            ),
            60,
            message=f"CRD {name} established",
        )


def wall_clock() -> FakeClock:
    """A ``FakeClock`` that starts at the wall clock, as the API server's timestamps do."""
    return FakeClock(datetime.now(UTC))


@dataclass
class RunningManager:
    """A manager running in a thread, and the controllers the setup functions returned."""

    manager: Manager
    controllers: dict[str, Controller]
    thread: threading.Thread

    def kick(self, controller: str, namespace: str, name: str) -> None:
        """Enqueue a reconcile now (after moving a fake clock, say)."""
        from cronjob_operator.runtime.reconcile import Request

        self.controllers[controller].queue.add(Request(namespace, name))


@contextlib.contextmanager
def running_manager(
    control_plane: ControlPlane,
    setups: dict[str, Callable[[Manager], Controller]],
    *,
    namespace: str | None = None,
    options: Options | None = None,
) -> Iterator[RunningManager]:
    """Run a manager with the given controllers until the block ends."""
    rest = RestClient(load_configuration(str(control_plane.kubeconfig)))
    manager = Manager(
        rest,
        options or Options(namespace=namespace, health_probe_bind_address="0"),
    )
    controllers = {name: setup(manager) for name, setup in setups.items()}
    exit_codes: list[int] = []
    thread = threading.Thread(
        target=lambda: exit_codes.append(manager.run(install_signal_handlers=False)),
        name="test-manager",
        daemon=True,
    )
    thread.start()
    try:
        wait_for(
            lambda: manager.cache.synced,
            60,
            message="manager caches to sync",
        )
        yield RunningManager(manager, controllers, thread)
    finally:
        manager.stop()
        thread.join(60)
        assert not thread.is_alive(), "manager did not stop within 60s"
        assert exit_codes == [0]


def apply(control_plane: ControlPlane, obj: dict[str, Any]) -> None:
    """``kubectl apply`` one object given as a dict."""
    result = control_plane.kubectl("apply", "-f", "-", input=json.dumps(obj))
    assert result.returncode == 0, result.stderr
