"""Facades that import a name's module when the name is first used (PEP 562).

A package ``__init__`` that imports every name it exports makes ``import pkg.small``
load the whole package: ``cronjob_operator.runtime.kinds`` would load the manager, the
REST client and prometheus_client, and ``kubectl cjt --help`` would wait for them. With
``exports`` the facade keeps its names (``from cronjob_operator.runtime import Manager``
still works) and loads each module on the first lookup of one of its names.

mypy reads the facade's ``TYPE_CHECKING`` imports (the functions here are hidden from it,
so a misspelt name stays an error), and ``type_checking_homes`` reads the module each
name loads from out of the same imports, so they are written once; ``exports`` checks
that the names it serves are exactly the facade's ``__all__``, so the two lists cannot
drift apart unseen.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any


def type_checking_homes(namespace: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """The names the facade whose ``globals()`` are ``namespace`` imports under
    ``if TYPE_CHECKING:``, by submodule (relative to the package), read from its source:
    the ``homes`` of ``exports``."""
    package = namespace["__name__"]
    homes: dict[str, tuple[str, ...]] = {}
    for node in ast.parse(Path(namespace["__file__"]).read_text()).body:
        if not (isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"):
            continue
        for statement in node.body:
            if isinstance(statement, ast.ImportFrom) and statement.module:
                home = statement.module.removeprefix(f"{package}.")
                if home == statement.module or any(a.asname for a in statement.names):
                    raise ImportError(
                        f"{package}: import {statement.module}'s names unrenamed, and only "
                        f"from a submodule of {package}, under TYPE_CHECKING"
                    )
                homes[home] = (*homes.get(home, ()), *(alias.name for alias in statement.names))
    return homes


def exports(
    namespace: dict[str, Any], homes: Mapping[str, Sequence[str]]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of the package whose ``globals()`` are
    ``namespace``: each name of its ``__all__`` lives in the submodule ``homes`` maps to it
    (``{"cache": ("Cache",)}``: ``Cache`` is ``<package>.cache.Cache``)."""
    package, public = namespace["__name__"], namespace["__all__"]
    module_of = {name: f"{package}.{home}" for home, names in homes.items() for name in names}
    if sorted(module_of) != sorted(public):
        raise ImportError(
            f"{package}: __all__ and the lazily imported names differ: "
            f"{sorted(set(module_of) ^ set(public))}; list each name in both"
        )

    def attribute(name: str) -> object:
        if name not in module_of:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module_of[name]), name)
        namespace[name] = value  # later lookups find it without this function
        return value

    def names() -> list[str]:
        return sorted({*namespace, *public})

    return attribute, names
