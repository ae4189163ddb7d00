"""JSON of any depth to and from the API server: orjson first, a loop without recursion after.

``canonical_json`` is the one canonical encoding the controllers hash (sorted keys, the
standard library's bytes), at any depth too.

orjson refuses to parse nesting deeper than 1,024 levels and to encode deeper than 254,
and the standard library's codec recurses (RecursionError near 1,000). The API server
stores free-form fields (``x-kubernetes-preserve-unknown-fields``, such as a pod
template's ``affinity`` in a CustomResource) nested up to 10,000 levels, so one stored
object could make every LIST and WATCH of its kind fail, and one reconcile's request
body unsendable. ``loads`` and ``dumps`` keep orjson's speed for every real object and
fall back, only on such a refusal (orjson's depth messages, ``_TOO_DEEP``), to ``_parse``
and ``_encode``: both walk the document with a list as their stack, so no depth costs a
Python frame. Any other refusal is raised as orjson's: a malformed body is never parsed
twice, and what orjson refuses for another reason (a lone surrogate, a number beyond a
double, a key that is not a string, an integer beyond 64 bits) stays refused. A value
that contains itself is refused by ``_encode`` too (``ValueError``, as the standard
library's), not written forever. The messages are those of the pinned orjson; the deep
cases of tests/unit/test_deep_objects.py fail if they change.
"""

from __future__ import annotations

import json
import json.decoder
import re
from collections.abc import Callable
from dataclasses import dataclass
from json.encoder import encode_basestring
from json.scanner import NUMBER_RE
from typing import Any

import orjson

_WHITESPACE = re.compile(r"[ \t\n\r]*")
_scanstring: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]
"""The standard library's C string scanner (not in its type stubs): the string after an
opening quote, and the index after the closing one."""
_LITERALS: dict[str, Any] = {"true": True, "false": False, "null": None}
_TOO_DEEP = ("depth limit exceeded", "Recursion limit reached")
"""How orjson's refusals for nesting alone begin (to parse; to encode): the only ones
``loads`` and ``dumps`` fall back on."""


def _skip_space(text: str, index: int) -> int:
    """The index of the first character at or after ``index`` that is not whitespace."""
    return _WHITESPACE.match(text, index).end()  # type: ignore[union-attr]  # always matches


def loads(data: bytes | str) -> Any:
    """Parse ``data`` as orjson does; JSON nested beyond orjson's limit parses all the same.

    Raises ``orjson.JSONDecodeError`` (a ``ValueError``) for malformed JSON.
    """
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as refused:
        if not str(refused).startswith(_TOO_DEEP):
            raise
        try:
            return _parse(data.decode() if isinstance(data, bytes) else data)
        except (ValueError, IndexError):
            raise refused from None


def dumps(value: Any) -> bytes:
    """Encode ``value`` as orjson does; a value nested beyond orjson's limit all the same."""
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError as refused:
        if not str(refused).startswith(_TOO_DEEP):
            raise
        return _encode(value).encode()


def canonical_json(value: Any) -> bytes:
    """Sorted keys, no spaces, UTF-8: the same bytes for the same content, always (what a
    content hash is taken of), at any depth: the standard library's encoding, and the same
    bytes from ``_encode`` where it would recurse too deep."""
    try:
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except RecursionError:
        text = _encode(value, sort_keys=True)
    return text.encode()


def _parse(text: str) -> Any:
    """Parse ``text`` with an explicit stack of open containers (and, in an object, the key
    whose value comes next). Raises ``ValueError`` or ``IndexError`` if it is not JSON."""
    stack: list[tuple[dict[str, Any] | list[Any], str]] = []
    index = _skip_space(text, 0)
    while True:
        value, index, opened = _value_at(text, index)
        if opened is not None:
            stack.append(opened)
            continue
        while True:  # attach the finished value; close every container it finishes
            index = _skip_space(text, index)
            if not stack:
                if index != len(text):
                    raise ValueError(f"extra data at character {index}")
                return value
            container, key = stack[-1]
            if isinstance(container, dict):
                container[key] = value
            else:
                container.append(value)
            char = text[index]
            if char == ",":
                index = _skip_space(text, index + 1)
                if isinstance(container, dict):
                    key, index = _key_at(text, index)
                stack[-1] = (container, key)
                break
            if char != ("}" if isinstance(container, dict) else "]"):
                raise ValueError(f"expected , or a closing bracket at character {index}")
            stack.pop()
            value, index = container, index + 1


