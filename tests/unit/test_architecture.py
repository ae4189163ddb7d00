"""The layering the folder tree promises, checked on every module's imports.

Across the project: the runtime never imports the application (``api``, ``controllers``,
``webhooks``, ``cli``, ``schedule``), ``api`` never imports down, ``schedule`` imports
nothing else of the operator, and no module imports a private (``_``-prefixed) module
of a package it is not inside. Inside the runtime: each package imports only the
packages ``RUNTIME_IMPORTS`` allows it (a DAG, drawn in docs/architecture.md), never
the facade; the modules import each other without a cycle; the facade exports exactly
``PUBLIC_RUNTIME_NAMES``. Every module opens with a docstring, and every public module
of the package declares ``__all__``, so the architecture stays readable from the tree; a
private (``_``) module declares none, as its package's ``__init__`` is the one list of
which of its names are public.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

import cronjob_operator.runtime

PACKAGE = Path(__file__).resolve().parents[2] / "cronjob_operator"
RUNTIME = "cronjob_operator.runtime"

FORBIDDEN = {
    "runtime": ("cronjob_operator.api", "cronjob_operator.controllers", "cronjob_operator.cli",
                "cronjob_operator.webhooks", "cronjob_operator.schedule",
                "cronjob_operator.plugin", "cronjob_operator.envtest"),
    "api": ("cronjob_operator.controllers", "cronjob_operator.cli", "cronjob_operator.webhooks"),
    "controllers": ("cronjob_operator.cli",),
    "schedule": ("cronjob_operator.api", "cronjob_operator.controllers", "cronjob_operator.cli",
                 "cronjob_operator.webhooks", "cronjob_operator.runtime"),
}  # fmt: skip

VOCABULARY = frozenset(
    {"clock", "context", "errors", "kinds", "logs", "metrics", "objects", "runnable"}
)
"""The runtime's top-level modules: small shared words every package may use."""

RUNTIME_IMPORTS: Mapping[str, frozenset[str]] = {
    "client": frozenset(),
    "cache": frozenset({"client"}),
    "controllerutil": frozenset({"client"}),
    "events": frozenset({"client"}),
    "leaderelection": frozenset({"client"}),
    "serving": frozenset({"client"}),
    "controller": frozenset({"cache", "client"}),
    "webhook": frozenset({"serving"}),
    "certrotation": frozenset({"client"}),
    "manager": frozenset({"cache", "client", "controller", "events", "leaderelection", "serving"}),
    "sharding": frozenset({"cache", "client", "controller", "events", "leaderelection", "manager"}),
    "fake": frozenset({"cache", "client", "controllerutil", "events"}),
}
"""Which runtime packages each package may import, besides the vocabulary."""

PUBLIC_RUNTIME_NAMES = {
    # reconcile types, the controller, map functions and predicates
    "Reconciler", "Request", "Result", "TerminalError", "Controller", "MapFunc", "Predicate",
    "generation_changed", "resource_version_changed",
    # the manager and its options
    "Manager", "Options", "LeaderElectionConfig",
    # the client, its cache and the transport
    "ClientInterface", "Reader", "Cache", "RestClient", "load_configuration",
    # objects, kinds and the errors a reconcile catches
    "Obj", "thaw", "Kind", "ApiError", "NotFound", "AlreadyExists", "Conflict",
    # controllerutil: ownership, create-or-update, status, conditions
    "create_or_update", "create_or_patch", "set_controller_reference", "is_controlled_by",
    "write_status", "set_condition",
    # events, time, and the fake client for tests
    "Recorder", "Clock", "FakeClientBuilder",
}  # fmt: skip


def module_name(path: Path) -> str:
    relative = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = relative.parts[:-1] if relative.name == "__init__" else relative.parts
    return ".".join(parts)


def modules(under: Path = PACKAGE) -> list[Path]:
    return sorted(under.rglob("*.py"))


def imported_modules(path: Path, *, module_level_only: bool = False) -> set[str]:
    """Every module ``path`` imports; ``from pkg import name`` counts as ``pkg.name``
    too, so a submodule imported that way is seen (a plain name adds a harmless extra),
    and ``from cronjob_operator.runtime import name`` only as that."""
    tree = ast.parse(path.read_text())
    nodes: Iterator[ast.AST] = iter(tree.body) if module_level_only else ast.walk(tree)
    names: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            if node.module != RUNTIME:  # ``from runtime import x``: the name says which
                names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def private_owner(name: str) -> str | None:
    """The package that holds ``name``'s first private part (None when nothing is private)."""
    parts = name.split(".")
    for index, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:index])
    return None


