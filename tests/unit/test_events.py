"""The event recorder's policy: Event shape, aggregation of repeats, spam filter, queueing."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cronjob_operator.envtest import wait_for
from cronjob_operator.runtime import errors, kinds, objects
from cronjob_operator.runtime.client import PatchType
from cronjob_operator.runtime.clock import FakeClock
from cronjob_operator.runtime.events import _correlator
from cronjob_operator.runtime.events import _recorder as events

START = datetime(2016, 5, 19, 9, 59, 0, tzinfo=UTC)

CRONJOB: dict[str, Any] = {
    "apiVersion": "batch.tutorial.kubebuilder.io/v1",
    "kind": "CronJob",
    "metadata": {"name": "hourly", "namespace": "ns1", "uid": "u-1", "resourceVersion": "42"},
}


def cronjob(name: str = "hourly", uid: str = "u-1") -> dict[str, Any]:
    return {**CRONJOB, "metadata": {**CRONJOB["metadata"], "name": name, "uid": uid}}


class RecordingSink:
    """Remembers the Events it was asked to write; a patch of an unknown Event is NotFound."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        self.events: dict[tuple[str, str], dict[str, Any]] = {}
        self.fail_with: Exception | None = None
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()
        """Set once a write has reached the sink (and waits at ``gate`` if it is closed)."""

    def create(self, kind: kinds.Kind, obj: Mapping[str, Any]) -> dict[str, Any]:
        assert kind == kinds.EVENT
        self.entered.set()
        self.gate.wait()
        self.calls.append(("create", obj["metadata"]["name"], dict(obj)))
        if self.fail_with is not None:
            raise self.fail_with
        key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
        if key in self.events:
            raise errors.api_error(409, {"reason": "AlreadyExists"})
        self.events[key] = dict(obj)
        return dict(obj)

    def update(self, kind: kinds.Kind, obj: Mapping[str, Any]) -> dict[str, Any]:
        raise AssertionError("the recorder never replaces an Event")

    def patch(
        self,
        kind: kinds.Kind,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        patch_type: PatchType = PatchType.MERGE,
        subresource: str = "",
    ) -> dict[str, Any]:
        assert kind == kinds.EVENT
        assert patch_type is PatchType.MERGE
        self.entered.set()
        self.gate.wait()
        self.calls.append(("patch", name, dict(patch)))
        if self.fail_with is not None:
            raise self.fail_with
        key = (namespace or "", name)
        if key not in self.events:
            raise errors.api_error(404, {"reason": "NotFound"})
        self.events[key].update(patch)
        return self.events[key]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START)


@pytest.fixture
def sink() -> RecordingSink:
    return RecordingSink()


def recorder_for(sink: RecordingSink, clock: FakeClock, **kwargs: Any) -> events.EventRecorder:
    return events.EventRecorder(sink, component="cronjob-controller", clock=clock, **kwargs)


def flush(recorder: events.EventRecorder) -> None:
    """Start the sender, send everything queued, stop."""
    recorder.start()
    recorder.stop(timeout=5.0)


