"""Count what was created, per name, from a watch: evidence that something was made once.

``watching_creations`` lists one kind in one namespace, keeps the list's resourceVersion
(taken before the test makes anything) and watches from it in a thread, recording each
uid it sees per object name. An object created, deleted and created again under the same
name shows two uids however fast that happened: the watch replays every change after the
resourceVersion, in order. ``caught_up`` creates a sentinel object and waits until the
watch delivered it, so every change before it has been counted. A watch that ends early
(a timeout, an expired resourceVersion) fails the test rather than under-count.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from cronjob_operator.envtest import ControlPlane, wait_for
from cronjob_operator.runtime.client import RestClient, load_configuration

WATCH_SECONDS = 900


class Creations:
    """The uids a watch saw, per object name."""

    def __init__(self, rest: RestClient, path: str) -> None:
        self._rest = rest
        self._path = path
        self._lock = threading.Lock()
        self._uids: dict[str, set[str]] = {}
        self._problem: str | None = None
        self._closing = threading.Event()
        version = rest.request("GET", path, params={"limit": 1})["metadata"]["resourceVersion"]
        params = {"resourceVersion": version, "timeoutSeconds": WATCH_SECONDS}
        self._stream = rest.watch(path, params, read_timeout=WATCH_SECONDS + 60)
        self._thread = threading.Thread(target=self._run, name="creations", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for event in self._stream:
                self._note(event)
        except Exception as exc:  # reported by check(): the count would be incomplete
            self._problem = f"the watch of {self._path} broke: {exc}"
            return
        if not self._closing.is_set():
            self._problem = f"the watch of {self._path} ended before the test did"

    def _note(self, event: dict[str, Any]) -> None:
        obj = event.get("object") or {}
        if event.get("type") == "ERROR":
            self._problem = f"the watch of {self._path} failed: {obj.get('message')}"
            return
        metadata = obj.get("metadata") or {}
        with self._lock:
            self._uids.setdefault(str(metadata.get("name")), set()).add(str(metadata.get("uid")))

    def counts(self) -> dict[str, int]:
        """Distinct uids seen per name so far."""
        self.check()
        with self._lock:
            return {name: len(uids) for name, uids in self._uids.items()}

    def seen(self, name: str) -> bool:
        """Whether the watch saw ``name`` (failing if the watch broke)."""
        self.check()
        with self._lock:
            return name in self._uids

    def check(self) -> None:
        assert self._problem is None, self._problem

    def close(self) -> None:
        self._closing.set()
        self._stream.close()
        self._thread.join(30)


@contextlib.contextmanager
def watching_creations(control_plane: ControlPlane, path: str) -> Iterator[Creations]:
    """A ``Creations`` for ``path`` (a collection, e.g. /api/v1/namespaces/ns/configmaps)."""
    rest = RestClient(load_configuration(str(control_plane.kubeconfig)))
    creations = Creations(rest, path)
    try:
        yield creations
    finally:
        creations.close()


def caught_up(creations: Creations, create_sentinel: Callable[[str], None]) -> str:
    """Create a sentinel (``create_sentinel(name)``) and wait until the watch saw it:
    every change made before it is counted. Returns the sentinel's name."""
    name = f"sentinel-{uuid.uuid4().hex[:8]}"
    create_sentinel(name)
    wait_for(
        lambda: creations.seen(name),
        60,
        message=f"the watch delivered {name}",
    )
    return name