def runtime_unit(name: str) -> str | None:
    """The runtime package or vocabulary module ``name`` belongs to (None: the facade)."""
    if not name.startswith(f"{RUNTIME}."):
        return None
    return name.removeprefix(f"{RUNTIME}.").split(".")[0]


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layers_do_not_import_upward(layer: str) -> None:
    offenders = [
        f"{path.relative_to(PACKAGE)} imports {name}"
        for path in modules(PACKAGE / layer)
        for name in imported_modules(path)
        if name.startswith(FORBIDDEN[layer])
    ]
    assert offenders == []


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_every_module_says_why_it_exists(path: Path) -> None:
    docstring = ast.get_docstring(ast.parse(path.read_text()))
    assert docstring, f"{path} has no module docstring"


def declares_all(path: Path) -> bool:
    """Whether the module assigns ``__all__`` at its top level."""
    return any(
        isinstance(node, ast.Assign | ast.AnnAssign) and "__all__" in assigned_names(node)
        for node in ast.parse(path.read_text()).body
    )


def assigned_names(node: ast.Assign | ast.AnnAssign) -> set[str]:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return {target.id for target in targets if isinstance(target, ast.Name)}


def is_private_module(path: Path) -> bool:
    return path.stem.startswith("_") and path.name != "__init__.py"


def test_public_modules_declare_their_public_names() -> None:
    missing = [
        str(path.relative_to(PACKAGE))
        for path in modules()
        if not is_private_module(path) and not declares_all(path)
    ]
    assert missing == []


def test_private_modules_leave_their_public_names_to_the_package() -> None:
    """A package's ``__init__`` imports the names it makes public and lists them in its
    ``__all__``; a private module's own ``__all__`` would repeat that list."""
    repeating = [
        str(path.relative_to(PACKAGE))
        for path in modules()
        if is_private_module(path) and declares_all(path)
    ]
    assert repeating == []


def test_no_module_imports_another_packages_private_modules() -> None:
    offenders = []
    for path in modules():
        here = module_name(path)
        for name in imported_modules(path):
            owner = private_owner(name)
            if owner is not None and not (here == owner or here.startswith(f"{owner}.")):
                offenders.append(f"{path.relative_to(PACKAGE)} imports {name}")
    assert offenders == []


def test_the_check_for_private_imports_knows_whose_module_is_private() -> None:
    assert (
        private_owner("cronjob_operator.runtime.cache._store") == "cronjob_operator.runtime.cache"
    )
    assert private_owner("cronjob_operator.runtime.cache.Store") is None
    assert private_owner("cronjob_operator.schedule._due.due") == "cronjob_operator.schedule"


def test_the_runtime_packages_form_a_dag() -> None:
    done: set[str] = set()

    def visit(unit: str, stack: tuple[str, ...]) -> None:
        assert unit not in stack, "package cycle: " + " -> ".join((*stack, unit))
        if unit not in done:
            for dep in sorted(RUNTIME_IMPORTS[unit]):
                visit(dep, (*stack, unit))
            done.add(unit)

    for unit in sorted(RUNTIME_IMPORTS):
        visit(unit, ())


def test_every_runtime_package_and_module_is_placed() -> None:
    found = {
        path.stem if path.suffix else path.name
        for path in (PACKAGE / "runtime").iterdir()
        if (path.suffix == ".py" and path.name != "__init__.py") or (path / "__init__.py").exists()
    }
    assert found == VOCABULARY | set(RUNTIME_IMPORTS)


@pytest.mark.parametrize("unit", sorted(VOCABULARY | set(RUNTIME_IMPORTS)))
def test_runtime_packages_import_only_what_the_graph_allows(unit: str) -> None:
    directory = PACKAGE / "runtime" / unit
    paths = modules(directory) if directory.is_dir() else [directory.with_suffix(".py")]
    allowed = VOCABULARY | RUNTIME_IMPORTS.get(unit, frozenset()) | {unit}
    offenders = []
    for path in paths:
        for name in imported_modules(path):
            target = runtime_unit(name)  # a facade name is no unit: never allowed
            if target is not None and target not in allowed:
                offenders.append(f"{path.relative_to(PACKAGE)} imports {name}")
    assert offenders == []


def _runtime_import_graph() -> dict[str, set[str]]:
    """Module-level imports between runtime modules; ``from pkg import sub`` of a
    submodule is an edge to ``pkg.sub`` alone (its package is already importing)."""
    known = {module_name(path) for path in modules(PACKAGE / "runtime")}
    graph: dict[str, set[str]] = {}
    for path in modules(PACKAGE / "runtime"):
        deps: set[str] = set()
        for node in ast.parse(path.read_text()).body:  # TYPE_CHECKING imports do not run
            if isinstance(node, ast.ImportFrom) and node.module in known:
                subs = {f"{node.module}.{a.name}" for a in node.names} & known
                deps |= subs if len(subs) == len(node.names) else {node.module, *subs}
        graph[module_name(path)] = deps - {module_name(path)}
    return graph


