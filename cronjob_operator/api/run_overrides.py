"""Run now with overrides: the run request annotation's JSON form, its checks, and the
Job it makes.

The run request annotation (``RUN_ANNOTATION``) holds either a plain token (one run of
the template as written) or a JSON object naming a token and the overrides of that one
run (docs/beyond-builtin.md, "Run now, with overrides")::

    {"token": "2026-12-06T04:00:00Z",
     "overrides": {"env": [{"name": "DRY_RUN", "value": "1"}],
                   "containers": [{"name": "main", "image": "busybox:1.37",
                                   "args": ["--full"],
                                   "env": [{"name": "LEVEL", "value": "debug"}]}]}}

``env`` at the top sets variables in every container, ``containers[].env`` in one
(after the top's, so it wins); ``image`` and ``args`` replace the container's. A
variable is set as ``kubectl set env`` sets it: an existing one of that name is
replaced where it stands (its ``valueFrom`` too), a new one is appended.

A variable may take, instead of a ``value``, a ``valueFrom`` naming a key of a Secret
or ConfigMap (``KeyRef``: ``secretKeyRef`` or ``configMapKeyRef``, with ``name``,
``key`` and ``optional`` only)::

    {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}

The request on the CronJob and the Job's ``OVERRIDES_ANNOTATION`` (readable by anyone
who may read the CronJob, or the Job: the built-in ``view`` role reads Jobs) then hold
the names only; the reference is copied into the Job's containers as written, and the
kubelet reads the key when the Pod starts, in the Pod's namespace (a reference has no
namespace field), as for any Pod. Nothing here reads a Secret. Other ``valueFrom``
sources are refused (``_value_from``, which says why).

One place below its three users, as ``cronjob_rules`` is: the admission webhook refuses
a bad request (``request_problem``), the kubectl plugin builds the JSON
(``request_json``), and the controller reads it (``parse_run_request``, remembered per
value: every reconcile reads the annotation) and builds the Job (``overridden_spec``),
recording what it applied on the Job (``OVERRIDES_ANNOTATION``, the canonical JSON) for
``kubectl cjt history`` and the user to read back (``overrides_summary``).
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from cronjob_operator.api.batch_v1_constants import MAX_RUN_TOKEN_LENGTH
from cronjob_operator.api.cronjob_rules import TOKEN_FIELD, token_problem
from cronjob_operator.api.names import MAX_KEY_LENGTH, is_key, is_subdomain

__all__ = [
    "MAX_RUN_REQUEST_LENGTH",
    "OVERRIDES_ANNOTATION",
    "ContainerOverride",
    "EnvValue",
    "KeyRef",
    "KeySource",
    "Overrides",
    "RunRequest",
    "container_problem",
    "overridden_spec",
    "overrides_json",
    "overrides_summary",
    "parse_overrides_json",
    "parse_run_request",
    "request_json",
    "request_problem",
]

MAX_RUN_REQUEST_LENGTH: Final = 32 * 1024
"""The largest run request annotation value read, in UTF-8 bytes (32 KiB). Its overrides
are copied onto the Job twice (the containers, and ``OVERRIDES_ANNOTATION``, whose
canonical JSON is never larger than the request: no ``\\u`` escapes), and a Job's
annotations together may hold 256 KiB (in bytes): this leaves the template's own room. A
larger value is refused before it is parsed."""

OVERRIDES_ANNOTATION: Final = "batch.tutorial.kubebuilder.io/run-overrides"
"""On a manual Job: the overrides it was created with, as canonical JSON (absent when
the run request had none)."""

_SHAPE: Final = (
    'must be a token, or JSON {"token": "...", "overrides": {"env": [{"name": "K", '
    '"value": "V"}], "containers": [{"name": "C", "image": "I", "args": ["A"], "env": '
    "[...]}]}}"
)
_PARSE_MEMO_SIZE: Final = 8
"""How many requests' parsed values are remembered (the last read). A parsed request
holds an object per string, up to 12 times its JSON: 8 full-size requests hold about
3.2 MiB (``python -m bench.run_request_memo``); a request read past them is parsed
again (up to about 1.6 ms)."""


class KeySource(StrEnum):
    """Where a ``KeyRef`` reads its key: its ``valueFrom`` field's name."""

    SECRET = "secretKeyRef"
    CONFIG_MAP = "configMapKeyRef"

    @property
    def kind(self) -> str:
        """The kind of object the reference names."""
        return "Secret" if self is KeySource.SECRET else "ConfigMap"


