"""Fixtures shared by the whole suite: the local control plane, per-test namespaces, and
the RBAC denials a manager logs (``denials``).

Tests under ``tests/integration`` and ``tests/e2e`` are marked ``cluster`` here, so
``pytest -m "not cluster"`` runs the unit tests alone. The ``control_plane`` fixture
starts one real control plane per session (``cronjob_operator.envtest.ControlPlane``),
lazily: only when a test asks for it, so unit-only runs never start one. It is stopped
at the end of the session even when tests fail or the run is interrupted (Ctrl-C,
SIGTERM); its processes also die with the interpreter if pytest itself is killed.

Property tests draw new examples on every developer run (that is how they find bugs);
under CI (``CI`` set) they draw the same ones each time, so a submission's result does
not depend on the draw: a failure CI shows is one a rerun reproduces.

When ``CRONJOB_OPERATOR_FAILURES_FILE`` names a file, each session appends the ids of its
failed and erroring tests to it: hack/test.sh prints them again under its timings, where
a reader of a long, interleaved CI log looks first.
"""

from __future__ import annotations

import logging
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from cronjob_operator.envtest import ControlPlane
from tests.integration.support import Denials

settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

CLUSTER_TEST_DIRS = {"integration", "e2e"}
TESTS_DIR = Path(__file__).parent


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    path = os.environ.get("CRONJOB_OPERATOR_FAILURES_FILE")
    if not path:
        return
    lines = [
        f"{kind.upper()} {report.nodeid}\n"
        for kind in ("failed", "error")
        for report in terminalreporter.stats.get(kind, [])
        if getattr(report, "nodeid", "")
    ]
    if lines:
        with open(path, "a", encoding="utf-8") as failures:
            failures.write("".join(lines))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.is_relative_to(TESTS_DIR):
            top = item.path.relative_to(TESTS_DIR).parts[0]
            if top in CLUSTER_TEST_DIRS:
                item.add_marker(pytest.mark.cluster)


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane]:
    """The session's control plane (admin kubeconfig at ``control_plane.kubeconfig``)."""
    plane = ControlPlane()
    plane.start()
    try:
        yield plane
    finally:
        plane.stop()


@pytest.fixture
def namespace(control_plane: ControlPlane) -> Iterator[str]:
    """A fresh namespace for one test, deleted afterwards (without waiting for it)."""
    name = f"test-{secrets.token_hex(4)}"
    control_plane.kubectl("create", "namespace", name, check=True)
    yield name
    control_plane.kubectl("delete", "namespace", name, "--wait=false")


@pytest.fixture
def denials() -> Iterator[Denials]:
    """Every RBAC denial logged (at any level) during the test: a manager running with
    exactly some RBAC fails its test when that RBAC lacks a verb it needs."""
    handler = Denials()
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
