"""Hostile stored objects, generated from the API models, and a world that reconciles them.

Issue 47: a CronJob (v1 or v2), ConcurrencyGroup or ConfigDeployment written while the
webhooks were off, or stored before a rule tightened, reaches the controllers as
whatever JSON the cache holds. This module enumerates such objects without listing a
field by hand: it walks the structural schema ``crdgen.openapi_schema`` makes of each
pydantic model in ``cronjob_operator.api`` (every property, the first entry of every
list, a key of every map) and gives each field the values it must survive
(:func:`hostile_values`): every wrong JSON type, a huge string, a huge list, a value
nested deeper than Python's recursion limit, and a value just past each rule the schema
states (length, pattern, enum, range, int32/int64, date-time, item counts). The two
annotations the CronJob controller reads as requests get the same treatment as strings.

:class:`World` is what a reconcile of them runs against: the runtime's fake client
holding a good CronJob, a good ConfigDeployment and their sources beside the hostile
object, the three reconcilers (a ConcurrencyGroup is reconciled by the CronJob
reconciler of a CronJob that names it), and an API server stand-in that refuses a Job
or Deployment whose pod template the API models refuse (the real API server validates
what the controller copies from a template; the fake client does not). A v2 object
reaches the cache as the conversion webhook turns it into v1, the storage version.

Used by tests/unit/test_stored_object_fuzz.py (Hypothesis draws from :func:`cases`)
and ``bench.stored_object_cost`` (every case, time and memory per reconcile).
"""

from __future__ import annotations

import functools
import itertools
import json
import re
import time
import tracemalloc
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import pydantic

from cronjob_operator.api import apps_v1, batch_v1, batch_v2, concurrencygroup_v1, core
from cronjob_operator.api.crdgen import openapi_schema
from cronjob_operator.api.markers import Resource
from cronjob_operator.controllers.configdeployment import (
    CONFIG_MAP_INDEX,
    SECRETS_INDEX,
    ConfigDeploymentReconciler,
    config_map_index,
    sources,
)
from cronjob_operator.controllers.cronjob import JOB_OWNER_INDEX, CronJobReconciler, job_owner_index
from cronjob_operator.runtime import errors, objects
from cronjob_operator.runtime.clock import FakeClock
from cronjob_operator.runtime.controller import Request, Result
from cronjob_operator.runtime.fake import (
    Action,
    FakeClient,
    FakeClientBuilder,
    FakeRecorder,
    Reaction,
)
from cronjob_operator.runtime.kinds import DEPLOYMENT, JOB, Kind
from cronjob_operator.webhooks import conversion

__all__ = [
    "DEPTH",
    "GOOD",
    "HUGE",
    "KINDS",
    "NAMESPACE",
    "START",
    "Case",
    "Reconciled",
    "World",
    "cases",
    "hostile_values",
]

NAMESPACE: Final = "tenant"
START: Final = datetime(2026, 3, 2, 9, 0, 30, tzinfo=UTC)
"""Half a minute past a minute: the good CronJob (``* * * * *``) has its next run due a
minute later."""
HUGE: Final = 1024 * 1024
"""Bytes of JSON of a huge string or list: within the 1.5 MiB an object may take in
etcd, as the API server stores it."""
DEPTH: Final = 2_000
"""Levels of a deep value: past Python's recursion limit (1,000), within the API
server's decoder (10,000)."""
GOOD: Final = "good"
"""The name of the well-formed CronJob and ConfigDeployment beside every hostile object."""
BAD: Final = "bad"
"""The name of the hostile object (and, for a hostile ConcurrencyGroup, of the CronJob
that names it)."""
GROUP: Final = "group"
SETTINGS: Final = "settings"
"""The ConfigMap the ConfigDeployments roll out."""

KINDS: Final[Mapping[str, Resource]] = {
    "CronJob/v1": batch_v1.CRONJOB_RESOURCE,
    "CronJob/v2": batch_v2.CRONJOB_RESOURCE,
    "ConcurrencyGroup": concurrencygroup_v1.CONCURRENCY_GROUP_RESOURCE,
    "ConfigDeployment": apps_v1.CONFIG_DEPLOYMENT_RESOURCE,
}
"""The stored kinds fuzzed, by the label a case carries."""

