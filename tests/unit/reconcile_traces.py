"""Differential traces of the CronJob reconciler: randomized worlds, every effect recorded.

Why: the reconcile was rebuilt as observe, decide, act (``controllers/cronjob/``) with the
promise that it behaves exactly as before. A seed builds a CronJob (schedule or schedules,
time zone, concurrency and catch-up policy, history limits, deadline, stagger, failure
pause, suspend) and plays a random story on the runtime's fake client: clock steps from
seconds to days, reconciles with and without their follow-up, Jobs finishing or failing,
suspend toggles, run-now and backfill requests, spec edits, lost status writes, API
failures on creates, deletes and live reads. The trace is every write the reconciler
sends (verb, kind, name, subresource and the status it writes), every event, every
result or error and the metrics after each reconcile; its SHA-256 is compared with the
digests recorded from the reconciler before the rebuild
(``tests/unit/reconcile_traces.json``, by ``python -m tests.unit.reconcile_traces
--record``).

    python -m tests.unit.reconcile_traces [--seeds 1000] [--record]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import random
import sys
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cronjob_operator.api.batch_v1 import BACKFILL_ANNOTATION, RUN_ANNOTATION
from cronjob_operator.api.cronjob_rules import manual_job_name
from cronjob_operator.runtime import errors, objects
from cronjob_operator.runtime.controllerutil import rfc3339
from cronjob_operator.runtime.fake import Action
from cronjob_operator.runtime.kinds import JOB
from tests.unit import cronjob_harness

RECORDED = Path(__file__).with_name("reconcile_traces.json")
NAME, NS = "trace", "ns"
START = datetime(2026, 3, 28, 22, 17, tzinfo=UTC)  # a DST change in Europe/Berlin ahead
SCHEDULES = ("*/5 * * * *", "0 * * * *", "30 2 * * *", "*/1 * * * *", "0 9-17 * * 1-5")
ZONES = (None, "Europe/Berlin", "America/New_York")


def _spec(rng: random.Random) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if rng.random() < 0.2:
        spec["schedules"] = rng.sample(SCHEDULES, 2)
    else:
        spec["schedule"] = rng.choice((*SCHEDULES, "bogus") if rng.random() < 0.05 else SCHEDULES)
    choices: dict[str, tuple[Any, ...]] = {
        "timeZone": ZONES,
        "concurrencyPolicy": (None, "Allow", "Forbid", "Replace", "BufferOne"),
        "catchUpPolicy": (None, "Latest", "All"),
        "successfulJobsHistoryLimit": (None, 0, 1, 3),
        "failedJobsHistoryLimit": (None, 0, 1, 3),
        "startingDeadlineSeconds": (None, None, 30, 200, 3600),
        "staggerSeconds": (None, None, 0, 20, 45),
        "suspend": (None, False, True),
    }
    for key, options in choices.items():
        value = rng.choice(options)
        if value is not None:
            spec[key] = value
    if rng.random() < 0.3:
        spec["failurePolicy"] = {"pauseAfterConsecutiveFailures": rng.choice((1, 2, 3, 0))}
    return spec


class _Story:
    """One seed's world and the trace of what the reconciler did in it."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        body = cronjob_harness.cronjob(NAME, NS, created=START, spec=_spec(self.rng))
        self.world = cronjob_harness.Harness(body, start=START, namespace=NS, name=NAME)
        self.now = START
        self.trace: list[Any] = []
        self.tokens: list[str] = []  # the run tokens requested, in order (for ``audit``)
        self.failures: dict[str, errors.ApiError | None] = {"create": None, "delete": None}
        self.world.client.prepend_reactor("create", JOB, lambda _: self._fail("create"))
        self.world.client.prepend_reactor("delete", JOB, lambda _: self._fail("delete"))
        listed = self.world.client.list

        def in_name_order(*args: Any, **kwargs: Any) -> list[objects.Obj]:
            # The fake's index lists in set order, which the hash seed changes per process.
            return sorted(listed(*args, **kwargs), key=objects.name_of)

        self.world.client.list = in_name_order  # type: ignore[method-assign]

    def _fail(self, verb: str) -> errors.ApiError | None:
        return self.failures[verb]

    def play(self, steps: int) -> list[Any]:
        actions: list[Callable[[], None]] = [
            self.reconcile,
            self.reconcile,
            self.reconcile,
            self.reconcile_once,
            self.finish_some,
            self.finish_some,
            self.toggle_suspend,
            self.request_run,
            self.request_backfill,
            self.edit_spec,
            self.lose_status,
            self.inject_failure,
        ]
        for _ in range(steps):
            self.now += self._step()
            action = self.rng.choice(actions)
            self.trace.append(action.__name__)
            action()
        return self.trace

    def _step(self) -> timedelta:
        scale = self.rng.choice((1, 30, 60, 300, 3600, 86400))
        return timedelta(seconds=self.rng.randint(0, scale))

    def _reconcile(self, follow: bool) -> None:
        client, recorder = self.world.client, self.world.recorder
        writes, events = len(client.writes), len(recorder.events)
        try:
            if follow:
                outcome: Any = repr(self.world.reconcile_at(self.now))
            else:
                outcome = repr(self.world.reconcile_once_at(self.now))
        except errors.ApiError as exc:
            outcome = f"raised {type(exc).__name__}: {exc}"
        self.trace.append(
            {
                "writes": [_write(action) for action in client.writes[writes:]],
                "events": [
                    (event.type, event.reason, event.message) for event in recorder.events[events:]
                ],
                "outcome": outcome,
                "metrics": _metrics(self.world),
            }
        )
        self.failures = {"create": None, "delete": None}

    def reconcile(self) -> None:
        self._reconcile(True)

    def reconcile_once(self) -> None:
        self._reconcile(False)

    def finish_some(self) -> None:
        jobs = self.world.jobs()
        for name in sorted(jobs):
            conditions = (jobs[name].get("status") or {}).get("conditions")
            if not conditions and self.rng.random() < 0.6:
                state = "Complete" if self.rng.random() < 0.6 else "Failed"
                self.world.finish(name, state, at=self.now)
                self.trace.append(("finished", name, state))

    def toggle_suspend(self) -> None:
        self.world.edit(
            lambda body: body["spec"].update(suspend=not body["spec"].get("suspend", False))
        )

    def request_run(self) -> None:
        token = f"t{self.rng.randint(0, 3)}"
        self.tokens.append(token)
        self.world.edit(
            lambda body: (
                body["metadata"].setdefault("annotations", {}).update({RUN_ANNOTATION: token})
            )
        )

    def request_backfill(self) -> None:
        if self.rng.random() < 0.2:
            value = None
        else:
            start = self.now - timedelta(minutes=self.rng.choice((10, 70, 300)))
            end = start + timedelta(minutes=self.rng.choice((5, 30, 120)))
            token = f"b{self.rng.randint(0, 2)}"
            value = json.dumps({"token": token, "from": rfc3339(start), "to": rfc3339(end)})

        def change(body: dict[str, Any]) -> None:
            annotations = body["metadata"].setdefault("annotations", {})
            if value is None:
                annotations.pop(BACKFILL_ANNOTATION, None)
            else:
                annotations[BACKFILL_ANNOTATION] = value

        self.world.edit(change)

    def edit_spec(self) -> None:
        fresh = _spec(self.rng)
        key = self.rng.choice(sorted(fresh))
        self.world.edit(lambda body: body["spec"].update({key: fresh[key]}))

    def lose_status(self) -> None:
        """Another writer puts back an older view: lastScheduleTime and active dropped."""

        def change(status: dict[str, Any]) -> None:
            if self.rng.random() < 0.5:
                status.pop("lastScheduleTime", None)
            else:
                status.pop("active", None)

        if self.world.status():
            self.world.edit_status(change)

    def inject_failure(self) -> None:
        verb = self.rng.choice(("create", "delete"))
        code = self.rng.choice((500, 409, 422))
        kind = {500: errors.ServerError, 409: errors.Conflict, 422: errors.Invalid}[code]
        self.failures[verb] = kind({"reason": kind.__name__, "message": f"x {code}"}, code=code)
        self.trace.append(("fail next", verb, code))
        self._reconcile(self.rng.random() < 0.5)


