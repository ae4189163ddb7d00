"""The AdmissionReview protocol (admission.k8s.io/v1), and field errors the API server's way.

An admission webhook receives an AdmissionReview whose ``request`` holds the object (and
the old one on UPDATE) and answers with one whose ``response`` echoes the request's uid
and says ``allowed``; a mutating webhook adds a base64 JSON Patch, a validating one that
denies adds a ``metav1.Status``. ``parse_review`` turns a decoded body into an
``AdmissionRequest`` or raises ``BadRequest`` (HTTP 400: such a body did not come
from an API server); ``allow``, ``patch`` and ``deny`` build the responses
(``validation_answer`` the one a validating webhook gives, from its create and update
rules), and ``review_handler`` makes a server route of a function that judges one object.

Validation errors are ``FieldError`` objects, written as apimachinery's ``field.Error``:
``spec.schedule: Invalid value: "60 * * * *": minute 60 is out of range 0-59``.
``invalid_status`` is ``apierrors.NewInvalid``: one 422 Status with every error in the
message (``[a, b]`` when there are several) and in ``details.causes`` with its field path,
so ``kubectl`` shows all of them at once, exactly as for the API server's own validation.
Every value from the request that a message shows (a rejected value, a name, a wrong
apiVersion) is cut to ``runtime.serving.ECHO_LIMIT`` characters.
"""

from __future__ import annotations

import base64
import enum
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cronjob_operator.runtime.kinds import Kind
from cronjob_operator.runtime.serving import clipped, clipped_json, shortened
from cronjob_operator.runtime.webhook._ratchet import ratcheted
from cronjob_operator.runtime.webhook._server import BadRequest

API_VERSION = "admission.k8s.io/v1"
KIND = "AdmissionReview"


class Operation(enum.StrEnum):
    """What the request does to the object."""

    CREATE = "CREATE"
    UPDATE = "UPDATE"
    DELETE = "DELETE"
    CONNECT = "CONNECT"


@dataclass(frozen=True, slots=True)
class AdmissionRequest:
    """The parts of ``AdmissionReview.request`` our webhooks read."""

    uid: str
    group: str
    version: str
    kind: str
    operation: Operation
    name: str
    namespace: str
    object: dict[str, Any] | None
    old_object: dict[str, Any] | None


def _expect_object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise BadRequest(f"{what} must be a JSON object, not {type(value).__name__}")
    return value


def _optional_object(request: Mapping[str, Any], key: str) -> dict[str, Any] | None:
    value = request.get(key)
    return None if value is None else _expect_object(value, f"request.{key}")


def _optional_string(request: Mapping[str, Any], key: str) -> str:
    value = request.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise BadRequest(f"request.{key} must be a string")
    return value


def parse_review(body: Any) -> AdmissionRequest:
    """The request of a decoded AdmissionReview v1; ``BadRequest`` when it is not one."""
    review = _expect_object(body, "the body")
    if review.get("apiVersion") != API_VERSION or review.get("kind") != KIND:
        raise BadRequest(
            f"expected apiVersion {API_VERSION} and kind {KIND}, got "
            f"{clipped(review.get('apiVersion'))} and {clipped(review.get('kind'))}"
        )
    request = _expect_object(review.get("request"), "request")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise BadRequest("request.uid must be a non-empty string")
    kind = _expect_object(request.get("kind"), "request.kind")
    try:
        operation = Operation(str(request.get("operation")))
    except ValueError:
        raise BadRequest(
            f"request.operation must be one of {', '.join(Operation)}, "
            f"not {clipped(request.get('operation'))}"
        ) from None
    return AdmissionRequest(
        uid=uid,
        group=_optional_string(kind, "group"),
        version=_optional_string(kind, "version"),
        kind=_optional_string(kind, "kind"),
        operation=operation,
        name=_optional_string(request, "name"),
        namespace=_optional_string(request, "namespace"),
        object=_optional_object(request, "object"),
        old_object=_optional_object(request, "oldObject"),
    )