REQUEST_ANNOTATIONS: Final = (batch_v1.RUN_ANNOTATION, batch_v1.BACKFILL_ANNOTATION)
"""The CronJob annotations the controller reads as requests (strings holding JSON)."""

Path = tuple[str | int, ...]


# --- the fields, from the models' schemas ------------------------------------------


def _fields(node: Mapping[str, Any], path: Path) -> Iterator[tuple[Path, Mapping[str, Any]]]:
    """Every field under ``node`` (a structural schema), with its path: properties, the
    first entry of a list, the key ``k`` of a map."""
    for name, child in (node.get("properties") or {}).items():
        yield (*path, name), child
        yield from _fields(child, (*path, name))
    items = node.get("items")
    if isinstance(items, Mapping):
        yield (*path, 0), items
        yield from _fields(items, (*path, 0))
    values = node.get("additionalProperties")
    if isinstance(values, Mapping):
        yield (*path, "k"), values
        yield from _fields(values, (*path, "k"))


def fields_of(resource: Resource) -> list[tuple[Path, Mapping[str, Any]]]:
    """Every field of ``resource``'s objects but apiVersion, kind and metadata (which the
    API server itself checks, webhooks or not), plus the request annotations of a
    CronJob, typed as the strings they are."""
    found = [
        (path, node)
        for path, node in _fields(openapi_schema(resource), ())
        if path[0] not in ("apiVersion", "kind", "metadata")
    ]
    if resource.kind == batch_v1.CRONJOB:
        string = {"type": "string", "maxLength": batch_v1.MAX_RUN_TOKEN_LENGTH}
        found += [(("metadata", "annotations", key), string) for key in REQUEST_ANNOTATIONS]
    return found


# --- the values ---------------------------------------------------------------------


def nested(levels: int) -> Any:
    """Objects and lists alternating ``levels`` deep."""
    value: Any = "leaf"
    for level in range(levels):
        value = {"a": value} if level % 2 else [value]
    return value


_WRONG_TYPES: Final[Mapping[str, tuple[Any, ...]]] = {
    "string": (7, True, ["x"], {"x": "y"}),
    "integer": ("7", 1.5, True, {"x": 1}),
    "number": ("7", True, []),
    "boolean": ("false", 0, []),
    "object": ("x", ["x"], 7),
    "array": ("x", {"x": "y"}, 7, [None]),
}
_SAMPLES: Final[Mapping[str, Any]] = {
    "string": "x",
    "integer": 1,
    "number": 1.5,
    "boolean": True,
    "object": {},
    "array": [],
}
_NOT_A_TIME: Final = ("not a time", "9999-99-99T99:99:99Z", "2026-03-02T09:00:00")


def _type_of(node: Mapping[str, Any]) -> str | None:
    if node.get("x-kubernetes-int-or-string"):
        return None
    type_ = node.get("type")
    return type_ if isinstance(type_, str) else None


def _sample(node: Mapping[str, Any]) -> Any:
    """A plain value of ``node``'s type (an entry of a list grown past its bound)."""
    if "enum" in node:
        return node["enum"][0]
    return _SAMPLES.get(_type_of(node) or "string", "x")