@dataclass(frozen=True, slots=True)
class KeyRef:
    """A variable's value from key ``key`` of the Secret or ConfigMap ``name`` of the
    CronJob's namespace, read by the kubelet when the Pod starts; with ``optional``
    true, a missing object or key leaves the variable unset. Only the names are held."""

    source: KeySource
    name: str
    key: str
    optional: bool | None = None


EnvValue = str | KeyRef
"""A variable's value: the text itself, or the key it is read from."""


@dataclass(frozen=True, slots=True)
class ContainerOverride:
    """One container's overrides: ``None`` leaves the image or args as the template has
    them; ``env`` holds (name, value) pairs in the order given."""

    name: str
    image: str | None = None
    args: tuple[str, ...] | None = None
    env: tuple[tuple[str, EnvValue], ...] = ()


@dataclass(frozen=True, slots=True)
class Overrides:
    """A run's overrides: ``env`` for every container, then each named container's."""

    env: tuple[tuple[str, EnvValue], ...] = ()
    containers: tuple[ContainerOverride, ...] = ()


@dataclass(frozen=True, slots=True)
class RunRequest:
    """A parsed run request: its token, and its overrides (None for a plain token)."""

    token: str
    overrides: Overrides | None = None


class _Invalid(Exception):
    """A request that is not one: the field inside the JSON and what it must be."""


# --- reading ------------------------------------------------------------------------


def parse_run_request(raw: str) -> RunRequest | str:
    """The request in annotation value ``raw``, or why it is not one: a message naming
    the annotation, the field inside it and the fix. A value not starting with ``{`` is
    a plain token."""
    if not raw.lstrip().startswith("{"):
        return token_problem(raw) or RunRequest(raw)
    size = len(raw.encode(errors="surrogatepass"))  # the bytes a Job's annotations count
    if size > MAX_RUN_REQUEST_LENGTH:  # before the memo (_PARSE_MEMO_SIZE)
        return (
            f"{TOKEN_FIELD}: the run request is {size} bytes (UTF-8), at most "
            f"{MAX_RUN_REQUEST_LENGTH} are allowed; override fewer or shorter values"
        )
    return _parse_json_request(raw)


@functools.lru_cache(maxsize=_PARSE_MEMO_SIZE)
def _parse_json_request(raw: str) -> RunRequest | str:
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return f"{TOKEN_FIELD}: not valid JSON; it {_SHAPE}"
    if not _encodable(value):
        return (
            f"{TOKEN_FIELD}: holds a lone surrogate escape such as \\ud800, which no Job "
            "can carry; write the text as valid Unicode"
        )
    try:
        request = _request(value)
    except _Invalid as exc:
        return f"{TOKEN_FIELD}: {exc}"
    return token_problem(request.token) or request


