"""``kubectl cjt`` and the CronJob webhook load the CronJob's rules, not the controllers.

Both import the rules a CronJob must obey from ``api.cronjob_rules``; the controllers
(the reconciler and its metrics) and the ``kubernetes`` package (loaded only where a
kubeconfig is read) stay unloaded, which is what shortens ``kubectl cjt --help``
(bench/plugin_start.py prints the figures). Each check imports in a fresh interpreter,
where nothing else has loaded them already.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("cronjob_operator.controllers", "kubernetes")
"""What a command that needs no cluster must not load."""


def loaded_heavy_modules(module: str) -> list[str]:
    """The ``HEAVY`` modules (and their submodules) a fresh interpreter has after
    importing ``module``."""
    code = (
        f"import sys, {module}; print(*sorted(m for m in sys.modules if m.startswith({HEAVY!r})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout
    return out.split()


@pytest.mark.parametrize(
    "module", ["cronjob_operator.plugin", "cronjob_operator.api.cronjob_rules"]
)
def test_the_plugin_and_the_rules_load_no_controller(module: str) -> None:
    assert loaded_heavy_modules(module) == []


def test_the_cronjob_webhook_loads_no_controller() -> None:
    loaded = loaded_heavy_modules("cronjob_operator.webhooks.cronjob")
    assert [name for name in loaded if name.startswith("cronjob_operator.controllers")] == []
