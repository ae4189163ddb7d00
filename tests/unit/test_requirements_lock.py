"""The hash locks the image installs from agree with the pins of pyproject.toml.

hack/lock-requirements.sh writes requirements.lock (the runtime dependencies and all
they pull in) and requirements-build.lock (the build backend) with pip-compile; the
Dockerfile installs them with ``pip install --require-hashes --no-deps``. A pin changed
in pyproject.toml without re-running the script would build an image with the old
version (or fail on a missing hash at build time): this test fails first, naming the pin.
"""

from __future__ import annotations

import tomllib

from tests.locks import (
    BUILD_LOCK,
    PIN,
    REPO,
    RUNTIME_LOCK,
    lock_entries,
    lock_pins,
    normalized,
    unhashed_or_unpinned,
)

RELOCK = "run hack/lock-requirements.sh and commit both lock files"


def pins_missing_from_lock(requirements: list[str], pins: dict[str, str]) -> list[str]:
    """The ``name==version`` requirements of pyproject that the lock does not pin so."""
    missing = []
    for requirement in requirements:
        match = PIN.fullmatch(requirement)
        assert match, f"pyproject.toml: {requirement!r} is not pinned with =="
        if pins.get(normalized(match["name"])) != match["version"]:
            missing.append(requirement)
    return missing


def pyproject() -> dict[str, object]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def test_every_runtime_pin_of_pyproject_is_in_the_runtime_lock() -> None:
    dependencies = pyproject()["project"]["dependencies"]  # type: ignore[index]
    missing = pins_missing_from_lock(dependencies, lock_pins(lock_entries(RUNTIME_LOCK)))
    assert not missing, f"requirements.lock does not pin {missing}: {RELOCK}"


def test_every_build_requirement_of_pyproject_is_in_the_build_lock() -> None:
    requires = pyproject()["build-system"]["requires"]  # type: ignore[index]
    missing = pins_missing_from_lock(requires, lock_pins(lock_entries(BUILD_LOCK)))
    assert not missing, f"requirements-build.lock does not pin {missing}: {RELOCK}"


def test_every_locked_requirement_is_pinned_with_a_hash() -> None:
    for lock in (RUNTIME_LOCK, BUILD_LOCK):
        entries = lock_entries(lock)
        assert entries, f"{lock.name} is empty: {RELOCK}"
        assert not unhashed_or_unpinned(entries), f"{lock.name}: {RELOCK}"


def test_a_pin_changed_without_relocking_is_found() -> None:
    """The checks above can fail: a bumped, an added, an unhashed and a wrongly hashed pin
    are each caught."""
    entries = lock_entries(RUNTIME_LOCK)
    pins = lock_pins(entries)
    assert pins_missing_from_lock(["orjson==0.0.1", "not-locked==1.0"], pins) == [
        "orjson==0.0.1",
        "not-locked==1.0",
    ]
    assert unhashed_or_unpinned(["orjson==3.13.0", "orjson>=3 --hash=sha256:" + "0" * 64]) == [
        "orjson==3.13.0",
        "orjson>=3 --hash=sha256:" + "0" * 64,
    ]
    # Each option must be a whole sha256 hash: a short, a non-sha256 or a non-hash option
    # is caught, and a well-formed entry is not.
    sha256 = "--hash=sha256:" + "0" * 64
    assert unhashed_or_unpinned(
        [
            f"orjson==3.13.0 {sha256} --hash=sha256:abc",
            "orjson==3.13.0 --hash=md5:" + "0" * 32,
            f"orjson==3.13.0 {sha256} --pre",
            f"orjson==3.13.0 {sha256} {sha256.replace('0', '1')}",
        ]
    ) == [
        f"orjson==3.13.0 {sha256} --hash=sha256:abc",
        "orjson==3.13.0 --hash=md5:" + "0" * 32,
        f"orjson==3.13.0 {sha256} --pre",
    ]