def _write(action: Action) -> Any:
    body = action.body
    if action.subresource == "status" and isinstance(body, dict):
        body = objects.thaw(body.get("status"))
    elif action.verb == "create" and isinstance(body, dict):
        body = {"metadata": objects.thaw(body.get("metadata")), "spec": body.get("spec")}
    return (action.verb, action.kind.plural, action.name, action.subresource, body)


def _metrics(world: cronjob_harness.Harness) -> list[Any]:
    return sorted(
        (sample.name, sorted(sample.labels.items()), sample.value)
        for family in world.registry.collect()
        for sample in family.samples
        if not sample.name.endswith("_created")
    )


def trace(seed: int, steps: int = 40) -> str:
    """The trace of ``seed`` as canonical JSON."""
    return json.dumps(_Story(seed).play(steps), sort_keys=True, default=str)


def digest(seed: int) -> str:
    return hashlib.sha256(trace(seed).encode()).hexdigest()


def audit(seed: int, steps: int = 40) -> list[tuple[str, str]]:
    """The Job names ``seed``'s story created more than once, each with its cause: a run
    token the story set again after another, or a backfill of a time whose Job was gone
    (each a run of its own: docs/cronjob-semantics.md, "The rule"), a status the story
    erased by hand, or a defect."""
    story = _Story(seed)
    story.play(steps)
    twice = [name for name, count in story.world.runs().items() if count > 1]
    actions = {entry for entry in story.trace if isinstance(entry, str)}
    reused = {manual_job_name(NAME, token) for token in _reused(story.tokens)}
    return [(name, _cause(name, actions, reused)) for name in sorted(twice)]