class TestMakeEvent:
    def test_fields(self) -> None:
        event = _correlator.make_event(
            CRONJOB, "Normal", "SuccessfulCreate", "Created job x",
            component="cronjob-controller", host="node-1", now=START,
        )  # fmt: skip
        name, _, suffix = event["metadata"]["name"].rpartition(".")
        assert name == "hourly"
        assert len(suffix) == 16
        int(suffix, 16)
        assert event["metadata"]["namespace"] == "ns1"
        assert event["involvedObject"] == {
            "apiVersion": "batch.tutorial.kubebuilder.io/v1",
            "kind": "CronJob",
            "name": "hourly",
            "namespace": "ns1",
            "uid": "u-1",
            "resourceVersion": "42",
        }
        assert event["apiVersion"] == "v1"
        assert event["kind"] == "Event"
        assert event["type"] == "Normal"
        assert event["reason"] == "SuccessfulCreate"
        assert event["message"] == "Created job x"
        assert event["source"] == {"component": "cronjob-controller", "host": "node-1"}
        assert event["reportingComponent"] == "cronjob-controller"
        assert event["reportingInstance"] == "node-1"
        assert event["firstTimestamp"] == event["lastTimestamp"] == "2016-05-19T09:59:00Z"
        assert event["count"] == 1

    def test_names_are_unique(self) -> None:
        names = {
            _correlator.make_event(CRONJOB, "Normal", "R", "m", component="c", host="", now=START)[
                "metadata"
            ]["name"]
            for _ in range(100)
        }
        assert len(names) == 100

    def test_cluster_scoped_object_goes_to_default_namespace(self) -> None:
        node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "uid": "u"}}
        event = _correlator.make_event(node, "Warning", "R", "m", component="c", host="", now=START)
        assert event["metadata"]["namespace"] == "default"
        assert "namespace" not in event["involvedObject"]
        assert event["source"] == {"component": "c"}

    def test_message_is_truncated(self) -> None:
        event = _correlator.make_event(
            CRONJOB, "Normal", "R", "x" * 5000, component="c", host="", now=START
        )
        assert len(event["message"]) == objects.MAX_MESSAGE_LENGTH == 1024
        assert event["message"].endswith("x… (5000 characters)")

    def test_long_names_stay_valid(self) -> None:
        obj = {**CRONJOB, "metadata": {"name": "a" * 253, "namespace": "ns1"}}
        event = _correlator.make_event(obj, "Normal", "R", "m", component="c", host="", now=START)
        assert len(event["metadata"]["name"]) == 253

    @pytest.mark.parametrize("type_", ["normal", "Error", ""])
    def test_unknown_type_is_refused(self, type_: str) -> None:
        with pytest.raises(ValueError, match="unsupported event type"):
            _correlator.make_event(CRONJOB, type_, "R", "m", component="c", host="", now=START)

    def test_object_without_kind_is_refused(self) -> None:
        with pytest.raises(ValueError, match="apiVersion, kind"):
            _correlator.make_event({"metadata": {"name": "x"}}, "Normal", "R", "m",
                              component="c", host="", now=START)  # fmt: skip


class TestAggregation:
    def test_identical_events_patch_count_and_last_timestamp(
        self, sink: RecordingSink, clock: FakeClock
    ) -> None:
        recorder = recorder_for(sink, clock)
        for _ in range(5):
            recorder.event(CRONJOB, "Warning", "FailedCreate", "quota exceeded")
            clock.advance(10)
        flush(recorder)
        verbs = [verb for verb, _, _ in sink.calls]
        assert verbs == ["create", "patch", "patch", "patch", "patch"]
        assert len({name for _, name, _ in sink.calls}) == 1
        assert [body for verb, _, body in sink.calls if verb == "patch"][-1] == {
            "count": 5,
            "lastTimestamp": "2016-05-19T09:59:40Z",
        }
        (stored,) = sink.events.values()
        assert stored["count"] == 5
        assert stored["firstTimestamp"] == "2016-05-19T09:59:00Z"
        assert stored["lastTimestamp"] == "2016-05-19T09:59:40Z"
        assert recorder.stats() == events.RecorderStats(created=1, patched=4)

    @pytest.mark.parametrize(
        ("obj", "type_", "reason", "message"),
        [
            (cronjob(uid="u-2"), "Warning", "FailedCreate", "quota exceeded"),
            (cronjob(name="other"), "Warning", "FailedCreate", "quota exceeded"),
            (CRONJOB, "Normal", "FailedCreate", "quota exceeded"),
            (CRONJOB, "Warning", "FailedDelete", "quota exceeded"),
            (CRONJOB, "Warning", "FailedCreate", "another message"),
        ],
    )
    def test_events_that_differ_are_separate(
        self,
        sink: RecordingSink,
        clock: FakeClock,
        obj: dict[str, Any],
        type_: str,
        reason: str,
        message: str,
    ) -> None:
        recorder = recorder_for(sink, clock)
        recorder.event(CRONJOB, "Warning", "FailedCreate", "quota exceeded")
        recorder.event(obj, type_, reason, message)
        flush(recorder)
        assert [verb for verb, _, _ in sink.calls] == ["create", "create"]
        assert len(sink.events) == 2

    def test_a_deleted_event_is_created_again_with_the_running_count(
        self, sink: RecordingSink, clock: FakeClock
    ) -> None:
        recorder = recorder_for(sink, clock)
        recorder.event(CRONJOB, "Normal", "SawCompletedJob", "done")
        recorder.event(CRONJOB, "Normal", "SawCompletedJob", "done")
        recorder.start()
        wait_for(lambda: len(sink.calls) == 2, 5.0, interval=0.01, message="two writes sent")
        sink.events.clear()  # the API server's event TTL removed it
        recorder.event(CRONJOB, "Normal", "SawCompletedJob", "done")
        recorder.stop()
        assert [verb for verb, _, _ in sink.calls] == ["create", "patch", "patch", "create"]
        created = sink.calls[-1][2]
        assert created["count"] == 3
        assert created["metadata"]["name"] == sink.calls[0][1]
        assert recorder.stats() == events.RecorderStats(created=2, patched=1)

    def test_aggregation_is_by_correlator_state_not_by_time(self, clock: FakeClock) -> None:
        correlator = _correlator.EventCorrelator()
        first = _correlator.make_event(
            CRONJOB, "Normal", "R", "m", component="c", host="", now=START
        )
        assert correlator.correlate(first, START) == _correlator.EventWrite(first, None)
        clock.advance(3600)
        later = _correlator.make_event(
            CRONJOB, "Normal", "R", "m", component="c", host="", now=clock()
        )
        write = correlator.correlate(later, clock())
        assert write is not None
        assert write.patch == {"count": 2, "lastTimestamp": "2016-05-19T10:59:00Z"}
        assert write.event["metadata"]["name"] == first["metadata"]["name"]
        assert write.event["firstTimestamp"] == "2016-05-19T09:59:00Z"


