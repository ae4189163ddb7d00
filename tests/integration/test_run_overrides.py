"""Run now with overrides (issue 40, item 4) on the local control plane, as a user runs it;
a variable from a Secret's key, named and never read by the operator (issue 47, item 4).

``kubectl cjt run NAME --env ... --image ... -- ARGS`` through kubectl's plugin lookup
on PATH against the test cluster's kubeconfig; Jobs really run under kwok. Nothing
waits on a wall-clock duration: the active run under Forbid lasts an hour and is ended
by deleting it, the event the waiting request is tested against, once the plugin has
said on stderr that its request waits.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from cronjob_operator.api.batch_v1 import RUN_ANNOTATION
from cronjob_operator.api.cronjob_rules import TOKEN_FIELD
from cronjob_operator.api.run_overrides import OVERRIDES_ANNOTATION
from cronjob_operator.controllers import cronjob
from cronjob_operator.envtest import ControlPlane, wait_for
from cronjob_operator.runtime.clock import FakeClock
from cronjob_operator.runtime.manager import Options
from cronjob_operator.runtime.objects import MAX_MESSAGE_LENGTH
from tests.integration.support import RunningManager, apply, install_crds, running_manager
from tests.integration.test_cronjob_controller import World, cronjob_object
from tests.integration.test_cronjob_features import CJT


@pytest.fixture(scope="module", autouse=True)
def crds(control_plane: ControlPlane) -> None:
    install_crds(control_plane)


@pytest.fixture
def operator(control_plane: ControlPlane) -> Iterator[RunningManager]:
    clock = FakeClock()
    setups = {"cronjob": lambda mgr: cronjob.setup(mgr, clock=clock)}
    options = Options(health_probe_bind_address="0")
    with running_manager(control_plane, setups, options=options) as running:
        yield running


@pytest.fixture
def world(control_plane: ControlPlane, namespace: str) -> World:
    return World(control_plane, namespace)


def cjt(world: World, verb: str, *args: str) -> tuple[list[str], dict[str, str]]:
    """The argv and environment of ``kubectl cjt VERB ARGS`` found on PATH, as a user's
    shell runs it, the kubeconfig given before any ``--``."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
    kubectl = str(world.cp.bin_dir / "kubectl")
    return [kubectl, "cjt", verb, "--kubeconfig", str(world.cp.kubeconfig), *args], env


def run_cjt(world: World, verb: str, *args: str) -> subprocess.CompletedProcess[str]:
    argv, env = cjt(world, verb, *args)
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, check=False)


WAITING = "waiting: a job is active and concurrencyPolicy is Forbid"
"""What ``kubectl cjt run`` says on stderr while its request is pending."""


class StreamLines:
    """A stream's lines, read by a thread as they come, so a test can wait for one."""

    def __init__(self, stream: IO[str]) -> None:
        self._lines: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self._lines.append(line)

    def has(self, text: str) -> bool:
        """Whether a line read so far contains ``text``."""
        return any(text in line for line in list(self._lines))

    def text(self) -> str:
        """The lines read so far."""
        return "".join(self._lines)

    def join(self) -> None:
        """Wait until the stream has ended (its process has exited)."""
        self._thread.join(timeout=30)
        assert not self._thread.is_alive(), "the stream did not end"


def container(job: dict[str, object]) -> dict[str, object]:
    """The Job's one container."""
    (only,) = job["spec"]["template"]["spec"]["containers"]  # type: ignore[index]
    return only  # type: ignore[no-any-return]


def history_row(world: World, name: str, job: str) -> list[str]:
    shown = run_cjt(world, "history", name, "-n", world.ns)
    assert shown.returncode == 0, shown.stderr
    header, *rows = shown.stdout.splitlines()
    assert header.split()[-1] == "OVERRIDES"
    (row,) = (row.split() for row in rows if row.split()[1] == job)
    return row


def manual_run(world: World, name: str, *flags: str) -> str:
    """The Job of ``kubectl cjt run NAME FLAGS`` on a new suspended CronJob ``name``."""
    apply(world.cp, cronjob_object(name, world.ns, suspend=True))
    wait_for(lambda: world.condition(name, "Available"), 30, message="first reconcile")
    ran = run_cjt(world, "run", name, "-n", world.ns, *flags)
    assert ran.returncode == 0, ran.stderr
    (printed,) = ran.stdout.splitlines()
    return printed.removeprefix("job.batch/")


