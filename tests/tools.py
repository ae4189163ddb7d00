"""Where the chart and observability tests find helm, prometheus and promtool.

They are built from Go modules by ``hack/build-tools.sh`` (cached outside the repo and
keyed on their own versions; ``hack/build-binaries.sh`` builds them too), so tests take
the directory from ``$CRONJOB_OPERATOR_TOOLS_DIR`` (``hack/test.sh`` sets it) or run
that script once per session.
"""

from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path

TOOLS_DIR_ENV = "CRONJOB_OPERATOR_TOOLS_DIR"
BUILD_SCRIPT = Path(__file__).resolve().parents[1] / "hack" / "build-tools.sh"


@functools.cache
def tools_dir() -> Path:
    """The directory with helm, prometheus and promtool (built when missing)."""
    configured = os.environ.get(TOOLS_DIR_ENV)
    if configured:
        return Path(configured)
    result = subprocess.run(
        ["bash", str(BUILD_SCRIPT)], stdout=subprocess.PIPE, text=True, check=False
    )
    lines = result.stdout.strip().splitlines()
    assert result.returncode == 0, f"{BUILD_SCRIPT} failed (exit {result.returncode})"
    assert lines, f"{BUILD_SCRIPT} printed no directory"
    return Path(lines[-1])


def tool(name: str) -> str:
    """The path of one tool, checked to be there."""
    path = tools_dir() / name
    assert os.access(path, os.X_OK), f"{path} is missing: run hack/build-tools.sh"
    return str(path)