def _review(response: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": KIND, "response": response}


def allow(uid: str) -> dict[str, Any]:
    """The review that admits the object unchanged."""
    return _review({"uid": uid, "allowed": True})


def patch(uid: str, ops: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The review that admits the object with a JSON Patch (unchanged when ``ops`` is empty)."""
    if not ops:
        return allow(uid)
    encoded = base64.b64encode(json.dumps(list(ops)).encode()).decode()
    return _review({"uid": uid, "allowed": True, "patchType": "JSONPatch", "patch": encoded})


def deny(uid: str, status: Mapping[str, Any]) -> dict[str, Any]:
    """The review that rejects the request with ``status`` (a metav1.Status)."""
    return _review({"uid": uid, "allowed": False, "status": dict(status)})


class ErrorType(enum.StrEnum):
    """apimachinery's field.ErrorType: the value is the cause type, the label the text."""

    INVALID = "FieldValueInvalid"
    REQUIRED = "FieldValueRequired"
    NOT_SUPPORTED = "FieldValueNotSupported"

    @property
    def label(self) -> str:
        """How the error reads in a message (``Invalid value``)."""
        return {
            ErrorType.INVALID: "Invalid value",
            ErrorType.REQUIRED: "Required value",
            ErrorType.NOT_SUPPORTED: "Unsupported value",
        }[self]


@dataclass(frozen=True, slots=True)
class FieldError:
    """One validation error on one field, as ``field.Error``."""

    type: ErrorType
    field: str
    """The field path, such as ``spec.schedule``."""
    value: Any
    """The rejected value (not shown for Required)."""
    detail: str = ""

    def body(self) -> str:
        """The message without the field: ``Invalid value: "x": detail``."""
        text = self.type.label
        if self.type is not ErrorType.REQUIRED:
            text += f": {clipped_json(self.value)}"
        return f"{text}: {self.detail}" if self.detail else text

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}"


def invalid(field: str, value: Any, detail: str) -> FieldError:
    """``field.Invalid``."""
    return FieldError(ErrorType.INVALID, field, value, detail)


def name_too_long(obj: Mapping[str, Any], limit: int, why: str) -> list[FieldError]:
    """``metadata.name`` longer than ``limit``: one Invalid error saying ``why``, else none."""
    name = (obj.get("metadata") or {}).get("name") or ""
    if len(name) <= limit:
        return []
    return [invalid("metadata.name", name, f"must be no more than {limit} characters ({why})")]


def required(field: str, detail: str = "") -> FieldError:
    """``field.Required``."""
    return FieldError(ErrorType.REQUIRED, field, None, detail)


def not_supported(field: str, value: Any, supported: Iterable[str]) -> FieldError:
    """``field.NotSupported``: the value is not one of ``supported``."""
    listed = ", ".join(json.dumps(choice) for choice in supported)
    return FieldError(ErrorType.NOT_SUPPORTED, field, value, f"supported values: {listed}")


def validation_answer(
    request: AdmissionRequest,
    obj: Mapping[str, Any],
    *,
    kind: Kind,
    validate_create: Callable[[Mapping[str, Any]], list[FieldError]],
    validate_update: Callable[[Mapping[str, Any], Mapping[str, Any]], list[FieldError]],
) -> dict[str, Any]:
    """A validating webhook's answer for ``obj`` of ``kind``: admit, or deny with every error.

    ``validate_update`` judges an UPDATE against the old object, ``validate_create``
    everything else (controller-runtime's validator for a ``CustomValidator``). An
    UPDATE is ratcheted (``_ratchet``): an error the old object has too, on a field the
    update leaves unchanged, does not refuse it.
    """
    old = request.old_object
    if request.operation is Operation.UPDATE and old is not None:
        errors = ratcheted(validate_update(obj, old), obj, old, lambda: validate_update(old, old))
    else:
        errors = validate_create(obj)
    if not errors:
        return allow(request.uid)
    name = request.name or (obj.get("metadata") or {}).get("name") or ""
    return deny(
        request.uid, invalid_status(group=kind.group, kind=kind.kind, name=name, errors=errors)
    )


def invalid_status(
    *, group: str, kind: str, name: str, errors: Sequence[FieldError]
) -> dict[str, Any]:
    """``apierrors.NewInvalid``: a 422 Status listing ``errors`` in the message and causes."""
    qualified = f"{kind}.{group}" if group else kind
    messages = [str(error) for error in errors]
    aggregate = messages[0] if len(messages) == 1 else f"[{', '.join(messages)}]"
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f"{qualified} {clipped_json(name)} is invalid: {aggregate}",
        "reason": "Invalid",
        "details": {
            "name": shortened(name),
            "group": group,
            "kind": kind,
            "causes": [
                {"reason": error.type.value, "message": error.body(), "field": error.field}
                for error in errors
            ],
        },
        "code": 422,
    }


Answer = Callable[[AdmissionRequest, dict[str, Any]], dict[str, Any]]
"""Answers one CREATE or UPDATE request about an object of the webhook's kind."""


def review_handler(kind: Kind, answer: Answer) -> Callable[[Any], dict[str, Any]]:
    """A server route: parse the review, then let ``answer`` judge the object.

    DELETE and CONNECT are admitted (these webhooks judge objects being written). A
    request about another kind, or without an object, can only come from a wrong webhook
    configuration: it is denied with a 400 status rather than guessed at.
    """

    def handle(body: Any) -> dict[str, Any]:
        request = parse_review(body)
        if request.operation not in (Operation.CREATE, Operation.UPDATE):
            return allow(request.uid)
        if (request.group, request.version, request.kind) != (kind.group, kind.version, kind.kind):
            got = shortened(f"{request.kind}.{request.group or 'core'}/{request.version}")
            return _bad_request(request.uid, f"this webhook handles {kind}, not {got}")
        if request.object is None:
            return _bad_request(request.uid, f"the {request.operation} request has no object")
        return answer(request, request.object)

    return handle


def _bad_request(uid: str, problem: str) -> dict[str, Any]:
    message = f"{problem}; check the webhook configuration"
    return deny(uid, {"status": "Failure", "code": 400, "reason": "BadRequest", "message": message})