def _past_rules(node: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """A value just past each rule ``node`` states."""
    if "maxLength" in node:
        yield "past maxLength", "x" * (node["maxLength"] + 1)
    if node.get("minLength"):
        yield "under minLength", ""
    pattern = node.get("pattern")
    if pattern is not None and not re.search(pattern, "-Not A Match-"):
        yield "not the pattern", "-Not A Match-"
    if "enum" in node:
        yield "not in the enum", "NotAMember"
    if "minimum" in node:
        yield "under minimum", node["minimum"] - 1
    if "maximum" in node:
        yield "past maximum", node["maximum"] + 1
    if node.get("format") == "int32":
        yield "past int32", 2**31
    if node.get("format") == "int64" or _type_of(node) == "integer":
        yield "past int64", 2**63
    if node.get("format") == "date-time":
        yield from (("not a time", value) for value in _NOT_A_TIME)
    items = node.get("items")
    if "maxItems" in node and isinstance(items, Mapping):
        yield "past maxItems", [_sample(items)] * (node["maxItems"] + 1)
    if node.get("minItems"):
        yield "under minItems", []


def hostile_values(node: Mapping[str, Any], huge: int = HUGE) -> list[tuple[str, Any]]:
    """(label, value) pairs a field of schema ``node`` must survive in a stored object
    (``huge``: the bytes of JSON of a huge string or list)."""
    type_ = _type_of(node)
    values: list[tuple[str, Any]] = [
        (f"wrong type {type(value).__name__}", value)
        for value in _WRONG_TYPES.get(type_ or "", ((), {}))
    ]
    values.append(("null (pruned: absent)", None))
    values += list(_past_rules(node))
    values.append(("huge string", _huge_string(huge)))
    if type_ == "array":
        items = node.get("items")
        entry = _sample(items if isinstance(items, Mapping) else {})
        values.append(("huge list", _huge_list(json.dumps(entry), huge)))
    values.append(("deep", _DEEP_OBJECT if _keeps_unknown_fields(node) else _DEEP_LIST))
    return values


def _keeps_unknown_fields(node: Mapping[str, Any]) -> bool:
    """Whether the API server stores any field under ``node``: elsewhere it prunes the
    fields the schema does not name, so a deep object there is stored as ``{}``."""
    return bool(node.get("x-kubernetes-preserve-unknown-fields")) or not node.get("type")


_DEEP_OBJECT: Final = nested(DEPTH)
_DEEP_LIST: Final = nested(DEPTH + 1)
"""Deep values shared by every case, as are the huge ones (nothing writes to them: the
fake client and the conversion copy what they are given): objects and lists alternating,
the outermost an object or a list."""


@functools.cache
def _huge_string(size: int) -> str:
    return "x" * size


@functools.cache
def _huge_list(entry_json: str, size: int) -> list[Any]:
    """A list of the entry ``entry_json`` as long as ``size`` bytes of JSON allow."""
    return [json.loads(entry_json)] * (size // (len(entry_json) + 1))


@dataclass(frozen=True)
class Case:
    """One hostile stored object: ``kind`` (a :data:`KINDS` label) with ``value`` at
    ``path`` of an otherwise well-formed object."""

    kind: str
    path: Path
    label: str
    value: Any = field(repr=False, compare=False)

    @property
    def field(self) -> str:
        """The path as Kubernetes writes it: ``spec.containers[0].name``."""
        text = ""
        for step in self.path:
            text += f"[{step}]" if isinstance(step, int) else f".{step}"
        return text.lstrip(".")

    def __str__(self) -> str:
        return f"{self.kind} {self.field}: {self.label}"

    @property
    def reconciled(self) -> Kind:
        """The kind whose reconciler serves the hostile object, as :data:`BAD`."""
        if self.kind == "ConfigDeployment":
            return apps_v1.CONFIG_DEPLOYMENT
        return batch_v1.CRONJOB

    def stored(self) -> list[dict[str, Any]]:
        """The objects as they would reach the controller's cache: the hostile one (a v2
        CronJob as the conversion webhook stores it, in v1) and, for a hostile
        ConcurrencyGroup, a CronJob naming it."""
        obj = BASES[self.kind](BAD)
        if self.path[:2] == ("spec", "schedules"):
            del obj["spec"]["schedule"]  # one of the two, as the schema's rule says
        _set_at(obj, self.path, self.value)
        if self.kind == "CronJob/v2":
            return [conversion.convert(obj, batch_v1.CRONJOB.api_version)]
        if self.kind == "ConcurrencyGroup":
            return [obj, cronjob_v1(BAD, group=BAD)]
        return [obj]


def _set_at(obj: dict[str, Any], path: Path, value: Any) -> None:
    """Put ``value`` at ``path`` in ``obj``, making (or replacing) the containers on the
    way: a list gets its entry 0, a map its key."""
    holder: Any = obj
    for step, following in itertools.pairwise(path):
        child: Any = holder[step] if _has(holder, step) else None
        if isinstance(following, int):
            if not isinstance(child, list) or not child:
                child = [{}]
        elif not isinstance(child, dict):
            child = {}
        _put(holder, step, child)
        holder = child
    if value is None and isinstance(path[-1], str):
        holder.pop(path[-1], None)  # the API server prunes a null field
    else:
        _put(holder, path[-1], value)


def _has(holder: Any, step: str | int) -> bool:
    if isinstance(step, int):
        return isinstance(holder, list) and len(holder) > step
    return isinstance(holder, dict) and step in holder


def _put(holder: Any, step: str | int, value: Any) -> None:
    holder[step] = value


def cases(kinds: Sequence[str] = tuple(KINDS), *, huge: int = HUGE) -> list[Case]:
    """Every hostile value of every field of ``kinds``, in schema order (``huge``: the
    bytes of JSON of a huge string or list)."""
    return [
        Case(kind, path, label, value)
        for kind in kinds
        for path, node in fields_of(KINDS[kind])
        for label, value in hostile_values(node, huge)
        if path[0] != "metadata" or isinstance(value, str)  # annotations are strings
    ]


# --- well-formed objects ----------------------------------------------------------


def _template() -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "app", "image": "busybox", "command": ["true"]}]}}


