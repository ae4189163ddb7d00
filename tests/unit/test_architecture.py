"""The layering the folder tree promises: runtime never imports upward, api never imports down.

The schedule package is pure time logic and imports nothing else of the operator. Also:
the runtime's machinery (``cronjob_operator.runtime._*``) is used only inside the
runtime and the schedule's private modules only inside the schedule package, the
runtime's modules import each other without a cycle, its public facade exports exactly
the names below, every module opens with a docstring, and every runtime module declares
``__all__``, so the architecture stays readable from the tree.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import cronjob_operator.runtime

PACKAGE = Path(__file__).resolve().parents[2] / "cronjob_operator"
PRIVATE_RUNTIME = "cronjob_operator.runtime._"
PRIVATE_SCHEDULE = "cronjob_operator.schedule._"
NOT_ALLOWED_PRIVATE_RUNTIME = ("controllers", "webhooks", "cli.py", "api")

FORBIDDEN = {
    "runtime": ("cronjob_operator.api", "cronjob_operator.controllers", "cronjob_operator.cli",
                "cronjob_operator.webhooks", "cronjob_operator.schedule"),
    "api": ("cronjob_operator.controllers", "cronjob_operator.cli", "cronjob_operator.webhooks"),
    "controllers": ("cronjob_operator.cli",),
    "schedule": ("cronjob_operator.api", "cronjob_operator.controllers", "cronjob_operator.cli",
                 "cronjob_operator.webhooks", "cronjob_operator.runtime"),
}  # fmt: skip

PUBLIC_RUNTIME_NAMES = {
    # reconcile types, the builder, handlers and predicates
    "Reconciler", "Request", "Result", "TerminalError", "Builder", "ControllerHost",
    "Controller", "MapFunc", "for_object", "for_owner", "Predicate", "and_", "or_", "not_",
    "generation_changed", "resource_version_changed", "labels_changed", "annotations_changed",
    # the client, its cache and the transport it is built on
    "Client", "ClientInterface", "Reader", "Writer", "LiveReader", "PatchType", "Propagation",
    "Cache", "CacheSyncTimeoutError", "UnindexedFieldError", "FieldIndexFunc", "Transform",
    "strip_managed_fields", "RestClient", "TokenBucket", "load_configuration",
    # typed errors
    "ApiError", "AlreadyExists", "BadRequest", "Conflict", "Forbidden", "Gone", "Invalid",
    "NotFound", "ServerError", "TooManyRequests", "TransportError", "Unauthorized",
    # objects and kinds
    "Obj", "freeze", "thaw", "name_of", "namespace_of", "object_key", "controller_ref",
    "Kind", "CONFIG_MAP", "DEPLOYMENT", "EVENT", "JOB", "LEASE", "NAMESPACE", "POD",
    "REPLICA_SET", "SECRET",
    # controllerutil: ownership, create-or-update, status, conditions, the clock
    "AlreadyOwnedError", "OperationResult", "controller_reference", "create_or_patch",
    "create_or_update", "is_controlled_by", "set_controller_reference", "merge_status",
    "write_status", "condition_setter", "find_condition", "parse_time", "rfc3339",
    "set_condition", "Clock", "FakeClock", "utc_now",
    # events, the manager and its runnables, metrics, cancellation and deadlines
    "EventRecorder", "Recorder", "NORMAL", "WARNING", "Manager", "Options",
    "LeaderElectionConfig",
    "Runnable", "Metrics", "ControllerOptions", "Context", "DeadlineExceeded", "context",
    # secure metrics: a self-signed certificate that cannot be made fails ``Manager.run``
    "SelfSignedError",
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


def module_name(path: Path) -> str:
    relative = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = relative.parts[:-1] if relative.name == "__init__" else relative.parts
    return ".".join(parts)


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


@pytest.mark.parametrize("area", NOT_ALLOWED_PRIVATE_RUNTIME)
def test_only_the_runtime_uses_its_private_machinery(area: str) -> None:
    paths = [PACKAGE / area] if area.endswith(".py") else sorted((PACKAGE / area).rglob("*.py"))
    offenders = [
        f"{path.relative_to(PACKAGE)} imports {name}"
        for path in paths
        for name in imported_modules(path)
        if name.startswith(PRIVATE_RUNTIME)
    ]
    assert offenders == []


def test_only_the_schedule_package_uses_its_private_modules() -> None:
    offenders = [
        f"{path.relative_to(PACKAGE)} imports {name}"
        for path in modules()
        if path.relative_to(PACKAGE).parts[0] != "schedule"
        for name in imported_modules(path)
        if name.startswith(PRIVATE_SCHEDULE)
    ]
    assert offenders == []


def _runtime_import_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in (PACKAGE / "runtime").glob("*.py"):
        if path.name == "__init__.py":
            continue
        tree = ast.parse(path.read_text())
        deps: set[str] = set()
        for node in tree.body:  # module level only: imports under TYPE_CHECKING do not run
            if isinstance(node, ast.ImportFrom) and node.module:
                if node.module == "cronjob_operator.runtime":
                    deps.update(f"{node.module}.{alias.name}" for alias in node.names)
                elif node.module.startswith("cronjob_operator.runtime."):
                    deps.add(node.module)
        graph[module_name(path)] = deps
    return graph


def test_runtime_modules_import_each_other_without_a_cycle() -> None:
    graph = _runtime_import_graph()
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


def test_the_builder_does_not_know_the_manager() -> None:
    assert "cronjob_operator.runtime.manager" not in imported_modules(
        PACKAGE / "runtime" / "builder.py"
    )


def test_the_runtime_facade_exports_exactly_the_public_names() -> None:
    assert set(cronjob_operator.runtime.__all__) == PUBLIC_RUNTIME_NAMES
    missing = [n for n in PUBLIC_RUNTIME_NAMES if not hasattr(cronjob_operator.runtime, n)]
    assert missing == []


CRONJOB_CONTROLLER = PACKAGE / "controllers" / "cronjob"
CRONJOB_IO = ("reconciler.py", "__init__.py")
"""The CronJob controller's modules that do I/O: observe and act. The rest decide."""
IMPURE = (
    "cronjob_operator.runtime.client",
    "cronjob_operator.runtime.events",
    "cronjob_operator.runtime.clock",
    "cronjob_operator.runtime.status",
    "cronjob_operator.runtime.manager",
    "cronjob_operator.runtime.controller",
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
