"""Reading the hash locks of hack/lock-requirements.sh (requirements*.lock, pip-compile's).

The unit test that keeps the locks in sync with pyproject.toml and the image test that
checks the venv holds exactly the locked distributions read them the same way.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RUNTIME_LOCK = REPO / "requirements.lock"
BUILD_LOCK = REPO / "requirements-build.lock"

PIN = re.compile(r"(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[A-Za-z0-9.+!-]+)")
HASH = re.compile(r"--hash=sha256:[0-9a-f]{64}")


def normalized(name: str) -> str:
    """The PEP 503 form of a distribution name (``PyYAML`` and ``pyyaml`` are one)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_entries(lock: Path) -> list[str]:
    """Each requirement of a pip-compile lock, its continuation lines joined, no comments."""
    joined = lock.read_text().replace("\\\n", " ")
    lines = (line.split("#", 1)[0].strip() for line in joined.splitlines())
    return [line for line in lines if line]


def unhashed_or_unpinned(entries: list[str]) -> list[str]:
    """The entries that are not ``name==version`` followed by sha256 hashes only."""
    bad = []
    for entry in entries:
        requirement, *options = entry.split()
        pinned = PIN.fullmatch(requirement) is not None
        if not (pinned and options and all(HASH.fullmatch(option) for option in options)):
            bad.append(entry[:120])
    return bad


def lock_pins(entries: list[str]) -> dict[str, str]:
    """Normalized name -> version of every ``name==version`` in the entries."""
    pins = {}
    for entry in entries:
        match = PIN.fullmatch(entry.split()[0])
        if match:
            pins[normalized(match["name"])] = match["version"]
    return pins
