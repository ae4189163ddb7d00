"""The operator's image, as built by hack/build-image.sh, runs the way its Pod runs it.

Kubernetes runs the manager with a read-only root filesystem, as user 65532, with every
capability dropped (config/manager). The test runs the image exactly so with runc (the
OCI runtime kubelet's containerd uses too) on the image's own root filesystem, mounted
from the local containers store by buildah: ``version`` answers, the process really has
uid 65532 and no capabilities, the root is read-only, ``openssl`` (which makes the
self-signed metrics certificate) is there, and pip and setuptools are not.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cronjob_operator import __version__
from tests.images import Image, operator_image

RUNTIME_UID = 65532


@pytest.fixture(scope="module")
def image() -> Image:
    return operator_image()


@pytest.fixture(scope="module")
def rootfs(image: Image) -> Iterator[Path]:
    """The image's root filesystem, mounted (read-write underneath; runc makes it ro)."""
    container = _check(["buildah", "from", "--pull=never", image.name]).strip()
    try:
        yield Path(_check(["buildah", "mount", container]).strip())
    finally:
        subprocess.run(["buildah", "rm", container], capture_output=True, check=False)


def _check(argv: list[str]) -> str:
    result = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, f"{' '.join(argv)} failed: {result.stderr}"
    return result.stdout


def _image_config(image: Image) -> dict[str, Any]:
    out = _check(["buildah", "inspect", "--type", "image", image.name])
    config: dict[str, Any] = json.loads(out)["OCIv1"]["config"]
    return config


def run_like_kubernetes(
    image: Image, rootfs: Path, tmp_path: Path, args: list[str]
) -> subprocess.CompletedProcess[str]:
    """Run ``args`` (after the entrypoint, or instead of it when it starts with '/')."""
    config = _image_config(image)
    argv = args if args[0].startswith("/") else [*config["Entrypoint"], *args]
    _check(["runc", "spec", "--bundle", str(tmp_path)])  # runc's defaults: namespaces, mounts
    spec = json.loads((tmp_path / "config.json").read_text())
    spec["root"] = {"path": str(rootfs), "readonly": True}
    spec["process"].update(
        terminal=False,
        args=argv,
        env=config["Env"],
        user={"uid": RUNTIME_UID, "gid": RUNTIME_UID},
        capabilities={key: [] for key in ("bounding", "effective", "permitted", "ambient")},
        noNewPrivileges=True,
    )
    (tmp_path / "config.json").write_text(json.dumps(spec))
    name = f"cronjob-operator-image-test-{uuid.uuid4().hex[:8]}"
    state = tmp_path / "runc-state"
    return subprocess.run(
        ["runc", "--root", str(state), "run", "--bundle", str(tmp_path), name],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_version_runs_as_in_the_pod(image: Image, rootfs: Path, tmp_path: Path) -> None:
    result = run_like_kubernetes(image, rootfs, tmp_path, ["version"])
    assert result.returncode == 0, result.stderr
    assert __version__ in result.stdout


PROBE = """
id -u
grep '^CapEff' /proc/self/status
touch /probe 2>/dev/null && echo writable || echo read-only
openssl version
python3 -c 'import pip' 2>/dev/null && echo pip || echo no-pip
python3 -c 'import setuptools' 2>/dev/null && echo setuptools || echo no-setuptools
"""


def test_the_runtime_is_locked_down_and_has_openssl(
    image: Image, rootfs: Path, tmp_path: Path
) -> None:
    result = run_like_kubernetes(image, rootfs, tmp_path, ["/bin/sh", "-c", PROBE])
    assert result.returncode == 0, result.stderr
    uid, caps, root, openssl, pip, setuptools = result.stdout.splitlines()
    assert uid == str(RUNTIME_UID)
    assert caps.split() == ["CapEff:", "0000000000000000"]
    assert root == "read-only"
    assert openssl.startswith("OpenSSL ")
    assert (pip, setuptools) == ("no-pip", "no-setuptools")


def test_the_archive_is_the_built_image(image: Image) -> None:
    """What ``ctr images import`` gets is what the store holds (same config digest)."""
    listing = _check(["tar", "-tf", str(image.archive)]).split()
    manifest = json.loads(_check(["tar", "-xOf", str(image.archive), "manifest.json"]))
    image_id = _check(
        ["buildah", "inspect", "--type", "image", "--format", "{{.FromImageID}}", image.name]
    ).strip()
    assert "manifest.json" in listing
    assert manifest[0]["Config"].removesuffix(".json").endswith(image_id)
    assert f"docker.io/library/{image.name}" in manifest[0]["RepoTags"]