def cronjob_v1(name: str, *, group: str | None = None) -> dict[str, Any]:
    """A CronJob due every minute, keeping one finished Job of each kind."""
    spec: dict[str, Any] = {
        "schedule": "* * * * *",
        "startingDeadlineSeconds": 600,
        "successfulJobsHistoryLimit": 1,
        "failedJobsHistoryLimit": 1,
        "jobTemplate": {"spec": {"template": {**_template(), "metadata": {}}}},
    }
    spec["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    if group is not None:
        spec["concurrencyGroup"] = {"name": group}
    return {
        "apiVersion": batch_v1.CRONJOB.api_version,
        "kind": "CronJob",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": spec,
    }


def _cronjob_v2(name: str) -> dict[str, Any]:
    obj = cronjob_v1(name, group=GROUP)
    obj["apiVersion"] = batch_v2.CRONJOB_RESOURCE.kind.api_version
    obj["spec"]["schedule"] = {"minute": "*"}
    return obj


def _concurrency_group(name: str) -> dict[str, Any]:
    return {
        "apiVersion": concurrencygroup_v1.CONCURRENCY_GROUP.api_version,
        "kind": "ConcurrencyGroup",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"limit": 2},
    }


def config_deployment(name: str) -> dict[str, Any]:
    return {
        "apiVersion": apps_v1.CONFIG_DEPLOYMENT.api_version,
        "kind": "ConfigDeployment",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"configMap": SETTINGS, "replicas": 1, "template": _template()},
    }


BASES: Final = {
    "CronJob/v1": lambda name: cronjob_v1(name, group=GROUP),
    "CronJob/v2": _cronjob_v2,
    "ConcurrencyGroup": _concurrency_group,
    "ConfigDeployment": config_deployment,
}
"""The well-formed object of each kind a case starts from (a CronJob names a group, so
its group's path runs too)."""


# --- the world ----------------------------------------------------------------------


def _refuse_what_the_models_refuse(
    model: type[pydantic.BaseModel], path: tuple[str, ...]
) -> Reaction:
    """A reaction refusing a create or update whose value at ``path`` ``model`` refuses,
    as the API server's validation of a Job or Deployment would (422, naming the first
    field)."""

    def react(action: Action) -> BaseException | None:
        value: Any = action.body
        for step in path:
            value = value.get(step) if isinstance(value, Mapping) else None
        try:
            model.model_validate(objects.thaw(value) if value is not None else {})
        except (pydantic.ValidationError, RecursionError, ValueError) as exc:
            detail = _first_error(exc)
            return errors.Invalid(
                {
                    "kind": "Status",
                    "reason": "Invalid",
                    "code": 422,
                    "message": f"{action.kind.kind} {action.name!r} is invalid: "
                    f"{'.'.join(path)}{detail}",
                },
                code=422,
            )
        return None

    return react


def _first_error(exc: Exception) -> str:
    if isinstance(exc, pydantic.ValidationError):
        first = exc.errors(include_url=False, include_input=False)[0]
        where = ".".join(str(step) for step in first["loc"])
        return f".{where}: {first['msg']}"
    return ": nested too deeply"


_VALIDATED: Final[Mapping[Kind, tuple[type[pydantic.BaseModel], tuple[str, ...]]]] = {
    JOB: (core.JobSpec, ("spec",)),
    DEPLOYMENT: (core.PodTemplateSpec, ("spec", "template")),
}
"""What the API server stand-in validates of each kind the controllers write: the part
copied from a template, with the model the template's own schema comes from."""


