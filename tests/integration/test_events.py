"""The event recorder against a real API server: Events created, aggregated, rate limited."""

from __future__ import annotations

from typing import Any

import pytest

from cronjob_operator.envtest import ControlPlane, wait_for
from cronjob_operator.runtime import kinds
from cronjob_operator.runtime.client import LiveReader, RestClient, Writer, load_configuration
from cronjob_operator.runtime.events import _recorder as events

COMPONENT = "cronjob-controller"


@pytest.fixture
def rest(control_plane: ControlPlane) -> RestClient:
    return RestClient(load_configuration(str(control_plane.kubeconfig)))


@pytest.fixture
def config_map(rest: RestClient, namespace: str) -> dict[str, Any]:
    body = {"metadata": {"name": "subject", "namespace": namespace}, "data": {"a": "b"}}
    return Writer(rest).create(kinds.CONFIG_MAP, body)


def recorder_for(rest: RestClient) -> events.EventRecorder:
    recorder = events.EventRecorder(Writer(rest), component=COMPONENT, host="test-host")
    recorder.start()
    return recorder


def events_about(rest: RestClient, obj: dict[str, Any], namespace: str) -> list[dict[str, Any]]:
    uid = obj["metadata"]["uid"]
    found = LiveReader(rest).list(
        kinds.EVENT, namespace=namespace, matching_fields={"involvedObject.uid": uid}
    )
    return sorted((dict(e) for e in found), key=lambda e: e["message"])


def test_identical_events_become_one_event_with_a_count(
    rest: RestClient, namespace: str, config_map: dict[str, Any]
) -> None:
    recorder = recorder_for(rest)
    for _ in range(7):
        recorder.event(config_map, "Warning", "FailedCreate", "quota exceeded")
    recorder.event(config_map, "Normal", "SuccessfulCreate", "created job hourly-1")
    recorder.stop(timeout=10)

    created, failed = sorted(events_about(rest, config_map, namespace), key=lambda e: e["type"])
    assert (created["type"], created["reason"], created["count"]) == (
        "Normal",
        "SuccessfulCreate",
        1,
    )
    assert failed["type"] == "Warning"
    assert failed["reason"] == "FailedCreate"
    assert failed["message"] == "quota exceeded"
    assert failed["count"] == 7
    assert failed["firstTimestamp"] <= failed["lastTimestamp"]
    assert failed["source"] == {"component": COMPONENT, "host": "test-host"}
    assert failed["reportingComponent"] == COMPONENT
    assert failed["reportingInstance"] == "test-host"
    ref = failed["involvedObject"]
    assert ref["kind"] == "ConfigMap"
    assert ref["apiVersion"] == "v1"
    assert ref["name"] == "subject"
    assert ref["namespace"] == namespace
    assert ref["resourceVersion"] == config_map["metadata"]["resourceVersion"]
    assert failed["metadata"]["name"].startswith("subject.")
    assert recorder.stats() == events.RecorderStats(created=2, patched=6)


def test_a_deleted_event_is_recreated_with_the_running_count(
    rest: RestClient, namespace: str, config_map: dict[str, Any]
) -> None:
    recorder = recorder_for(rest)
    recorder.event(config_map, "Normal", "SawCompletedJob", "done")
    recorder.event(config_map, "Normal", "SawCompletedJob", "done")
    wait_for(lambda: recorder.stats().patched == 1, 10, interval=0.02, message="the repeat")
    (event,) = events_about(rest, config_map, namespace)
    assert event["count"] == 2
    Writer(rest).delete(kinds.EVENT, event["metadata"]["name"], namespace=namespace)

    recorder.event(config_map, "Normal", "SawCompletedJob", "done")
    recorder.stop(timeout=10)

    (again,) = events_about(rest, config_map, namespace)
    assert again["metadata"]["name"] == event["metadata"]["name"]
    assert again["metadata"]["uid"] != event["metadata"]["uid"]
    assert again["count"] == 3
    assert recorder.stats() == events.RecorderStats(created=2, patched=1)


def test_the_spam_filter_bounds_what_one_object_writes(
    rest: RestClient, namespace: str, config_map: dict[str, Any]
) -> None:
    recorder = recorder_for(rest)
    for i in range(40):
        recorder.event(config_map, "Warning", "FailedCreate", f"attempt {i:02d}")
    recorder.stop(timeout=20)

    written = events_about(rest, config_map, namespace)
    assert [e["message"] for e in written] == [f"attempt {i:02d}" for i in range(25)]
    assert recorder.stats().spam_filtered == 15


def test_events_about_cluster_scoped_objects_go_to_default(
    rest: RestClient, namespace: str
) -> None:
    ns = dict(LiveReader(rest).get(kinds.NAMESPACE, namespace))
    ns.setdefault("apiVersion", "v1")
    ns.setdefault("kind", "Namespace")
    recorder = recorder_for(rest)
    recorder.event(ns, "Normal", "Tested", "about a namespace")
    recorder.stop(timeout=10)

    (event,) = events_about(rest, ns, "default")
    assert event["involvedObject"]["kind"] == "Namespace"
    assert "namespace" not in event["involvedObject"]
    Writer(rest).delete(kinds.EVENT, event["metadata"]["name"], namespace="default")
