"""The layering the folder tree promises: runtime never imports upward, api never imports down.

Also checks every module opens with a docstring and declares ``__all__`` where it is a
public module of the runtime, so the architecture stays readable from the tree.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "cronjob_operator"

FORBIDDEN = {
    "runtime": ("cronjob_operator.api", "cronjob_operator.controllers", "cronjob_operator.cli",
                "cronjob_operator.webhooks", "cronjob_operator.schedule"),
    "api": ("cronjob_operator.controllers", "cronjob_operator.cli", "cronjob_operator.webhooks"),
    "controllers": ("cronjob_operator.cli",),
}  # fmt: skip


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layers_do_not_import_upward(layer: str) -> None:
    offenders = []
    for path in (PACKAGE / layer).rglob("*.py"):
        for name in imported_modules(path):
            if name.startswith(FORBIDDEN[layer]):
                offenders.append(f"{path.relative_to(PACKAGE)} imports {name}")
    assert offenders == []


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_every_module_says_why_it_exists(path: Path) -> None:
    docstring = ast.get_docstring(ast.parse(path.read_text()))
    assert docstring, f"{path} has no module docstring"


def test_runtime_modules_declare_their_public_names() -> None:
    missing = [
        path.name
        for path in (PACKAGE / "runtime").glob("*.py")
        if path.name != "__init__.py" and "__all__" not in path.read_text()
    ]
    assert missing == []
