"""Sources: a controller watches a public ``Source``, never the cache's private informer.

``KindSource`` is a kind's shared informer in a cache, looked up only when a handler is
added; ``ChannelSource`` delivers what the application sends as add events, through the
watch's predicates, and counts as synced from the start.
"""

from __future__ import annotations

from kubernetes import client as k8s_client

from cronjob_operator.envtest import wait_for
from cronjob_operator.runtime import metrics, objects
from cronjob_operator.runtime.cache import Cache
from cronjob_operator.runtime.client import RestClient
from cronjob_operator.runtime.controller import (
    Builder,
    ChannelSource,
    Controller,
    ControllerOptions,
    KindSource,
    Predicate,
    Request,
    Result,
    Source,
    for_object,
)
from cronjob_operator.runtime.kinds import CONFIG_MAP, SECRET


class Calls:
    def __init__(self) -> None:
        self.requests: list[Request] = []

    def reconcile(self, request: Request) -> Result:
        self.requests.append(request)
        return Result()


class Events:
    def __init__(self) -> None:
        self.added: list[str] = []

    def on_add(self, obj: objects.Obj) -> None:
        self.added.append(objects.name_of(obj))

    def on_update(self, old: objects.Obj, new: objects.Obj) -> None:
        pass

    def on_delete(self, obj: objects.Obj) -> None:
        pass


def config_map(name: str, **labels: str) -> objects.Obj:
    return objects.freeze({"metadata": {"name": name, "namespace": "ns", "labels": labels}})


def cache() -> Cache:
    return Cache(RestClient(k8s_client.Configuration()))  # never started: no request is sent


def test_a_channel_source_enqueues_what_the_application_sends() -> None:
    calls, channel = Calls(), ChannelSource()
    controller = Controller("channel", calls)
    controller.watch(channel, for_object)
    controller.start()
    try:
        channel.send(config_map("a"))
        wait_for(lambda: calls.requests == [Request("ns", "a")], 5, message="reconciled a")
    finally:
        controller.stop(5)


def test_a_channel_source_passes_its_events_through_the_predicates() -> None:
    calls, channel = Calls(), ChannelSource()
    labelled = Predicate(create=lambda obj: bool(obj["metadata"]["labels"]))
    controller = Controller("filtered", calls)
    controller.watch(channel, for_object, [labelled])
    controller.start()
    try:
        channel.send(config_map("plain"))
        channel.send(config_map("marked", tier="web"))
        wait_for(lambda: calls.requests == [Request("ns", "marked")], 5, message="marked only")
    finally:
        controller.stop(5)


def test_a_channel_source_is_synced_and_reaches_every_handler() -> None:
    channel, first, second = ChannelSource(), Events(), Events()
    assert channel.has_synced
    channel.send(config_map("before"))  # no handler yet: nobody hears it
    channel.add_handler(first)
    channel.add_handler(second)
    channel.send(config_map("after"))
    assert first.added == second.added == ["after"]


def test_a_kind_source_creates_no_informer_until_a_handler_is_added() -> None:
    shared = cache()
    source = KindSource(shared, CONFIG_MAP)
    assert shared._informers == {}
    source.add_handler(Events())
    assert list(shared._informers) == [CONFIG_MAP]
    assert not source.has_synced, "an informer that never listed has not synced"


class Host:
    """The least a builder needs (``ControllerHost``): a cache and a place for the result."""

    def __init__(self) -> None:
        self.cache = cache()
        self.metrics = metrics.Metrics()
        self.controller_options = ControllerOptions()
        self.controllers: list[Controller] = []

    def add_controller(self, controller: Controller) -> None:
        self.controllers.append(controller)


def test_the_builder_watches_through_kind_sources() -> None:
    host = Host()
    Builder(host, "built").for_(CONFIG_MAP).owns(SECRET).complete(Calls())
    [controller] = host.controllers
    sources: list[Source] = controller.sources
    assert [(type(s), s.kind) for s in sources if isinstance(s, KindSource)] == [
        (KindSource, CONFIG_MAP),
        (KindSource, SECRET),
    ]
