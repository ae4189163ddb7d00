"""Where the e2e tests find the operator's image and the real node's binaries.

``hack/build-image.sh`` builds the image with buildah (its base made from Debian
packages when no registry is reachable) and saves an archive for ``ctr images import``;
``hack/build-node.sh`` builds kubelet and containerd. Both cache their results, and
``hack/test.sh`` runs them before pytest and exports what they printed. A test run
without those variables builds them itself, once per session; a build that fails makes
the test fail, never skip: a deploy path that was not exercised is not a passed one.
"""

from __future__ import annotations

import functools
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from cronjob_operator import __version__
from cronjob_operator.envtest import _node

REPO = Path(__file__).resolve().parents[1]
IMAGE_ENV = "CRONJOB_OPERATOR_IMAGE"
IMAGE_ARCHIVE_ENV = "CRONJOB_OPERATOR_IMAGE_ARCHIVE"
NODE_BIN_DIR_ENV = _node.NODE_BIN_DIR_ENV
NEXT_IMAGE = "controller:next"
NEXT_VERSION = f"{__version__}+next"
"""The version stamped into ``next_image`` (``hack/build-image.sh NAME VERSION``)."""


@dataclass(frozen=True)
class Image:
    """An image in the local containers store (``name``) and saved as ``archive``."""

    name: str
    archive: Path


def _run(script: str, *args: str) -> list[str]:
    path = REPO / "hack" / script
    result = subprocess.run(
        ["bash", str(path), *args], stdout=subprocess.PIPE, text=True, check=False
    )
    lines = result.stdout.strip().splitlines()
    assert result.returncode == 0, f"{path} failed (exit {result.returncode}); see its stderr"
    assert lines, f"{path} printed nothing"
    return lines


@functools.cache
def operator_image() -> Image:
    """The operator's image (``controller:latest``), built when not given by the env."""
    name, archive = os.environ.get(IMAGE_ENV), os.environ.get(IMAGE_ARCHIVE_ENV)
    if not (name and archive):
        name, archive = _run("build-image.sh")[-2:]
    return _checked(Image(name, Path(archive)))


@functools.cache
def next_image() -> Image:
    """The operator's image built from this tree as another version (``NEXT_VERSION``,
    tagged ``NEXT_IMAGE``): the other side of an upgrade. Only the layers from the
    package's sources on are rebuilt."""
    name, archive = _run("build-image.sh", NEXT_IMAGE, NEXT_VERSION)[-2:]
    return _checked(Image(name, Path(archive)))


def _checked(image: Image) -> Image:
    assert image.archive.is_file(), f"{image.archive} (the image archive) does not exist"
    return image


@functools.cache
def node_bin_dir() -> Path:
    """The real node's binaries, built when not given by the env."""
    configured = os.environ.get(NODE_BIN_DIR_ENV)
    return _node.check_node_bin_dir(Path(configured or _run("build-node.sh")[-1]))
