"""Facades that import a name's module when the name is first used (PEP 562).

A package ``__init__`` that imports every name it exports makes ``import pkg.small``
load the whole package: ``cronjob_operator.runtime.kinds`` would load the manager, the
REST client and prometheus_client, and ``kubectl cjt --help`` would wait for them. With
``exports`` the facade keeps its names (``from cronjob_operator.runtime import Manager``
still works) and loads each module on the first lookup of one of its names.

mypy reads the facade's ``TYPE_CHECKING`` imports (the functions here are hidden from it,
so a misspelt name stays an error); ``exports`` checks that the names it serves are
exactly the facade's ``__all__``, so the two lists cannot drift apart unseen.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any


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