@dataclass(frozen=True)
class Reconciled:
    """One reconcile: its result or the exception it raised, CPU seconds, and the peak
    of Python memory it allocated (bytes, ``tracemalloc``; 0 when not measured)."""

    result: Result | None
    error: BaseException | None
    seconds: float
    peak_bytes: int


class World:
    """The fake API holding one hostile object beside well-formed ones, and the
    reconcilers that serve them (see the module docstring)."""

    def __init__(
        self,
        stored: Sequence[Mapping[str, Any]] = (),
        *,
        start: datetime = START,
        validate: bool = True,
    ) -> None:
        """``validate``: refuse a Job or Deployment as the API server would (its cost,
        which is the API server's, is left out of a measurement by turning it off)."""
        self.clock = FakeClock(start)
        initial = [
            cronjob_v1(GOOD),
            config_deployment(GOOD),
            _concurrency_group(GROUP),
            _config_map(),
            *stored,
        ]
        self.client: FakeClient = (
            FakeClientBuilder()
            .with_kinds(batch_v1.CRONJOB, concurrencygroup_v1.CONCURRENCY_GROUP)
            .with_kinds(apps_v1.CONFIG_DEPLOYMENT)
            .with_index(JOB, JOB_OWNER_INDEX, job_owner_index)
            .with_index(apps_v1.CONFIG_DEPLOYMENT, CONFIG_MAP_INDEX, config_map_index)
            .with_index(apps_v1.CONFIG_DEPLOYMENT, SECRETS_INDEX, sources.secret_names)
            .with_clock(self.clock)
            .with_objects(*_unique(initial))
            .build()
        )
        for kind in (JOB, DEPLOYMENT) if validate else ():
            model, path = _VALIDATED[kind]
            for verb in ("create", "update"):
                self.client.prepend_reactor(verb, kind, _refuse_what_the_models_refuse(model, path))
        self.recorder = FakeRecorder()
        self.cronjobs = CronJobReconciler(self.client, self.recorder, clock=self.clock)
        self.config_deployments = ConfigDeploymentReconciler(
            self.client, self.recorder, clock=self.clock
        )

    def reconcile(self, kind: Kind, name: str, *, measure: bool = False) -> Reconciled:
        """One reconcile of ``name`` (and the follow-up the work queue runs at once after
        a create); never raises: what it raised is in the answer."""
        reconciler: Any = (
            self.config_deployments if kind == apps_v1.CONFIG_DEPLOYMENT else self.cronjobs
        )
        if measure:
            tracemalloc.start()
        began = time.process_time()
        try:
            result: Result | None = reconciler.reconcile(Request(NAMESPACE, name))
            if result is not None and result.follow_up:
                result = reconciler.reconcile(Request(NAMESPACE, name))
            error = None
        except Exception as exc:  # the fuzzer's finding: reported by the caller
            result, error = None, exc
        seconds = time.process_time() - began
        peak = 0
        if measure:
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        return Reconciled(result, error, seconds, peak)

    def advance(self, seconds: float) -> None:
        self.clock.set(self.clock() + timedelta(seconds=seconds))

    def jobs_of(self, cronjob: str) -> list[objects.Obj]:
        return [
            job
            for job in self.client.list(JOB, namespace=NAMESPACE)
            if objects.name_of(job).startswith(f"{cronjob}-")
        ]

    def has_deployment(self, name: str) -> bool:
        try:
            self.client.get(DEPLOYMENT, name, NAMESPACE)
        except errors.NotFound:
            return False
        return True

    def warnings_about(self, name: str) -> set[tuple[str, str]]:
        """The distinct Warning reports (reason, message) on the objects named ``name``."""
        return {
            (event.reason, event.message)
            for event in self.recorder.events
            if event.type == "Warning" and event.name == name
        }


def _config_map() -> dict[str, Any]:
    return sources.digest_config_map(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": SETTINGS, "namespace": NAMESPACE},
            "data": {"color": "blue"},
        }
    )


def _unique(initial: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """``initial`` with a later object replacing an earlier one of the same kind and name
    (a hostile ConcurrencyGroup replaces the good one)."""
    by_key: dict[tuple[Any, Any], Mapping[str, Any]] = {}
    for obj in initial:
        by_key[(obj.get("kind"), obj["metadata"]["name"])] = obj
    return list(by_key.values())
