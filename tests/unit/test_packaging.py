"""The Dockerfile and the package metadata agree with what the README documents.

No container engine runs on the development machines, so the image is checked here
statically: it installs this project (with its pinned dependencies) in a build stage,
copies only the venv into a slim final stage, runs as user 65532, and starts the same
console script the README documents.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def dockerfile_stages() -> list[list[str]]:
    stages: list[list[str]] = []
    for raw in (REPO / "Dockerfile").read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.upper().startswith("FROM "):
            stages.append([])
        stages[-1].append(line)
    return stages


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
    build, final = dockerfile_stages()
    assert "pip install --no-compile ." in " ".join(build), "the project itself is installed"
    assert any(line.startswith("COPY pyproject.toml") for line in build)
    assert not any("pip install" in line or "apt-get" in line for line in final), (
        "no build tools in the final image"
    )
    assert any(line.startswith("COPY --from=build /opt/venv") for line in final)
    assert "USER 65532:65532" in final
    assert final[-1] == 'ENTRYPOINT ["cronjob-operator", "run"]'
    assert final[0].split()[1].endswith("-slim")


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