def _reused(tokens: list[str]) -> set[str]:
    """The tokens set again after another one: each such setting is a new request."""
    return {
        token
        for index, token in enumerate(tokens)
        if token in tokens[:index] and tokens[index - 1] != token
    }


def _cause(name: str, actions: set[str], reused: set[str]) -> str:
    if name in reused:
        return "run token re-used"
    if "request_backfill" in actions:
        return "a backfill ran a time whose Job was gone"
    if "lose_status" in actions:
        return "status erased by hand"
    return "defect"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=1000)
    parser.add_argument("--record", action="store_true")
    parser.add_argument("--dump", type=int, help="print one seed's trace")
    parser.add_argument(
        "--audit", action="store_true", help="count the Job names created twice, by cause"
    )
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)  # the reconciler's warnings are in the trace
    if args.audit:
        causes = Counter(cause for seed in range(args.seeds) for _, cause in audit(seed))
        stories = sum(1 for seed in range(args.seeds) if audit(seed))
        print(
            f"{stories} of {args.seeds} stories create a Job name twice; by cause: {dict(causes)}"
        )
        return 1 if causes.get("defect") else 0
    if args.dump is not None:
        print(json.dumps(json.loads(trace(args.dump)), indent=1))
        return 0
    digests = [digest(seed) for seed in range(args.seeds)]
    if args.record:
        RECORDED.write_text(json.dumps(digests, indent=0) + "\n")
        print(f"recorded {len(digests)} traces")
        return 0
    expected = json.loads(RECORDED.read_text())
    differ = [seed for seed, (a, b) in enumerate(zip(digests, expected, strict=False)) if a != b]
    print(f"{len(digests) - len(differ)}/{len(digests)} traces identical; differ: {differ[:20]}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
