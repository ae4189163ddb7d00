"""``kubectl cjt`` and the CronJob webhook load the CronJob's rules, not the controllers.

``kubectl cjt --help`` and ``kubectl cjt next SCHEDULE`` need argparse, the schedule code
and the rules in ``api.cronjob_rules``; what they start without is what makes them start
at once (bench/plugin_start.py prints the figures): no ``kubernetes`` (loaded only where
a kubeconfig is read), no pydantic (only where a model is used), no REST client, no
manager and no prometheus_client. The package facades (``cronjob_operator.runtime``,
``runtime.controllerutil``, ``api``) import a name's module on its first use, so
importing one small module does not load its package's neighbours.

Each check runs in a fresh interpreter, where nothing else has loaded them already: a
structural check of ``sys.modules``, never a timing.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence

import pytest

HEAVY = (
    "cronjob_operator.controllers",
    "cronjob_operator.runtime.client",
    "cronjob_operator.runtime.manager",
    "cronjob_operator.runtime.sharding",
    "kubernetes",
    "prometheus_client",
    "pydantic",
    "urllib3",
)
"""What a command that needs no cluster must not load (each with its submodules)."""

WITHOUT_A_CLUSTER = {
    "--help": ["--help"],
    "next SCHEDULE": ["next", "*/5 * * * *"],
    "next SCHEDULE in a zone": ["next", "0 9 * * 1-5", "--time-zone", "Europe/Berlin"],
}
"""``kubectl cjt`` commands that need no cluster (their arguments)."""


def heavy(modules: Sequence[str]) -> list[str]:
    """The ``HEAVY`` modules among ``modules``."""
    return sorted(
        name for name in modules if any(name == r or name.startswith(f"{r}.") for r in HEAVY)
    )


def run_fresh(code: str) -> tuple[str, list[str]]:
    """What a fresh interpreter running ``code`` prints, and the modules it has loaded."""
    done = "import sys; print(*sorted(sys.modules), sep='\\n', file=sys.stderr)"
    result = subprocess.run(
        [sys.executable, "-c", f"{code}\n{done}"], check=True, capture_output=True, text=True
    )
    return result.stdout, result.stderr.split()


def modules_after(code: str) -> list[str]:
    """The modules a fresh interpreter has loaded after running ``code``."""
    return run_fresh(code)[1]


def plugin_run(argv: Sequence[str]) -> tuple[str, list[str]]:
    """What ``kubectl cjt ARGV`` prints and the modules it loads (its console script
    calls ``main``)."""
    return run_fresh(
        "import contextlib\nfrom cronjob_operator.plugin import main\n"
        f"with contextlib.suppress(SystemExit):\n    main({list(argv)!r})"
    )


@pytest.mark.parametrize("argv", WITHOUT_A_CLUSTER.values(), ids=WITHOUT_A_CLUSTER.keys())
def test_a_command_without_a_cluster_loads_nothing_heavy(argv: list[str]) -> None:
    out, loaded = plugin_run(argv)
    assert out.startswith(("usage: kubectl cjt", "20"))  # the command ran: help, or times
    assert heavy(loaded) == []


@pytest.mark.parametrize(
    "module",
    [
        "cronjob_operator.api.cronjob_rules",
        "cronjob_operator.runtime",
        "cronjob_operator.runtime.kinds",
        "cronjob_operator.runtime.controllerutil",
        "cronjob_operator.api",
    ],
)
def test_the_rules_and_the_facades_load_nothing_heavy(module: str) -> None:
    assert heavy(modules_after(f"import {module}")) == []


def test_a_facade_name_still_loads_its_module() -> None:
    loaded = modules_after("from cronjob_operator.runtime import Manager")
    assert "cronjob_operator.runtime.manager" in loaded


def test_the_check_sees_a_heavy_module() -> None:
    assert heavy(modules_after("import cronjob_operator.runtime.manager")) != []
    assert heavy(["pydantic_core", "kubernetes_asyncio", "pydantic.main"]) == ["pydantic.main"]


def test_the_cronjob_webhook_loads_no_controller() -> None:
    loaded = modules_after("import cronjob_operator.webhooks.cronjob")
    assert [name for name in loaded if name.startswith("cronjob_operator.controllers")] == []