def _value_at(
    text: str, index: int
) -> tuple[Any, int, tuple[dict[str, Any] | list[Any], str] | None]:
    """The value starting at ``index`` and the index after it; or, for a non-empty object
    or array, the container just opened (with its first key) and the index of its first
    value."""
    char = text[index]
    if char in "{[":
        inner = _skip_space(text, index + 1)
        if text[inner] == ("}" if char == "{" else "]"):
            return ({} if char == "{" else []), inner + 1, None
        if char == "[":
            return None, inner, ([], "")
        key, inner = _key_at(text, inner)
        return None, inner, ({}, key)
    if char == '"':
        string, end = _scanstring(text, index + 1)
        return string, end, None
    number = NUMBER_RE.match(text, index)
    if number is not None:
        integer, fraction, exponent = number.groups()
        if fraction or exponent:
            return float(integer + (fraction or "") + (exponent or "")), number.end(), None
        return int(integer), number.end(), None
    for literal, value in _LITERALS.items():
        if text.startswith(literal, index):
            return value, index + len(literal), None
    raise ValueError(f"expected a value at character {index}")


def _key_at(text: str, index: int) -> tuple[str, int]:
    """An object's key at ``index`` and the index of its value, after the colon."""
    if text[index] != '"':
        raise ValueError(f"expected a key at character {index}")
    key, index = _scanstring(text, index + 1)
    index = _skip_space(text, index)
    if text[index] != ":":
        raise ValueError(f"expected : at character {index}")
    return key, _skip_space(text, index + 1)


class _Punctuation(str):
    """Text ``_encode`` writes as it is (brackets, commas, keys), never a JSON string."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class _Closing:
    """The bracket that ends a container ``_encode`` is writing, and the container's id:
    it is open until then, and a container met again while open contains itself."""

    bracket: str
    container: int


def _encode(value: Any, *, sort_keys: bool = False) -> str:
    """Compact JSON of ``value`` with an explicit stack of what is still to write; each
    scalar as the standard library writes it (``ensure_ascii=False``). A container inside
    itself raises ``ValueError``, as the standard library's encoder does."""
    parts: list[str] = []
    todo: list[Any] = [value]
    open_containers: set[int] = set()
    while todo:
        item = todo.pop()
        if type(item) is _Punctuation:
            parts.append(item)
        elif type(item) is _Closing:
            parts.append(item.bracket)
            open_containers.remove(item.container)
        elif isinstance(item, dict | list | tuple):
            if id(item) in open_containers:
                raise ValueError("Circular reference detected")
            open_containers.add(id(item))
            _push_container(item, todo, sort_keys=sort_keys)
        else:
            parts.append(json.dumps(item, ensure_ascii=False))
    return "".join(parts)


def _push_container(
    container: dict[Any, Any] | list[Any] | tuple[Any, ...], todo: list[Any], *, sort_keys: bool
) -> None:
    """Push what writes ``container`` onto ``todo``, last part first: its opening bracket,
    its entries between commas (each key before its value), its ``_Closing``."""
    if isinstance(container, dict):
        todo.append(_Closing("}", id(container)))
        entries = sorted(container.items()) if sort_keys else list(container.items())
        for position, (key, child) in enumerate(reversed(entries)):
            if position:
                todo.append(_Punctuation(","))
            todo.append(child)
            todo.append(_Punctuation(encode_basestring(str(key)) + ":"))
        todo.append(_Punctuation("{"))
        return
    todo.append(_Closing("]", id(container)))
    for position, child in enumerate(reversed(container)):
        if position:
            todo.append(_Punctuation(","))
        todo.append(child)
    todo.append(_Punctuation("["))