def test_run_with_overrides_creates_one_job_with_them_and_history_shows_them(
    operator: RunningManager, world: World
) -> None:
    job_name = manual_run(
        world,
        "ovr",
        "--env",
        "DRY_RUN=1",
        "--env",
        "LEVEL=debug",
        "--image",
        "busybox:1.37",
        "--",
        "echo",
        "hello world",
    )
    assert list(world.jobs()) == [job_name]
    job = world.jobs()[job_name]
    assert container(job)["image"] == "busybox:1.37"
    assert container(job)["args"] == ["echo", "hello world"]
    assert container(job)["env"] == [
        {"name": "DRY_RUN", "value": "1"},
        {"name": "LEVEL", "value": "debug"},
    ]
    recorded = json.loads(job["metadata"]["annotations"][OVERRIDES_ANNOTATION])
    assert recorded == {
        "env": [{"name": "DRY_RUN", "value": "1"}, {"name": "LEVEL", "value": "debug"}],
        "containers": [{"name": "main", "image": "busybox:1.37", "args": ["echo", "hello world"]}],
    }
    wait_for(lambda: world.job_finished(job_name, "Complete"), 60, message="the run completes")
    row = history_row(world, "ovr", job_name)
    assert row[2:4] == ["manual", "Complete"]
    assert row[-1] == "env=DRY_RUN,LEVEL;main:image=busybox:1.37,args"


def test_a_run_naming_a_secrets_key_creates_a_job_with_the_reference_and_no_value(
    operator: RunningManager, world: World
) -> None:
    """``--env-from-secret`` (issue 47, item 4): the Job's container reads the key
    through ``valueFrom``; the annotations hold the names only. No such Secret exists:
    the operator never reads it, so the Job is made all the same (the kubelet would read
    it when the Pod starts)."""
    job_name = manual_run(
        world,
        "sec",
        "--env",
        "DRY_RUN=1",
        "--env-from-secret",
        "TOKEN=db/password",
        "--env-from-configmap",
        "LEVEL=app.config/log.level",
    )
    job = world.jobs()[job_name]
    secret_ref = {"secretKeyRef": {"name": "db", "key": "password"}}
    config_ref = {"configMapKeyRef": {"name": "app.config", "key": "log.level"}}
    env = [
        {"name": "DRY_RUN", "value": "1"},
        {"name": "TOKEN", "valueFrom": secret_ref},
        {"name": "LEVEL", "valueFrom": config_ref},
    ]
    assert container(job)["env"] == env
    assert json.loads(job["metadata"]["annotations"][OVERRIDES_ANNOTATION]) == {"env": env}
    request = world.cp.kubectl_json("get", CJT, "sec", "-n", world.ns)["metadata"]
    assert json.loads(request["annotations"][RUN_ANNOTATION])["overrides"] == {"env": env}
    secrets = world.cp.kubectl("get", "secret", "db", "-n", world.ns, check=False)
    assert secrets.returncode != 0, "no Secret db: nothing needed to read it"
    assert history_row(world, "sec", job_name)[-1] == "env=DRY_RUN,TOKEN,LEVEL"