def assert_no_cycle(graph: Mapping[str, set[str]]) -> None:
    done: set[str] = set()

    def visit(name: str, stack: tuple[str, ...]) -> None:
        assert name not in stack, "import cycle: " + " -> ".join((*stack, name))
        if name in done:
            return
        for dep in sorted(graph.get(name, ())):
            visit(dep, (*stack, name))
        done.add(name)

    for name in sorted(graph):
        visit(name, ())


def test_runtime_modules_import_each_other_without_a_cycle() -> None:
    assert_no_cycle(_runtime_import_graph())


BENCH = PACKAGE.parent / "bench"


def test_the_benchmarks_import_each_other_without_a_cycle() -> None:
    """Every import counts, those inside functions too: they hide a cycle, not remove it."""
    known = {f"bench.{path.stem}" for path in BENCH.glob("*.py")}
    graph = {
        f"bench.{path.stem}": (imported_modules(path) & known) - {f"bench.{path.stem}"}
        for path in sorted(BENCH.glob("*.py"))
    }
    assert_no_cycle(graph)


def test_the_builder_does_not_know_the_manager() -> None:
    builder = imported_modules(PACKAGE / "runtime" / "controller" / "_builder.py")
    assert not any(name.startswith(f"{RUNTIME}.manager") for name in builder)


@pytest.mark.parametrize("unit", sorted(VOCABULARY | set(RUNTIME_IMPORTS)))
def test_every_name_a_runtime_package_exports_exists(unit: str) -> None:
    module = importlib.import_module(f"{RUNTIME}.{unit}")
    assert [name for name in module.__all__ if not hasattr(module, name)] == []


def test_the_runtime_facade_exports_exactly_the_public_names() -> None:
    assert set(cronjob_operator.runtime.__all__) == PUBLIC_RUNTIME_NAMES
    missing = [n for n in PUBLIC_RUNTIME_NAMES if not hasattr(cronjob_operator.runtime, n)]
    assert missing == []


CRONJOB_CONTROLLER = PACKAGE / "controllers" / "cronjob"
CRONJOB_IO = ("reconciler.py", "group_slots.py", "__init__.py")
"""The CronJob controller's modules that do I/O: observe and act. The rest decide."""
IMPURE = (
    "cronjob_operator.runtime.client",
    "cronjob_operator.runtime.events",
    "cronjob_operator.runtime.clock",
    "cronjob_operator.runtime.manager",
    "cronjob_operator.runtime.leaderelection",
    # From the packages that also hold values (Result, parse_time), the names that act.
    "cronjob_operator.runtime.controllerutil.write_status",
    "cronjob_operator.runtime.controllerutil.create_or_update",
    "cronjob_operator.runtime.controllerutil.create_or_patch",
    "cronjob_operator.runtime.controller.Controller",
    "cronjob_operator.runtime.controller.Builder",
    "cronjob_operator.controllers.metrics",
    "cronjob_operator.controllers.cronjob.reconciler",
    "prometheus_client",
    "logging",
    "time",
)


@pytest.mark.parametrize(
    "path",
    [p for p in sorted(CRONJOB_CONTROLLER.glob("*.py")) if p.name not in CRONJOB_IO],
    ids=lambda p: p.name,
)
def test_the_cronjob_decision_does_no_io(path: Path) -> None:
    """decide() and its rules never reach a client, recorder, clock or metric: the
    reconciler observes and acts, the decision is a function of the view and the time."""
    bad = {
        name
        for name in imported_modules(path)
        if any(name == impure or name.startswith(impure + ".") for impure in IMPURE)
    }
    assert not bad, f"{module_name(path)} imports {sorted(bad)}"


@pytest.mark.parametrize(
    "path",
    [p for p in sorted(CRONJOB_CONTROLLER.glob("*.py")) if p.name != "view.py"],
    ids=lambda p: p.name,
)
def test_the_cronjob_controller_parses_timestamps_only_in_its_view(path: Path) -> None:
    """The CronJob's status and its Jobs' timestamps are parsed once, by ``view.py`` (the
    observe step); the rules read them typed and ``api_status`` renders them."""
    parsers = sorted(name for name in imported_modules(path) if name.endswith(".parse_time"))
    assert not parsers, f"{module_name(path)} imports {parsers}"
