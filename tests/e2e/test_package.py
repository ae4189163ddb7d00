"""The package as a user gets it: built, checked, installed from its wheel, run.

``python -m build`` makes an sdist and a wheel of this checkout (in a temporary
directory, the checkout untouched); ``twine check`` passes on both; the wheel installs
into a fresh venv (with its pinned dependencies, from the package index or pip's cache)
and there ``cronjob-operator version`` prints the one version (``__version__``, which
pyproject.toml and the chart read), ``cronjob-operator crd`` prints the CRDs, and every
console script the wheel declares answers ``--help``, as does every subcommand.
"""

from __future__ import annotations

import argparse
import configparser
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest
import yaml

from cronjob_operator import __version__, plugin
from cronjob_operator.cli import build_parser
from tests.integration.support import REPO

SCRIPT_PARSERS = {"cronjob-operator": build_parser, "kubectl-cjt": plugin._parser}


def run(*args: str | Path, cwd: Path | None = None) -> str:
    result = subprocess.run(
        [str(arg) for arg in args], capture_output=True, text=True, cwd=cwd, check=False
    )
    assert result.returncode == 0, f"{args} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    run(sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", out, REPO)
    return out


@pytest.fixture(scope="module")
def installed(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bin/ directory of a fresh venv with the wheel installed."""
    env = tmp_path_factory.mktemp("venv") / "venv"
    venv.create(env, with_pip=True)
    (wheel,) = dist.glob("*.whl")
    run(env / "bin" / "python", "-m", "pip", "install", "--quiet", wheel)
    return env / "bin"


def console_scripts(dist: Path) -> list[str]:
    (wheel,) = dist.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/entry_points.txt")]
        parser = configparser.ConfigParser()
        parser.read_string(archive.read(name).decode())
    return list(parser["console_scripts"])


def test_build_makes_an_sdist_and_a_wheel_of_the_one_version(dist: Path) -> None:
    names = sorted(path.name for path in dist.iterdir())
    assert names == [
        f"cronjob_operator-{__version__}-py3-none-any.whl",
        f"cronjob_operator-{__version__}.tar.gz",
    ]


def test_twine_check_passes(dist: Path) -> None:
    output = run(sys.executable, "-m", "twine", "check", "--strict", *sorted(dist.iterdir()))
    assert output.count("PASSED") == 2, output


def test_the_installed_wheel_runs(installed: Path, dist: Path) -> None:
    assert run(installed / "cronjob-operator", "version").strip() == (
        f"cronjob-operator {__version__}"
    )
    crds = [doc for doc in yaml.safe_load_all(run(installed / "cronjob-operator", "crd")) if doc]
    assert {crd["metadata"]["name"] for crd in crds} == {
        "cronjobs.batch.tutorial.kubebuilder.io",
        "configdeployments.apps.tutorial.kubebuilder.io",
        "concurrencygroups.batch.tutorial.kubebuilder.io",
    }
    scripts = console_scripts(dist)
    assert scripts == ["cronjob-operator", "kubectl-cjt"]
    for script in scripts:
        assert "usage:" in run(installed / script, "--help")
        for command in subcommands(SCRIPT_PARSERS[script]()):
            assert "usage:" in run(installed / script, command, "--help")


def subcommands(parser: argparse.ArgumentParser) -> list[str]:
    """The subcommand names of a console script's parser."""
    return list(
        next(
            action.choices
            for action in parser._actions
            if isinstance(action, argparse._SubParsersAction)
        )
    )
