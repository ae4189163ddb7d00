"""Objects nested as deep as the API server stores them: freezing, thawing and JSON.

The API server decodes up to 10,000 levels of free-form fields (a pod template's
``affinity`` in a CustomResource is ``x-kubernetes-preserve-unknown-fields``). Every
step from the wire to the cache and back must take that without RecursionError, or one
stored object stops its informer for every namespace (issue 35).
"""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest

from cronjob_operator.controllers.configdeployment import decide
from cronjob_operator.controllers.cronjob import jobs
from cronjob_operator.runtime import objects
from cronjob_operator.runtime.client import _json, canonical_json

API_SERVER_DEPTH = 10_000
"""The nesting the API server's decoder accepts."""


def nested(depth: int) -> Any:
    """Dicts and lists alternating ``depth`` levels deep around a few scalars."""
    value: Any = {"leaf": "x", "n": 1, "f": 0.5, "t": True, "z": None, "empty": {}}
    for level in range(depth):
        value = {"affinity": value} if level % 2 else [value, "s"]
    return value


def walk(value: Any, depth: int, steps: int | None = None) -> Any:
    """The value ``steps`` levels into ``nested(depth)``-shaped ``value`` (default: the
    innermost)."""
    for level in reversed(range(depth - (depth if steps is None else steps), depth)):
        value = value["affinity"] if level % 2 else value[0]
    return value


def test_freeze_takes_any_depth_the_api_server_stores() -> None:
    frozen = objects.freeze(nested(API_SERVER_DEPTH))  # RecursionError before the fix
    inner = walk(frozen, API_SERVER_DEPTH)
    assert type(inner) is objects.FrozenDict
    assert inner == {"leaf": "x", "n": 1, "f": 0.5, "t": True, "z": None, "empty": {}}
    assert type(walk(frozen, API_SERVER_DEPTH, API_SERVER_DEPTH - 1)) is tuple, (
        "lists become tuples"
    )
    with pytest.raises(TypeError):
        inner["leaf"] = "changed"  # type: ignore[index]


@pytest.mark.parametrize("depth", [3, 400, 2_000], ids=["shallow", "recursive", "iterative"])
def test_freeze_and_thaw_give_the_same_values_on_either_path(depth: int) -> None:
    value = nested(depth)
    text = _json.dumps(value)  # compared as JSON: == on 2,000 levels would itself recurse
    frozen = objects.freeze(value)
    assert _json.dumps(frozen) == text
    assert _json.dumps(objects._freeze_iteratively(value)) == text, "the fallback alike"
    assert type(walk(frozen, depth)) is objects.FrozenDict
    for thawed in (objects.thaw(frozen), objects._thaw_iteratively(frozen)):
        assert _json.dumps(thawed) == text
        assert type(walk(thawed, depth)) is dict


def test_thaw_takes_any_depth_and_gives_mutable_copies() -> None:
    frozen = objects.freeze(nested(API_SERVER_DEPTH))
    thawed = objects.thaw(frozen)  # RecursionError before the fix
    inner = walk(thawed, API_SERVER_DEPTH)
    inner["leaf"] = "changed"
    assert walk(frozen, API_SERVER_DEPTH)["leaf"] == "x", "a copy, not the cached object"
    assert type(walk(thawed, API_SERVER_DEPTH, API_SERVER_DEPTH - 1)) is list


def test_json_decodes_and_encodes_nesting_orjson_refuses() -> None:
    value = nested(API_SERVER_DEPTH)
    text = _json.dumps(value)  # orjson refuses to encode beyond 254 levels
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(text)  # and to decode beyond 1,024
    assert walk(_json.loads(text), API_SERVER_DEPTH) == walk(value, API_SERVER_DEPTH)


def test_the_fallback_parser_reads_json_as_orjson_does() -> None:
    text = ' {"a": [1, -2.5e3, "\\u00e9\\"", true, false, null, {}, []], "b": {"c": ""}} '
    assert _json._parse(text) == orjson.loads(text)
    assert orjson.loads(_json._encode(orjson.loads(text))) == orjson.loads(text)


@pytest.mark.parametrize("bad", ['{"a":1', "[1,]", '{"a" 1}', "tru", "[1] x", '{"a":1,}', ""])
def test_malformed_json_is_still_a_decode_error(bad: str) -> None:
    with pytest.raises(orjson.JSONDecodeError):
        _json.loads(bad)


