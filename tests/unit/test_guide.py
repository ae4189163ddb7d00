"""docs/writing-a-controller.md says only what the code has.

The guide walks through ``examples/config_from_annotation.py`` and names runtime symbols
along the way. A quoted block that no longer matches the example, or a name the runtime
no longer has, sends a reader after something that is not there: these tests read the
guide and check both against the code.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GUIDE = REPO / "docs" / "writing-a-controller.md"
EXAMPLE = REPO / "examples" / "config_from_annotation.py"

PYTHON_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)
INSTANCE_ATTRIBUTE = re.compile(r"self\.(\w+)\s*[:=]")
SYMBOL = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)(?:\([^`]*\))?`")
"""A name in code font, alone or called (`objects.thaw(obj)`)."""

MODULES = (
    "cronjob_operator.runtime",
    "cronjob_operator.runtime.fake",
    "cronjob_operator.runtime.objects",
    "cronjob_operator.runtime.errors",
    "cronjob_operator.runtime.kinds",
    "cronjob_operator.runtime.controller",
    "cronjob_operator.runtime.controllerutil",
    "cronjob_operator.runtime.cache",
    "cronjob_operator.runtime.client",
    "cronjob_operator.runtime.events",
    "cronjob_operator.runtime.clock",
    "cronjob_operator.envtest",
    "examples.config_from_annotation",
)
"""Where a name the guide mentions may live: the facade, the public modules, the example."""

INSTANCES = {"client", "controller", "manager"}
"""Words the guide uses for an instance (``client.live.get``, ``controller.watch``)."""

NOT_OURS = {
    # controller-runtime (Go) names the guide maps ours onto
    "client.Client",
    "CreateOrUpdate",
    "reconcile.Reconciler",
    # Python, Kubernetes API fields and words in code font
    "TypeError",
    "__all__",
    "ast",
    "api",
    "controllers",
    "deletionTimestamp",
    "metadata.deletionTimestamp",
    "metadata.finalizers",
    "generateName",
    "generation",
    "resourceVersion",
    "fn",
    "set",
    "and_",
    "or_",
    "not_",
    "setup",
    "reconcile",
}
"""Code-font words that are not runtime symbols; everything else must resolve."""


def quoted_blocks() -> list[str]:
    """The guide's Python blocks that quote the example (their first line is in it)."""
    example = EXAMPLE.read_text()
    blocks = []
    for block in PYTHON_BLOCK.findall(GUIDE.read_text()):
        lines = [line for line in block.splitlines() if line.strip()]
        if lines and lines[0].strip() in example:
            blocks.append(block)
    return blocks


def _attribute_path(name: str) -> object | None:
    """What a dotted ``name`` is, read as a module followed by attributes, or None."""
    parts = name.split(".")
    for split in range(len(parts), 0, -1):
        try:
            target: object = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for part in parts[split:]:
            if not hasattr(target, part):
                return None
            target = getattr(target, part)
        return target
    return None


def _source(cls: type) -> str:
    """A class's source, or "" for one defined where ``inspect`` cannot find it."""
    try:
        return inspect.getsource(cls)
    except (OSError, TypeError):
        return ""


@functools.cache
def _members() -> set[str]:
    """Methods, attributes and parameter names of what the public modules export: a
    guide says ``update_status`` or ``matching_fields`` without naming the class."""
    names: set[str] = set()
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        for exported in vars(module).values():
            if not inspect.isclass(exported) and not inspect.isfunction(exported):
                continue
            functions = [exported]
            if inspect.isclass(exported):
                names.update(vars(exported))
                names.update(getattr(exported, "__annotations__", {}))
                names.update(INSTANCE_ATTRIBUTE.findall(_source(exported)))
                functions = [f for f in vars(exported).values() if inspect.isfunction(f)]
            for function in functions:
                names.update(inspect.signature(function).parameters)
    return names


def resolves(name: str) -> bool:
    """Whether ``name`` is a module, an attribute path from one of ``MODULES`` (or from
    the project's package), or a member of something they export."""
    for prefix in ("", "cronjob_operator.", *(f"{m}." for m in MODULES)):
        if _attribute_path(prefix + name) is not None:
            return True
    first, *rest = name.split(".")
    if not rest:
        return first in _members()
    return first in INSTANCES and all(part in _members() for part in rest)


def mentioned_symbols() -> list[str]:
    """Names in code font in the guide's prose (code blocks left out)."""
    prose = PYTHON_BLOCK.sub("", GUIDE.read_text())
    prose = re.sub(r"```.*?```", "", prose, flags=re.DOTALL)
    return sorted({name for name in SYMBOL.findall(prose) if name not in NOT_OURS})


def test_the_guide_quotes_the_example() -> None:
    assert len(quoted_blocks()) >= 3, "the guide's walk-through blocks were not found"


@pytest.mark.parametrize("block", quoted_blocks(), ids=lambda b: b.splitlines()[0][:40])
def test_every_quoted_line_is_in_the_example(block: str) -> None:
    example_lines = {line.strip() for line in EXAMPLE.read_text().splitlines()}
    missing = [
        line.strip()
        for line in block.splitlines()
        if line.strip() and line.strip() != "..." and not line.strip().endswith(": ...")
        if line.strip() not in example_lines
    ]
    assert not missing, f"the guide quotes lines the example does not have: {missing}"


def test_the_symbol_check_catches_a_missing_name() -> None:
    assert resolves("create_or_update")
    assert resolves("objects.thaw")
    assert not resolves("create_or_frobnicate")


@pytest.mark.parametrize("name", mentioned_symbols())
def test_every_symbol_the_guide_names_exists(name: str) -> None:
    assert resolves(name), (
        f"docs/writing-a-controller.md names `{name}`, which no runtime module has: "
        "rename it in the guide, or add it to NOT_OURS if it is not a runtime symbol"
    )