def test_under_forbid_a_run_with_overrides_waits_for_the_active_run_then_starts(
    operator: RunningManager, world: World
) -> None:
    apply(
        world.cp,
        cronjob_object("fbd", world.ns, suspend=True, run="1h", concurrencyPolicy="Forbid"),
    )
    wait_for(lambda: world.condition("fbd", "Available"), 30, message="first reconcile")
    first = run_cjt(world, "run", "fbd", "-n", world.ns)
    assert first.returncode == 0, first.stderr
    active = first.stdout.strip().removeprefix("job.batch/")

    argv, env = cjt(world, "run", "fbd", "-n", world.ns, "--env", "A=1", "--timeout", "90")
    with subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True
    ) as run:
        try:
            assert run.stderr is not None
            assert run.stdout is not None
            err = StreamLines(run.stderr)
            wait_for(  # the plugin saw the request pending: only then may the run start
                lambda: err.has(WAITING),
                30,
                message="the plugin says the request waits",
                detail=lambda: (err.text(), world.status("fbd")),
            )
            assert list(world.jobs()) == [active], "no second run while one is active"
            world.cp.kubectl("delete", "job", active, "-n", world.ns, check=True)
            run.wait(timeout=90)  # stdout is one line: the pipe cannot fill meanwhile
            out = run.stdout.read()
            err.join()
        finally:
            run.kill()
    assert run.returncode == 0, err.text()
    started = out.strip().removeprefix("job.batch/")
    assert started in world.jobs()
    assert container(world.jobs()[started])["env"] == [{"name": "A", "value": "1"}]
    assert "pendingRunRequest" not in world.status("fbd")


FIELD_REF = {"name": "P", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}


@pytest.mark.parametrize(
    ("overrides", "names"),
    [
        (
            {"containers": [{"name": "nope", "image": "x"}]},
            ["overrides.containers[0].name", "no container 'nope' (it has main)"],
        ),
        (  # the controller checks valueFrom too (the webhook is off here): issue 47
            {"env": [FIELD_REF]},
            ["overrides.env[0].valueFrom.fieldRef: not offered", "use secretKeyRef or"],
        ),
    ],
)
def test_a_bad_request_through_the_api_is_reported_on_the_cronjob(
    operator: RunningManager, world: World, overrides: dict[str, object], names: list[str]
) -> None:
    apply(world.cp, cronjob_object("bad", world.ns, suspend=True))
    wait_for(lambda: world.condition("bad", "Available"), 30, message="first reconcile")
    request = {"token": "t1", "overrides": overrides}
    annotation = f"{RUN_ANNOTATION}={json.dumps(request)}"
    world.cp.kubectl("annotate", CJT, "bad", "-n", world.ns, annotation, check=True)
    wait_for(
        lambda: (world.condition("bad", "Degraded") or {}).get("reason") == "InvalidRunRequest",
        30,
        message="the bad request is reported",
    )
    message = (world.condition("bad", "Degraded") or {})["message"]
    assert message.startswith(f"{TOKEN_FIELD}: {names[0]}")
    assert names[1] in message
    assert world.jobs() == {}

    def reported() -> list[str] | None:
        """The objects the InvalidRunRequest events name, once one is written (the
        recorder writes events apart from the status write)."""
        events = world.cp.kubectl_json(
            "get", "events", "-n", world.ns, "--field-selector", "reason=InvalidRunRequest"
        )["items"]
        return [event["involvedObject"]["name"] for event in events] or None

    assert wait_for(reported, 30, message="the InvalidRunRequest event") == ["bad"]


def test_a_degraded_message_naming_every_container_is_written_clipped(
    operator: RunningManager, world: World
) -> None:
    """Issue 47: the message names every container of the template; 640 names of 63
    characters made 41,808 characters, over the CRD's 32,768 for a condition message, so
    the API server refused every status write of the CronJob. Now it is clipped."""
    body = cronjob_object("many", world.ns, suspend=True)
    pod_spec = body["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    pod_spec["containers"] = [
        {"name": f"c{index:03}-{'x' * 58}", "image": "busybox"} for index in range(640)
    ]
    apply(world.cp, body)
    wait_for(lambda: world.condition("many", "Available"), 60, message="first reconcile")
    request = {"token": "t1", "overrides": {"containers": [{"name": "nope", "image": "x"}]}}
    annotation = f"{RUN_ANNOTATION}={json.dumps(request)}"
    world.cp.kubectl("annotate", CJT, "many", "-n", world.ns, annotation, check=True)
    wait_for(
        lambda: (world.condition("many", "Degraded") or {}).get("reason") == "InvalidRunRequest",
        60,
        message="the bad request is reported: the status write accepted",
    )
    message = (world.condition("many", "Degraded") or {})["message"]
    assert len(message) <= MAX_MESSAGE_LENGTH
    assert message.startswith(f"{TOKEN_FIELD}: overrides.containers[0].name: the job template")
    assert message.endswith(" characters)")