def test_the_job_of_a_cronjob_600_deep_in_affinity_is_built_and_encoded() -> None:
    affinity: dict[str, Any] = {}
    for _ in range(600):
        affinity = {"a": affinity}
    pod = {"containers": [{"name": "c", "image": "busybox"}], "affinity": affinity}
    cronjob = objects.freeze(
        {
            "apiVersion": "batch.tutorial.kubebuilder.io/v1",
            "kind": "CronJob",
            "metadata": {"name": "deep", "namespace": "ns", "uid": "u1"},
            "spec": {"jobTemplate": {"spec": {"template": {"spec": pod}}}},
        }
    )
    job = jobs.job_from_template(cronjob, name="deep-60", annotations={})
    body = _json.dumps(job)  # the create's body: orjson alone refuses 254+ levels
    assert body.count(b'{"a":') == 600
    assert _json.loads(body)["metadata"]["ownerReferences"][0]["uid"] == "u1"


def test_canonical_json_is_the_standard_librarys_and_takes_any_depth() -> None:
    value = {"b": [1, 2.5, "é\n", None, True], "a": {"z": {}, "y": []}}
    stdlib = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert canonical_json(value) == stdlib.encode()  # hashes already rolled out stay
    assert _json._encode(value, sort_keys=True) == stdlib, "the fallback writes the same"
    deep = nested(API_SERVER_DEPTH)  # json.dumps raises RecursionError near 1,000
    assert canonical_json(deep).count(b'"affinity":') == API_SERVER_DEPTH // 2


def test_the_deployment_of_a_config_deployment_5000_deep_is_built() -> None:
    config_deployment = _config_deployment_5000_deep()
    deployment = decide.desired_deployment(config_deployment, "hash")  # its spec hash recursed
    assert deployment["metadata"]["annotations"][decide.SPEC_HASH_ANNOTATION]


def test_what_orjson_refuses_for_anything_but_depth_stays_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for refused in ['["\\ud800"]', "[1e999]"]:  # a lone surrogate; beyond a double
        with pytest.raises(orjson.JSONDecodeError):
            _json.loads(refused)
    for unencodable in [{1: "key not a string"}, [2**70]]:
        with pytest.raises(orjson.JSONEncodeError):
            _json.dumps(unencodable)

    def parse_again(text: str) -> Any:
        raise AssertionError(f"a malformed body is parsed a second time: {text!r}")

    monkeypatch.setattr(_json, "_parse", parse_again)
    with pytest.raises(orjson.JSONDecodeError):
        _json.loads('{"a":1')


def test_a_value_inside_itself_is_refused_and_a_shared_one_written_twice() -> None:
    cyclic: list[Any] = [{"affinity": None}]
    cyclic[0]["affinity"] = cyclic  # beyond orjson's depth at once: the fallback's case
    with pytest.raises(ValueError, match="Circular reference"):
        _json.dumps(cyclic)
    shared = nested(300)  # beyond orjson's 254 levels, the same object twice
    once = _json.dumps(shared)
    assert _json.dumps([shared, shared]) == b"[" + once + b"," + once + b"]"


def test_freeze_and_thaw_refuse_a_value_inside_itself_and_copy_a_shared_one() -> None:
    cyclic: dict[str, Any] = {"spec": {"affinity": None}}
    cyclic["spec"]["affinity"] = [cyclic]  # RecursionError on the fast path, then the stack
    with pytest.raises(ValueError, match="contains itself"):
        objects.freeze(cyclic)
    with pytest.raises(ValueError, match="contains itself"):
        objects.thaw(cyclic)
    shared = nested(2_000)  # too deep for the fast path, the same object twice
    once = _json.dumps(shared)
    for copied in (objects.freeze([shared, shared]), objects.thaw([shared, shared])):
        assert _json.dumps(copied) == b"[" + once + b"," + once + b"]"


def test_a_config_deployment_5000_deep_is_compared_with_its_deployment() -> None:
    """Issue 47 (the stored-object fuzzer): with its Deployment in place, every reconcile
    of a ConfigDeployment 2,000 deep in ``affinity`` raised RecursionError in the
    comparison that decides whether the Deployment needs an update."""
    config_deployment = _config_deployment_5000_deep()
    deployment = objects.freeze(decide.desired_deployment(config_deployment, "hash"))
    assert not decide.needs_update(deployment, decide.desired_deployment(config_deployment, "hash"))
    changed = decide.desired_deployment(config_deployment, "other")
    assert decide.needs_update(deployment, changed)


def _config_deployment_5000_deep() -> objects.Obj:
    """A ConfigDeployment whose pod template's ``affinity`` nests 5,000 levels."""
    affinity: dict[str, Any] = {}
    for _ in range(5000):
        affinity = {"a": affinity}
    template = {"spec": {"containers": [{"name": "c", "image": "nginx"}], "affinity": affinity}}
    return objects.freeze(
        {
            "apiVersion": "apps.tutorial.kubebuilder.io/v1",
            "kind": "ConfigDeployment",
            "metadata": {"name": "deep", "namespace": "ns", "uid": "u1"},
            "spec": {"configMap": "settings", "replicas": 1, "template": template},
        }
    )