def _encodable(value: Any) -> bool:
    """Whether the decoded JSON ``value`` encodes as UTF-8 (a lone surrogate does not).
    One too deep to encode passes here: its shape is refused next."""
    try:
        json.dumps(value, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        return False
    except RecursionError:
        return True
    return True


def _request(value: Any) -> RunRequest:
    mapping = _object(value, "the value", {"token", "overrides"})
    token = mapping.get("token")
    if not isinstance(token, str) or not token:
        raise _Invalid(
            f"token must be a string of 1 to {MAX_RUN_TOKEN_LENGTH} characters, such as the "
            "current time"
        )
    overrides = mapping.get("overrides")
    return RunRequest(token, None if overrides is None else _overrides(overrides, "overrides"))


def _overrides(value: Any, field: str) -> Overrides:
    mapping = _object(value, field, {"env", "containers"})
    containers = tuple(
        _container(item, f"{field}.containers[{index}]")
        for index, item in enumerate(_list(mapping.get("containers"), f"{field}.containers"))
    )
    names = [container.name for container in containers]
    for index, name in enumerate(names):
        if name in names[:index]:
            raise _Invalid(
                f"{field}.containers[{index}].name: {name!r} is given twice; merge the entries"
            )
    return Overrides(_env(mapping.get("env"), f"{field}.env"), containers)


def _container(value: Any, field: str) -> ContainerOverride:
    mapping = _object(value, field, {"name", "image", "args", "env"})
    name = mapping.get("name")
    if not isinstance(name, str) or not name:
        raise _Invalid(f"{field}.name must name a container of the job template")
    image = mapping.get("image")
    if image is not None and (
        not isinstance(image, str) or not image or image != image.strip() or not image.isprintable()
    ):
        raise _Invalid(
            f"{field}.image must be an image reference such as busybox:1.37, without "
            "spaces; omit it to keep the template's"
        )
    args = mapping.get("args")
    if args is not None and not (
        isinstance(args, list) and all(isinstance(arg, str) for arg in args)
    ):
        raise _Invalid(f"{field}.args must be a list of strings; omit it to keep the template's")
    return ContainerOverride(
        name=name,
        image=image,
        args=None if args is None else tuple(args),
        env=_env(mapping.get("env"), f"{field}.env"),
    )


def _env(value: Any, field: str) -> tuple[tuple[str, EnvValue], ...]:
    pairs = []
    for index, item in enumerate(_list(value, field)):
        entry = f"{field}[{index}]"
        mapping = _object(item, entry, {"name", "value", "valueFrom"})
        name = mapping.get("name")
        if not isinstance(name, str) or not _is_env_name(name):
            raise _Invalid(f"{entry}.name must be a variable name: printable ASCII, no '='")
        pairs.append((name, _env_value_of(mapping, entry)))
    return tuple(pairs)


def _env_value_of(mapping: Mapping[str, Any], field: str) -> EnvValue:
    """The value of env entry ``mapping``: its ``value``, or the key its ``valueFrom``
    names."""
    if "valueFrom" in mapping:
        if "value" in mapping:
            raise _Invalid(f"{field}: set value or valueFrom, not both")
        return _value_from(mapping["valueFrom"], f"{field}.valueFrom")
    text = mapping.get("value")
    if not isinstance(text, str):
        raise _Invalid(
            f'{field}.value must be a string (quote numbers: "1"); for a secret, name its '
            'key instead: "valueFrom": {"secretKeyRef": {"name": "SECRET", "key": "KEY"}}'
        )
    return text


_REFUSED_SOURCES: Final = ("fieldRef", "resourceFieldRef")
"""``valueFrom`` sources a template may use but an override may not: neither carries a
secret (the reason to offer ``valueFrom`` here), and each has rules of its own (the
fields a Pod may read, a resource and its divisor) that only the API server checks, at
the Job's create, where a mistake would fail the run instead of the request."""


_SOURCES: Final = {str(source): source for source in KeySource}
_OFFERED: Final = ", ".join(sorted(_SOURCES))


def _value_from(value: Any, field: str) -> KeyRef:
    if not isinstance(value, dict):
        raise _Invalid(
            f'{field} must be a JSON object: {{"secretKeyRef": {{"name": "SECRET", "key": '
            '"KEY"}} or the same with configMapKeyRef'
        )
    if len(value) == 1:
        ((name, ref),) = value.items()
        source = _SOURCES.get(name)
        if source is not None:
            return _key_ref(source, ref, f"{field}.{source}")
    for refused in _REFUSED_SOURCES:
        if refused in value:
            raise _Invalid(
                f"{field}.{refused}: not offered in a run override; use secretKeyRef or "
                f"configMapKeyRef, or set the variable in the job template "
                "(spec.jobTemplate.spec.template.spec.containers[].env)"
            )
    unknown = sorted(set(value) - set(_SOURCES))
    if unknown:
        raise _Invalid(f"{field}: unknown source {unknown[0]!r}; the sources are {_OFFERED}")
    raise _Invalid(f"{field} must hold exactly one of {_OFFERED}")


def _key_ref(source: KeySource, value: Any, field: str) -> KeyRef:
    if isinstance(value, dict) and "namespace" in value:
        raise _Invalid(
            f"{field}.namespace: a reference has no namespace; the kubelet reads the "
            f"{source.kind} from the CronJob's namespace: make or copy it there"
        )
    mapping = _object(value, field, {"name", "key", "optional"})
    name, key, optional = mapping.get("name"), mapping.get("key"), mapping.get("optional")
    if not isinstance(name, str) or not is_subdomain(name):
        raise _Invalid(
            f"{field}.name must name a {source.kind} in the CronJob's namespace: a "
            "lowercase RFC 1123 subdomain of at most 253 characters, such as db-credentials"
        )
    if not isinstance(key, str) or not is_key(key):
        raise _Invalid(
            f"{field}.key must be a key of that {source.kind}: 1 to {MAX_KEY_LENGTH} "
            "letters, digits, '-', '_' or '.', not '.' and not starting with '..'"
        )
    if optional is not None and not isinstance(optional, bool):
        raise _Invalid(f"{field}.optional must be true or false; omit it for false")
    return KeyRef(source, name, key, optional)


def _is_env_name(name: str) -> bool:
    return bool(name) and name.isascii() and name.isprintable() and "=" not in name


def _object(value: Any, field: str, keys: set[str]) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise _Invalid(f"{field} must be a JSON object; it {_SHAPE}")
    unknown = sorted(set(value) - keys)
    if unknown:
        raise _Invalid(
            f"{field}: unknown field {unknown[0]!r}; the fields are {', '.join(sorted(keys))}"
        )
    return value


def _list(value: Any, field: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _Invalid(f"{field} must be a JSON list")
    return value


# --- checking against the template ----------------------------------------------------


def container_problem(overrides: Overrides, job_spec: Mapping[str, Any]) -> str | None:
    """Why ``overrides`` cannot apply to the Job spec ``job_spec`` (None if they can): a
    container they name that its pod template does not have."""
    have = _container_names(job_spec)
    for index, container in enumerate(overrides.containers):
        if container.name not in have:
            return (
                f"{TOKEN_FIELD}: overrides.containers[{index}].name: the job template has "
                f"no container {container.name!r} (it has {', '.join(have) or 'none'}); name "
                "one of spec.jobTemplate.spec.template.spec.containers"
            )
    return None


def request_problem(raw: str, job_spec: Mapping[str, Any] | None) -> str | None:
    """Why annotation value ``raw`` cannot be run (None if it can); without a Job spec,
    only its shape is checked."""
    request = parse_run_request(raw)
    if isinstance(request, str):
        return request
    if request.overrides is None or job_spec is None:
        return None
    return container_problem(request.overrides, job_spec)


def _container_names(job_spec: Mapping[str, Any]) -> list[str]:
    """The names of the pod template's containers (a cached spec holds tuples)."""
    template = job_spec.get("template")
    pod = template.get("spec") if isinstance(template, Mapping) else None
    containers = pod.get("containers") if isinstance(pod, Mapping) else None
    if not isinstance(containers, (list, tuple)):
        return []
    return [str(c.get("name")) for c in containers if isinstance(c, Mapping)]


# --- applying -----------------------------------------------------------------------


def overridden_spec(job_spec: Mapping[str, Any], overrides: Overrides) -> dict[str, Any]:
    """A copy of the Job spec ``job_spec`` with ``overrides`` applied (its containers
    checked by ``container_problem`` first)."""
    spec = copy.deepcopy(dict(job_spec))
    pod = spec.setdefault("template", {}).setdefault("spec", {})
    by_name = {container.name: container for container in overrides.containers}
    for container in pod.get("containers") or ():
        container["env"] = _with_env(container.get("env") or [], overrides.env)
        mine = by_name.get(container.get("name"))
        if mine is not None:
            container["env"] = _with_env(container["env"], mine.env)
            if mine.image is not None:
                container["image"] = mine.image
            if mine.args is not None:
                container["args"] = list(mine.args)
        if not container["env"]:
            del container["env"]
    return spec


def _with_env(env: Sequence[Mapping[str, Any]], pairs: Iterable[tuple[str, EnvValue]]) -> list[Any]:
    """``env`` with each (name, value) set: replaced where it stands, else appended."""
    result = [dict(entry) for entry in env]
    for name, value in pairs:
        entry = _env_entry(name, value)
        at = next((i for i, item in enumerate(result) if item.get("name") == name), None)
        if at is None:
            result.append(entry)
        else:
            result[at] = entry
    return result


# --- writing and showing ------------------------------------------------------------


def overrides_json(overrides: Overrides) -> str:
    """The canonical JSON of ``overrides`` (the request's shape, empty parts left out),
    never more UTF-8 bytes than the request it was read from (``_canonical``)."""
    return _canonical(_overrides_value(overrides))


def parse_overrides_json(raw: str) -> Overrides | None:
    """``overrides_json`` read back (None when ``raw`` is not such a value)."""
    try:
        return _overrides(json.loads(raw), "overrides")
    except (ValueError, RecursionError, _Invalid):
        return None


def request_json(token: str, overrides: Overrides) -> str:
    """The run request annotation value asking for one run with ``overrides``."""
    return _canonical({"token": token, "overrides": _overrides_value(overrides)})


def _canonical(value: Any) -> str:
    """Compact JSON, keys sorted, text as itself (a ``\\u`` escape would make a non-ASCII
    character up to 12 bytes where UTF-8 takes at most 4)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _overrides_value(overrides: Overrides) -> dict[str, Any]:
    value: dict[str, Any] = {}
    if overrides.env:
        value["env"] = _env_value(overrides.env)
    containers = []
    for container in overrides.containers:
        entry: dict[str, Any] = {"name": container.name}
        if container.image is not None:
            entry["image"] = container.image
        if container.args is not None:
            entry["args"] = list(container.args)
        if container.env:
            entry["env"] = _env_value(container.env)
        containers.append(entry)
    if containers:
        value["containers"] = containers
    return value


def _env_value(pairs: Iterable[tuple[str, EnvValue]]) -> list[dict[str, Any]]:
    return [_env_entry(name, value) for name, value in pairs]


def _env_entry(name: str, value: EnvValue) -> dict[str, Any]:
    """The container env entry (and the request's) setting ``name`` to ``value``."""
    if isinstance(value, str):
        return {"name": name, "value": value}
    ref: dict[str, Any] = {"name": value.name, "key": value.key}
    if value.optional is not None:
        ref["optional"] = value.optional
    return {"name": name, "valueFrom": {str(value.source): ref}}


def overrides_summary(overrides: Overrides) -> str:
    """One short line for a table: what was overridden, variable names without their
    values (``env=A,B;main:image=busybox:1.37,args,env=C``); ``-`` for nothing."""
    parts = []
    if overrides.env:
        parts.append("env=" + ",".join(name for name, _ in overrides.env))
    for container in overrides.containers:
        changed = []
        if container.image is not None:
            changed.append(f"image={container.image}")
        if container.args is not None:
            changed.append("args")
        if container.env:
            changed.append("env=" + ",".join(name for name, _ in container.env))
        if changed:
            parts.append(f"{container.name}:{','.join(changed)}")
    return ";".join(parts) or "-"
