"""Label selectors, parsed once and matched in memory, for lists served from the cache.

Supports the selector syntax kubectl and the API server accept: equality (``a=b``,
``a==b``, ``a!=b``), set (``a in (x,y)``, ``a notin (x)``) and existence (``a``,
``!a``), comma-separated (all must hold). A mapping means matchLabels (all equal).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

LabelMatcher = Callable[[Mapping[str, str]], bool]

_REQUIREMENT = re.compile(
    r"""\s*(?:
        (?P<not_exists>!\s*(?P<ne_key>[\w./-]+))
      | (?P<set_key>[\w./-]+)\s+(?P<set_op>in|notin)\s*\((?P<values>[^)]*)\)
      | (?P<eq_key>[\w./-]+)\s*(?P<eq_op>==|!=|=)\s*(?P<eq_value>[\w./-]*)
      | (?P<exists>[\w./-]+)
    )\s*(?:,|$)""",
    re.VERBOSE,
)


def parse_selector(selector: str | Mapping[str, str]) -> LabelMatcher:
    """Compile a selector to a function of an object's labels; ValueError when malformed."""
    if not isinstance(selector, str):
        wanted = dict(selector)
        return lambda labels: all(labels.get(k) == v for k, v in wanted.items())
    checks: list[LabelMatcher] = []
    position = 0
    text = selector.strip()
    while position < len(text):
        match = _REQUIREMENT.match(text, position)
        if match is None or match.end() == position:
            raise ValueError(f"invalid label selector {selector!r} at position {position}")
        checks.append(_requirement(match))
        position = match.end()
    return lambda labels: all(check(labels) for check in checks)


def _requirement(match: re.Match[str]) -> LabelMatcher:
    if match["not_exists"]:
        key = match["ne_key"]
        return lambda labels: key not in labels
    if match["set_key"]:
        key, values = match["set_key"], {v.strip() for v in match["values"].split(",")}
        if match["set_op"] == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    if match["eq_key"]:
        key, value = match["eq_key"], match["eq_value"]
        if match["eq_op"] == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: labels.get(key) == value
    key = match["exists"]
    return lambda labels: key in labels