class TestSpamFilter:
    def test_token_bucket(self) -> None:
        spam = _correlator.SpamFilter(burst=3, qps=1 / 300)
        key = ("c", "", "CronJob", "ns1", "hourly", "u-1", "v1")
        assert [spam.allow(key, START) for _ in range(4)] == [True, True, True, False]
        assert not spam.allow(key, START + timedelta(seconds=299))
        assert spam.allow(key, START + timedelta(seconds=300))
        assert not spam.allow(key, START + timedelta(seconds=300))
        assert spam.allow(("other",), START)

    def test_refill_stops_at_burst(self) -> None:
        spam = _correlator.SpamFilter(burst=2, qps=1.0)
        key = ("k",)
        assert spam.allow(key, START)
        later = START + timedelta(hours=1)
        assert [spam.allow(key, later) for _ in range(3)] == [True, True, False]

    def test_clock_going_backwards_adds_nothing(self) -> None:
        spam = _correlator.SpamFilter(burst=1, qps=1.0)
        assert spam.allow(("k",), START)
        assert not spam.allow(("k",), START - timedelta(seconds=100))

    def test_one_object_cannot_flood_whatever_it_reports(
        self, sink: RecordingSink, clock: FakeClock
    ) -> None:
        recorder = recorder_for(sink, clock)
        for i in range(40):
            recorder.event(CRONJOB, "Warning", f"Reason{i % 3}", f"message {i}")
        recorder.event(cronjob(name="healthy", uid="u-9"), "Normal", "SuccessfulCreate", "ok")
        flush(recorder)
        assert len(sink.calls) == 26
        assert recorder.stats().spam_filtered == 15

    def test_refill_is_one_event_per_five_minutes(
        self, sink: RecordingSink, clock: FakeClock
    ) -> None:
        recorder = recorder_for(sink, clock)
        for i in range(30):
            recorder.event(CRONJOB, "Warning", "FailedCreate", f"attempt {i}")
        clock.advance(300)
        recorder.event(CRONJOB, "Warning", "FailedCreate", "after 5m")
        recorder.event(CRONJOB, "Warning", "FailedCreate", "after 5m, again")
        flush(recorder)
        messages = [body["message"] for verb, _, body in sink.calls if verb == "create"]
        assert len(messages) == 26
        assert messages[-1] == "after 5m"
        assert recorder.stats().spam_filtered == 6

    def test_dropped_repeats_still_count(self, sink: RecordingSink, clock: FakeClock) -> None:
        recorder = recorder_for(sink, clock, burst=2)
        for _ in range(5):
            recorder.event(CRONJOB, "Warning", "FailedCreate", "quota exceeded")
        clock.advance(300)
        recorder.event(CRONJOB, "Warning", "FailedCreate", "quota exceeded")
        flush(recorder)
        assert [verb for verb, _, _ in sink.calls] == ["create", "patch", "patch"]
        assert sink.calls[-1][2]["count"] == 6
        assert recorder.stats().spam_filtered == 3


