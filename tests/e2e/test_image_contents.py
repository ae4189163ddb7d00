"""What the operator's image ships, read from the archive hack/build-image.sh saves.

The runtime image runs one program; anything that installs software gives whoever gets
a shell in the container (or a poisoned dependency) a way to add more. So no layer of
the archive may hold pip, setuptools or wheel, ensurepip or a bundled wheel, or a package
manager (apt, dpkg). Every layer counts, not only the merged view: a file that a later
layer deletes is still in the archive that nodes pull and scanners read. And the venv
holds exactly what requirements.lock pins, plus the project: the image is built from the
hash lock and nothing is resolved at build time.

The archive is a docker-archive (``manifest.json`` naming one tar per layer), read with
tarfile alone: no container engine is needed.
"""

from __future__ import annotations

import json
import re
import tarfile
from collections.abc import Iterator
from pathlib import PurePosixPath

import pytest

from tests.images import Image, operator_image
from tests.locks import RUNTIME_LOCK, lock_entries, lock_pins, normalized

FORBIDDEN = {
    "pip, setuptools or wheel": re.compile(
        r"(^|/)(site|dist)-packages/(pip|setuptools|wheel|_distutils_hack)([-.][^/]*)?(/|$)"
        r"|(^|/)bin/(pip|easy_install)[0-9.]*$"
    ),
    "ensurepip or a bundled wheel": re.compile(
        r"(^|/)lib/python3[^/]*/ensurepip(/|$)|(^|/)share/python-wheels(/|$)|\.whl$"
    ),
    "a package manager": re.compile(
        r"(^|/)s?bin/(apt|apt-[a-z]+|dpkg|dpkg-[a-z-]+)$"
        r"|(^|/)lib/apt(/|$)|(^|/)lib/[^/]+/libapt-[a-z]+\.so"
    ),
}
SITE_PACKAGES = re.compile(r"^opt/venv/lib/python3[^/]*/site-packages/(?P<entry>[^/]+)/?$")
PROJECT = "cronjob-operator"


@pytest.fixture(scope="module")
def image() -> Image:
    return operator_image()


@pytest.fixture(scope="module")
def layer_paths(image: Image) -> list[list[str]]:
    """The paths each layer adds, in order (whiteouts, which delete, left out)."""
    return list(archive_layer_paths(image))


def archive_layer_paths(image: Image) -> Iterator[list[str]]:
    with tarfile.open(image.archive) as archive:
        manifest_file = archive.extractfile("manifest.json")
        assert manifest_file is not None, f"{image.archive} has no manifest.json"
        (manifest,) = json.load(manifest_file)
        for layer in manifest["Layers"]:
            blob = archive.extractfile(layer)
            assert blob is not None, f"{image.archive}: layer {layer} is missing"
            with tarfile.open(fileobj=blob, mode="r|*") as layer_tar:
                yield [
                    path
                    for member in layer_tar
                    if not PurePosixPath(path := member.name.removeprefix("./")).name.startswith(
                        ".wh."
                    )
                ]


def forbidden_paths(layer_paths: list[list[str]]) -> dict[str, list[str]]:
    """What -> the ``layer N: path`` entries of the forbidden kind, for each kind found."""
    found: dict[str, list[str]] = {}
    for index, paths in enumerate(layer_paths):
        for path in paths:
            for what, pattern in FORBIDDEN.items():
                if pattern.search(path):
                    found.setdefault(what, []).append(f"layer {index}: {path}")
    return found


def test_no_layer_holds_an_installer_or_a_package_manager(layer_paths: list[list[str]]) -> None:
    found = forbidden_paths(layer_paths)
    summary = {what: [len(paths), *paths[:4]] for what, paths in found.items()}
    assert not found, f"the image ships (count, first paths): {json.dumps(summary, indent=1)}"


def test_the_check_finds_each_kind() -> None:
    """The patterns match where Debian and the python images put these files."""
    layers = [
        [
            "usr/local/lib/python3.11/site-packages/pip/__init__.py",
            "usr/lib/python3.11/ensurepip/__init__.py",
            "usr/share/python-wheels/pip-23.0.1-py3-none-any.whl",
            "usr/bin/apt-get",
            "usr/bin/dpkg",
        ],
        ["opt/venv/lib/python3.11/site-packages/cronjob_operator/__init__.py", "usr/bin/python3"],
    ]
    found = forbidden_paths(layers)
    assert sorted(found) == sorted(FORBIDDEN)
    assert found["a package manager"] == ["layer 0: usr/bin/apt-get", "layer 0: usr/bin/dpkg"]


def test_the_venv_holds_exactly_the_locked_distributions(layer_paths: list[list[str]]) -> None:
    installed = {}
    for paths in layer_paths:
        for path in paths:
            match = SITE_PACKAGES.match(path)
            if match and match["entry"].endswith(".dist-info"):
                name, _, version = match["entry"].removesuffix(".dist-info").partition("-")
                installed[normalized(name)] = version
    locked = lock_pins(lock_entries(RUNTIME_LOCK))
    assert installed.pop(PROJECT, None), f"{PROJECT} is not installed in /opt/venv"
    assert installed == locked
