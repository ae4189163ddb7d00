"""Where the control plane's binaries come from.

The binaries are built from Go modules by ``hack/build-binaries.sh`` (which caches them
outside the repo and prints their directory), so the harness either takes a directory
from ``$CRONJOB_OPERATOR_BIN_DIR`` or runs that script, found relative to this package
in a source checkout. Either way the directory is checked for every binary the control
plane needs before anything is started, so a missing one fails with a clear message.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

BIN_DIR_ENV = "CRONJOB_OPERATOR_BIN_DIR"
REQUIRED_BINARIES = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubectl",
    "kwok",
)
BUILD_SCRIPT = Path(__file__).resolve().parents[2] / "hack" / "build-binaries.sh"


class BinariesError(RuntimeError):
    """The binaries could not be found or built."""


def find_bin_dir() -> Path:
    """Return the directory holding the control plane's binaries.

    Uses ``$CRONJOB_OPERATOR_BIN_DIR`` when set; otherwise runs the repo's
    ``hack/build-binaries.sh`` (blocking: seconds on a cache hit, tens of minutes cold;
    its progress goes to stderr). Raises ``BinariesError`` when neither works.
    """
    configured = os.environ.get(BIN_DIR_ENV)
    if configured:
        return check_bin_dir(Path(configured), source=f"${BIN_DIR_ENV}")
    if not BUILD_SCRIPT.is_file():
        raise BinariesError(
            f"{BUILD_SCRIPT} does not exist (not a source checkout?): "
            f"set ${BIN_DIR_ENV} to a directory holding {', '.join(REQUIRED_BINARIES)}"
        )
    result = subprocess.run(
        ["bash", str(BUILD_SCRIPT)], stdout=subprocess.PIPE, text=True, check=False
    )
    lines = result.stdout.strip().splitlines()
    if result.returncode != 0 or not lines:
        raise BinariesError(
            f"{BUILD_SCRIPT} failed with exit code {result.returncode}; see its output above"
        )
    return check_bin_dir(Path(lines[-1]), source=str(BUILD_SCRIPT))


def check_bin_dir(bin_dir: Path, *, source: str) -> Path:
    """Return ``bin_dir`` made absolute, or raise if a required binary is missing."""
    missing = [name for name in REQUIRED_BINARIES if not os.access(bin_dir / name, os.X_OK)]
    if missing:
        raise BinariesError(
            f"{bin_dir} (from {source}) has no executable {', '.join(missing)}; "
            "run hack/build-binaries.sh to build them"
        )
    return bin_dir.resolve()