class TestRecorder:
    def test_never_blocks_and_drops_when_the_queue_is_full(
        self, sink: RecordingSink, clock: FakeClock
    ) -> None:
        sink.gate.clear()  # the API server hangs
        recorder = recorder_for(sink, clock, queue_size=3)
        recorder.start()
        recorder.event(CRONJOB, "Normal", "R", "m0")
        assert sink.entered.wait(10), "the sender took m0 and hangs in the API call"
        # Blocking would mean waiting for the hung API server, which never answers until
        # the gate opens: so "returned at all" is the behaviour, the 30 s only a backstop.

        def produce() -> None:
            for i in range(1, 10):
                recorder.event(CRONJOB, "Normal", "R", f"m{i}")

        producer = threading.Thread(target=produce)
        producer.start()
        producer.join(30)
        assert not producer.is_alive(), "event() blocked behind a hung API server"
        assert recorder.stats().queue_full == 6, "m1-m3 fill the queue of 3, m4-m9 are dropped"
        sink.gate.set()
        recorder.stop(timeout=5.0)
        assert [body["message"] for _, _, body in sink.calls] == ["m0", "m1", "m2", "m3"]

    def test_never_raises(self, sink: RecordingSink, clock: FakeClock) -> None:
        recorder = recorder_for(sink, clock)
        recorder.event({"metadata": {"name": "x"}}, "Normal", "R", "m")
        recorder.event(CRONJOB, "Bogus", "R", "m")
        recorder.event(None, "Normal", "R", "m")  # type: ignore[arg-type]
        sink.fail_with = errors.api_error(403, {"reason": "Forbidden", "message": "no"})
        recorder.event(CRONJOB, "Normal", "R", "m")
        flush(recorder)
        assert recorder.stats() == events.RecorderStats(invalid=2, failed=1)

    def test_transport_errors_are_dropped(self, sink: RecordingSink, clock: FakeClock) -> None:
        sink.fail_with = errors.TransportError("connection refused")
        recorder = recorder_for(sink, clock)
        recorder.event(CRONJOB, "Normal", "R", "m")
        recorder.event(CRONJOB, "Normal", "R", "m2")
        flush(recorder)
        assert recorder.stats().failed == 2

    def test_terminating_namespace_is_not_a_failure_worth_a_warning(
        self, sink: RecordingSink, clock: FakeClock, caplog: pytest.LogCaptureFixture
    ) -> None:
        sink.fail_with = errors.api_error(
            403,
            {"reason": "Forbidden", "details": {"causes": [{"reason": "NamespaceTerminating"}]}},
        )
        recorder = recorder_for(sink, clock)
        recorder.event(CRONJOB, "Normal", "R", "m")
        flush(recorder)
        assert not [r for r in caplog.records if r.levelname == "WARNING"]

    def test_events_before_start_are_sent_and_stop_flushes(
        self, sink: RecordingSink, clock: FakeClock
    ) -> None:
        recorder = recorder_for(sink, clock)
        for i in range(20):
            recorder.event(CRONJOB, "Normal", "R", f"m{i}")
        recorder.start()
        recorder.stop(timeout=5.0)
        assert len(sink.calls) == 20

    def test_events_after_stop_are_dropped(self, sink: RecordingSink, clock: FakeClock) -> None:
        recorder = recorder_for(sink, clock)
        flush(recorder)
        recorder.event(CRONJOB, "Normal", "R", "m")
        recorder.start()
        recorder.stop()
        assert sink.calls == []

    def test_stop_gives_up_after_its_timeout(self, sink: RecordingSink, clock: FakeClock) -> None:
        sink.gate.clear()
        recorder = recorder_for(sink, clock)
        recorder.start()
        recorder.event(CRONJOB, "Normal", "R", "m")
        assert sink.entered.wait(10)
        started = time.monotonic()
        recorder.stop(timeout=0.2)
        # The bound is the behaviour: stop waits at most ``timeout`` to enqueue its marker
        # and ``timeout`` for the sender, 0.4 s; 10 s only says it gave up rather than
        # waiting for the hung API server.
        assert time.monotonic() - started < 10.0
        assert sink.calls == [], "returned while the write still hangs"
        sink.gate.set()
