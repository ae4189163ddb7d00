"""The package facades that import a name's module on first use (``cronjob_operator._lazy``).

Such a facade lists each public name twice: in ``__all__`` and in the ``TYPE_CHECKING``
imports mypy reads, from which ``type_checking_homes`` reads the map ``exports`` loads
from. ``exports`` refuses an ``__all__`` that differs from its map at import; these
tests hold the imports to ``__all__`` by a parse of their own, and check what
``exports`` and ``type_checking_homes`` answer.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from cronjob_operator import _lazy
from cronjob_operator.runtime import kinds

PACKAGE = Path(__file__).resolve().parents[2] / "cronjob_operator"


def lazy_facades() -> list[str]:
    """The packages whose ``__init__`` serves its names through ``_lazy.exports``."""
    return sorted(
        ".".join(path.parent.relative_to(PACKAGE.parent).parts)
        for path in PACKAGE.rglob("__init__.py")
        if "from cronjob_operator._lazy import exports" in path.read_text()
    )


def type_checking_imports(package: str) -> dict[str, tuple[str, str]]:
    """Each name the facade binds under ``if TYPE_CHECKING:``: (module, name there)."""
    path = PACKAGE.parent.joinpath(*package.split("."), "__init__.py")
    names: dict[str, tuple[str, str]] = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom) and statement.module:
                    for alias in statement.names:
                        names[alias.asname or alias.name] = (statement.module, alias.name)
    return names


def test_the_facades_are_found() -> None:
    assert {
        "cronjob_operator.api",
        "cronjob_operator.runtime",
        "cronjob_operator.runtime.controllerutil",
    } <= set(lazy_facades())


@pytest.mark.parametrize("package", lazy_facades())
def test_a_facade_type_checks_exactly_its_public_names(package: str) -> None:
    facade = importlib.import_module(package)
    assert sorted(type_checking_imports(package)) == sorted(facade.__all__)


@pytest.mark.parametrize("package", lazy_facades())
def test_a_facade_serves_what_its_type_checking_imports_name(package: str) -> None:
    facade = importlib.import_module(package)
    served = {
        name: getattr(importlib.import_module(module), there) is getattr(facade, name)
        for name, (module, there) in type_checking_imports(package).items()
    }
    assert [name for name, same in served.items() if not same] == []


def test_a_facade_whose_lists_differ_is_refused_at_import() -> None:
    namespace = {"__name__": "cronjob_operator.runtime", "__all__": ["Kind", "Manager"]}
    with pytest.raises(ImportError, match=r"\['Manager'\]; list each name in both"):
        _lazy.exports(namespace, {"kinds": ("Kind",)})


def test_a_facade_answers_an_unknown_name_with_attribute_error() -> None:
    namespace = {"__name__": "cronjob_operator.runtime", "__all__": ["Kind"]}
    attribute, names = _lazy.exports(namespace, {"kinds": ("Kind",)})
    with pytest.raises(AttributeError, match="has no attribute 'Knd'"):
        attribute("Knd")
    assert attribute("Kind") is kinds.Kind
    assert "Kind" in namespace  # the second lookup is a plain attribute
    assert "Kind" in names()


def test_the_homes_are_read_from_the_type_checking_imports() -> None:
    # Failed before (no type_checking_homes): each facade wrote the map again by hand.
    from cronjob_operator import api

    assert _lazy.type_checking_homes(vars(api)) == {
        "apps_v1": ("CONFIG_DEPLOYMENT", "ConfigDeployment"),
        "batch_v1": ("CRONJOB", "CronJob"),
    }


@pytest.mark.parametrize(
    "imports",
    ["from cronjob_operator.runtime.kinds import Kind as K", "from typing import Any"],
    ids=["renamed", "outside-the-package"],
)
def test_a_type_checking_import_exports_cannot_serve_is_refused(
    imports: str, tmp_path: Path
) -> None:
    facade = tmp_path / "__init__.py"
    facade.write_text(f"if TYPE_CHECKING:\n    {imports}\n")
    namespace = {"__name__": "cronjob_operator.runtime", "__file__": str(facade)}
    with pytest.raises(ImportError, match="under TYPE_CHECKING"):
        _lazy.type_checking_homes(namespace)
