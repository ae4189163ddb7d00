"""The Dockerfile and the package metadata agree with what the README documents.

The image itself is built and run by tests/e2e/test_image.py (hack/build-image.sh);
this file checks, without a container engine, what its build stage does: the files its
``COPY`` lines name (and only those) are built into a wheel, the wheel is installed into
a fresh venv, and the console script runs from there (``version``, and ``run --help``
listing the flags). The wheel's metadata must require exactly the pinned dependencies
of ``pyproject.toml``; installing them is left to pip (they are the ones ``.venv``
has), so the fresh venv borrows them from ``.venv``'s site-packages without its
editable install of this project. Building the wheel fetches the pinned setuptools from
the package index. The rest is checked statically: the build stage installs only from the
hash locks (tests/unit/test_requirements_lock.py keeps them in sync with pyproject.toml),
and the final stage starts from scratch with the stripped base and the venv, runs as user
65532 and starts ``cronjob-operator run``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]


def dockerfile_lines() -> list[str]:
    """The instructions, continuation lines joined, comments and blank lines dropped."""
    text = (REPO / "Dockerfile").read_text().replace("\\\n", " ")
    return [
        line.strip()
        for line in text.splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]


def dockerfile_stages() -> list[list[str]]:
    """The instructions of each stage (global ARGs before the first FROM left out)."""
    stages: list[list[str]] = []
    for line in dockerfile_lines():
        if line.upper().startswith("FROM "):
            stages.append([])
        if stages:
            stages[-1].append(line)
    return stages


def base_image() -> str:
    """The default of the global ``ARG BASE_IMAGE`` the build and runtime-root stages use."""
    (arg,) = [line for line in dockerfile_lines() if line.startswith("ARG BASE_IMAGE=")]
    return arg.partition("=")[2]


def test_console_script_is_the_documented_entry_point() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["scripts"] == {
        "cronjob-operator": "cronjob_operator.cli:main",
        "kubectl-cjt": "cronjob_operator.plugin:main",
    }
    readme = (REPO / "README.md").read_text()
    assert "cronjob-operator run" in readme
    assert "kubectl cjt run" in readme


def test_dependencies_are_pinned() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    for requirement in project["dependencies"] + project["optional-dependencies"]["test"]:
        assert re.fullmatch(r"[A-Za-z0-9_.\-\[\]]+==[\w.]+", requirement), requirement


def test_dockerfile_is_multi_stage_non_root_and_runs_the_manager() -> None:
    build, runtime_root, final = dockerfile_stages()
    steps = " ".join(" ".join(build).split())
    for locked in ("requirements.lock", "requirements-build.lock"):
        assert f"--require-hashes --no-deps -r {locked}" in steps, f"{locked}, hash-checked"
    assert "--no-build-isolation --no-deps" in steps, "the wheel is built by the locked backend"
    assert "--no-deps --no-index" in steps, "the project alone is installed, nothing resolved"
    assert "python3 -m venv --without-pip /opt/venv" in steps, "no installer in the venv"
    assert any(line.startswith("COPY pyproject.toml") for line in build)
    assert build[0] == "FROM ${BASE_IMAGE} AS build"
    assert runtime_root[0] == "FROM ${BASE_IMAGE} AS runtime-root"
    assert final[:3] == [
        "FROM scratch",
        "COPY --from=runtime-root / /",
        "COPY --from=build /opt/venv /opt/venv",
    ], "one layer of the stripped base (nothing removed left below it), then the venv"
    assert not any("pip install" in line or "apt-get" in line for line in final)
    assert "USER 65532:65532" in final
    assert final[-1] == 'ENTRYPOINT ["cronjob-operator"]'
    assert re.fullmatch(r"\S+:3\.11-slim-bookworm@sha256:[0-9a-f]{64}", base_image()), (
        "pinned by digest, of a Debian release"
    )


def test_manager_deployment_runs_the_image_as_documented() -> None:
    manifest = (REPO / "config" / "manager" / "manager.yaml").read_text()
    for needle in (
        "runAsNonRoot: true",
        "readOnlyRootFilesystem: true",
        "RuntimeDefault",
        "- --leader-elect",
        "/healthz",
        "/readyz",
        "- run",
    ):
        assert needle in manifest, needle


def test_the_pod_command_names_the_subcommand_once() -> None:
    """Kubernetes appends a container's args to the image's ENTRYPOINT: the entrypoint is
    the program alone and the Deployment's args start with the subcommand, so the pod runs
    ``cronjob-operator run --leader-elect ...``, never ``cronjob-operator run run ...``."""
    entrypoint = json.loads(dockerfile_stages()[-1][-1].removeprefix("ENTRYPOINT "))
    manifests = yaml.safe_load_all((REPO / "config" / "manager" / "manager.yaml").read_text())
    deployment = next(m for m in manifests if m and m["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    command = entrypoint + container["args"]
    assert command[:2] == ["cronjob-operator", "run"]
    assert command.count("run") == 1


def build_stage_sources() -> list[str]:
    """The repository paths the Dockerfile's build stage copies in before ``pip install``."""
    build = dockerfile_stages()[0]
    sources: list[str] = []
    for line in build:
        if line.startswith("COPY ") and "--from" not in line:
            sources += line.split()[1:-1]
    return sources


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the wheel built from the Dockerfile's sources, a fresh venv with it installed)."""
    work = tmp_path_factory.mktemp("packaging")
    context = work / "context"
    context.mkdir()
    for source in build_stage_sources():
        origin = REPO / source
        if origin.is_dir():
            ignore = shutil.ignore_patterns("__pycache__")
            shutil.copytree(origin, context / source, ignore=ignore)
        else:
            shutil.copy2(origin, context / source)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    dist = work / "dist"
    subprocess.run([*pip, "wheel", "--no-deps", "-w", str(dist), str(context)], check=True)
    (wheel,) = dist.glob("cronjob_operator-*.whl")
    fresh = work / "venv"
    venv.create(fresh, with_pip=False)
    python = fresh / "bin" / "python"
    install = [*pip, "--python", str(python), "install", "--no-deps", str(wheel)]
    subprocess.run(install, check=True)
    # The dependencies, but not .venv's editable cronjob_operator: a path in a .pth file
    # is appended to sys.path without running that directory's own .pth files.
    fresh_site = Path(
        subprocess.check_output(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            text=True,
        ).strip()
    )
    (fresh_site / "borrowed-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return wheel, fresh


def test_the_wheel_requires_exactly_the_pinned_dependencies(installed: tuple[Path, Path]) -> None:
    wheel, _ = installed
    with zipfile.ZipFile(wheel) as archive:
        (metadata,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        lines = archive.read(metadata).decode().splitlines()
    required = {
        line.split(":", 1)[1].strip() for line in lines if line.startswith("Requires-Dist:")
    }
    required = {r for r in required if "extra ==" not in r}
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert required == set(project["dependencies"])
    assert any(n.endswith("cronjob_operator/py.typed") for n in zipfile.ZipFile(wheel).namelist())


def run_in(fresh: Path, *argv: str) -> str:
    """Run ``argv`` outside the repository (``python -c`` puts the cwd first on sys.path)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(argv, capture_output=True, text=True, check=True, cwd=fresh, env=env)
    return done.stdout


def test_the_installed_entry_point_runs_the_installed_package(
    installed: tuple[Path, Path],
) -> None:
    _, fresh = installed
    script = str(fresh / "bin" / "cronjob-operator")
    assert "0.1.0" in run_in(fresh, script, "version")
    code = "import cronjob_operator; print(cronjob_operator.__file__)"
    where = run_in(fresh, str(fresh / "bin" / "python"), "-c", code)
    assert Path(where.strip()).is_relative_to(fresh), f"not the installed copy: {where}"
    usage = run_in(fresh, script, "run", "--help")
    for flag in ("--kubeconfig", "--webhook-port", "--leader-elect", "--health-probe-bind-address"):
        assert flag in usage
