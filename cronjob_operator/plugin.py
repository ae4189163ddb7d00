"""``kubectl cjt``: the kubectl plugin for our CronJobs (the ``kubectl-cjt`` console script).

kubectl runs any ``kubectl-<name>`` on PATH as ``kubectl <name>``, passing the arguments
on. The verbs do what the built-in CronJob's users do by hand, and what kubectl cannot do
for a custom resource:

- ``run NAME [--env K=V]... [--image [CONTAINER=]IMAGE]... [-c CONTAINER] [-- ARG...]``:
  ask for a manual run (the run-now annotation, a fresh token, and the overrides of
  that run as ``api.run_overrides`` reads them) and wait until the controller has
  created the Job, then print its name. ``--env`` sets a variable in every container
  (``kubectl set env``'s default), or in ``-c``'s only; ``--env-from-secret
  K=SECRET/KEY`` and ``--env-from-configmap K=CONFIGMAP/KEY`` likewise, to a key the
  kubelet reads (the annotations then hold names, not the value); ``--image`` and the
  arguments after ``--`` (``kubectl run``'s convention) replace those of ``-c``'s
  container, else of the first.
- ``next SCHEDULE [--time-zone Z] [--count N]``: the next times of a schedule, with the
  DST transitions between them marked; no cluster needed, and the same schedule code as
  the controller, so a schedule can be checked before it is applied. ``next NAME``: a
  CronJob's next times that run (after its stagger; inside ``spec.window``, not
  excluded, at most the runs its limit leaves); ``next`` alone (or with ``-A``): each
  CronJob's next scheduled time.
- ``suspend NAME`` / ``resume NAME``: set ``spec.suspend``.
- ``history NAME``: the CronJob's Jobs, newest first, with outcome, duration and the
  overrides of a manual run.
- ``backfill NAME --from T1 --to T2 [--wait]``: ask for every scheduled time in [T1, T2)
  to run once (the backfill annotation, a fresh token), after counting them with the
  controller's schedule code (more than the bound is refused here already);
  ``backfill NAME``: its progress; ``backfill NAME --cancel``: stop it.
- ``groups``: the ConcurrencyGroups (spec.concurrencyGroup), each with its limit, the
  Jobs holding its slots and the runs waiting for one, oldest first.

``--kubeconfig``, ``--context``, ``-n/--namespace`` and ``-A/--all-namespaces`` mean what
they mean to kubectl, before or after the verb. ``-n`` is always the namespace, so the
count of ``next`` is ``--count`` (the issue's ``-n 5`` would clash with it). Errors exit
non-zero with one line on stderr naming what failed and what to do.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from itertools import islice
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar
from zoneinfo import ZoneInfo

from cronjob_operator import schedule as schedules
from cronjob_operator._flags import positive_int
from cronjob_operator.api import cronjob_rules as rules
from cronjob_operator.api import run_overrides as overrides_
from cronjob_operator.api.batch_v1_constants import (
    BACKFILL_ANNOTATION,
    CONCURRENCY_GROUP,
    CRONJOB,
    RUN_ANNOTATION,
)
from cronjob_operator.api.cronjob_rules import (
    INSTANTIATE_ANNOTATION,
    WindowError,
    manual_job_name,
    parse_spec_schedule,
    parse_spec_window,
    stagger_offset,
)
from cronjob_operator.runtime import errors
from cronjob_operator.runtime.controllerutil import parse_time, rfc3339
from cronjob_operator.runtime.kinds import JOB
from cronjob_operator.runtime.objects import Obj

if TYPE_CHECKING:
    from cronjob_operator.runtime.client import LiveReader, Writer

__all__ = ["main"]

PROG = "kubectl cjt"
DEFAULT_COUNT = 5
RUN_WAIT_SECONDS = 60.0

_T = TypeVar("_T")


class PluginError(Exception):
    """One line for the user: what failed and what would fix it."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


# --- arguments ------------------------------------------------------------------------


def _connection_flags(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    """kubectl's flags; in a verb they default to "not given" so the top level's stand."""

    def default(value: Any) -> Any:
        return argparse.SUPPRESS if suppress else value

    parser.add_argument("--kubeconfig", default=default(None), help="path to the kubeconfig")
    parser.add_argument("--context", default=default(None), help="the kubeconfig context")
    parser.add_argument(
        "-n", "--namespace", default=default(None), help="namespace (default: the context's)"
    )
    parser.add_argument(
        "-A",
        "--all-namespaces",
        action="store_true",
        default=default(False),
        help="every namespace (next and history without NAME)",
    )


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description=__doc__.split("\n\n")[0] if __doc__ else None)
    _connection_flags(parser, suppress=False)
    verbs = parser.add_subparsers(dest="verb", required=True, parser_class=_Parser)

    def verb(name: str, help_: str) -> argparse.ArgumentParser:
        sub = verbs.add_parser(name, help=help_, description=help_)
        _connection_flags(sub, suppress=True)
        return sub

    run = verb(
        "run",
        "Start a manual run now, optionally with overrides, and print the Job's name once "
        "it exists. Arguments after -- replace the container's args.",
    )
    run.add_argument("name", metavar="NAME")
    repeatable: tuple[tuple[str, str, Callable[[str], Any], str, str], ...] = (
        (
            "--env",
            "env",
            _env_pair,
            "NAME=VALUE",
            "a variable, in every container (or -c's), its value readable by whoever may "
            "read the CronJob or its Jobs (a secret: --env-from-secret)",
        ),
        (
            "--env-from-secret",
            "env",
            _key_ref_pair(overrides_.KeySource.SECRET),
            "NAME=SECRET/KEY",
            "a variable read by the kubelet from a Secret's key, as --env",
        ),
        (
            "--env-from-configmap",
            "env",
            _key_ref_pair(overrides_.KeySource.CONFIG_MAP),
            "NAME=CONFIGMAP/KEY",
            "a variable read by the kubelet from a ConfigMap's key, as --env",
        ),
        (
            "--image",
            "image",
            _image_pair,
            "[CONTAINER=]IMAGE",
            "CONTAINER's image (default -c's, else the first)",
        ),
    )
    for flag, dest, parse, metavar, help_ in repeatable:
        run.add_argument(
            flag,
            dest=dest,
            action="append",
            default=[],
            type=parse,
            metavar=metavar,
            help=f"{help_}, for this run only; repeatable",
        )
    run.add_argument(
        "-c",
        "--container",
        help="the container --env, --image and the args apply to (default: see each)",
    )
    run.add_argument(
        "--timeout", type=float, default=RUN_WAIT_SECONDS, help="seconds to wait for the Job"
    )
    nxt = verb(
        "next",
        "Print the next times of a schedule (quoted, e.g. '0 9 * * 1-5'; no cluster needed) "
        "or of a CronJob NAME; without an argument, each CronJob's next scheduled time.",
    )
    nxt.add_argument("target", metavar="SCHEDULE|NAME", nargs="?")
    nxt.add_argument("--time-zone", help="IANA time zone of a SCHEDULE (default UTC)")
    nxt.add_argument(
        "--from",
        dest="start",
        type=_instant,
        help="start after this time (RFC 3339, e.g. 2027-03-14T00:00:00Z; default now)",
    )
    nxt.add_argument(
        "--count", type=positive_int, default=DEFAULT_COUNT, help="how many times to print"
    )
    for name, help_ in (
        ("suspend", "Suspend a CronJob: no new scheduled runs start."),
        ("resume", "Resume a suspended CronJob."),
    ):
        verb(name, help_).add_argument("name", metavar="NAME")
    history = verb("history", "List a CronJob's Jobs, newest first, with outcome and duration.")
    history.add_argument("name", metavar="NAME", nargs="?")
    verb("groups", "List the ConcurrencyGroups: limit, slots in use, holders, waiting runs.")
    backfill = verb(
        "backfill",
        "Run every scheduled time in [--from, --to) once; without them, show the progress.",
    )
    backfill.add_argument("name", metavar="NAME")
    backfill.add_argument("--from", dest="start", type=_instant, help="first time (RFC 3339)")
    backfill.add_argument("--to", dest="end", type=_instant, help="end, exclusive (RFC 3339)")
    backfill.add_argument("--cancel", action="store_true", help="stop the running backfill")
    backfill.add_argument(
        "--wait", action="store_true", help="print the progress until it is complete"
    )
    backfill.add_argument(
        "--timeout", type=float, default=600.0, help="seconds --wait waits (default 600)"
    )
    return parser


def _env_pair(text: str) -> tuple[str, str]:
    name, equals, value = text.partition("=")
    if not equals or not name:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=VALUE")
    return name, value


def _key_ref_pair(
    source: overrides_.KeySource,
) -> Callable[[str], tuple[str, overrides_.KeyRef]]:
    """The parser of ``NAME=OBJECT/KEY`` naming a key of a ``source`` object (neither an
    object's name nor a key holds ``/``; each is checked with the request)."""
    metavar = f"NAME={source.kind.upper()}/KEY"

    def parse(text: str) -> tuple[str, overrides_.KeyRef]:
        name, equals, ref = text.partition("=")
        obj, slash, key = ref.partition("/")
        if not (equals and name and slash and obj and key):
            raise argparse.ArgumentTypeError(f"{text!r} is not {metavar}")
        return name, overrides_.KeyRef(source, obj, key)

    return parse


def _image_pair(text: str) -> tuple[str | None, str]:
    """``CONTAINER=IMAGE`` or ``IMAGE`` (an image reference never holds ``=``)."""
    container, equals, image = text.rpartition("=")
    if (equals and not container) or not image:
        raise argparse.ArgumentTypeError(f"{text!r} is not [CONTAINER=]IMAGE")
    return (container if equals else None), image


def _instant(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an RFC 3339 time") from None
    if moment.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{text!r} needs a zone offset or Z")
    return moment.astimezone(UTC)


# --- the cluster ----------------------------------------------------------------------


class Cluster:
    """The API calls the verbs make, with kubectl's view of kubeconfig and namespace.

    They go through the runtime's REST client, the operator's own HTTP stack and error
    model; the ``kubernetes`` package is used only to read the kubeconfig (contexts,
    credentials, exec plugins)."""

    def __init__(self, args: argparse.Namespace) -> None:
        # The client and the kubeconfig reader load only for a verb that needs the
        # cluster: ``--help`` and ``next SCHEDULE`` start without them (bench/plugin_start.py).
        from kubernetes import config as k8s_config

        from cronjob_operator.runtime.client import (
            LiveReader,
            RestClient,
            Writer,
            load_configuration,
        )

        try:
            contexts, active = k8s_config.list_kube_config_contexts(  # type: ignore[no-untyped-call]
                config_file=args.kubeconfig
            )
            if args.context:
                active = next(c for c in contexts if c["name"] == args.context)
            configuration = load_configuration(args.kubeconfig, context=args.context)
        except (k8s_config.ConfigException, OSError, StopIteration) as exc:
            where = args.kubeconfig or "$KUBECONFIG or ~/.kube/config"
            what = f"context {args.context!r} not found" if isinstance(exc, StopIteration) else exc
            raise PluginError(
                f"kubeconfig ({where}): {what}; check --kubeconfig and --context"
            ) from None
        self.namespace: str = args.namespace or (active.get("context") or {}).get(
            "namespace", "default"
        )
        self.all_namespaces: bool = args.all_namespaces
        rest = RestClient(configuration, pool_size=2, user_agent="kubectl-cjt")
        self._reader: LiveReader = LiveReader(rest)
        self._writer: Writer = Writer(rest)

    def cronjob(self, name: str) -> Obj:
        return _call(
            lambda: self._reader.get(CRONJOB, name, self.namespace),
            f"cronjob {self.namespace}/{name}",
        )

    def cronjobs(self) -> list[Obj]:
        namespace = None if self.all_namespaces else self.namespace
        return _call(
            lambda: self._reader.list(CRONJOB, namespace=namespace),
            f"cronjobs in {namespace or 'all namespaces'}",
        )

    def patch_cronjob(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        return _call(
            lambda: self._writer.patch(CRONJOB, name, patch, namespace=self.namespace),
            f"cronjob {self.namespace}/{name}",
        )

    def groups(self) -> list[Obj]:
        namespace = None if self.all_namespaces else self.namespace
        return _call(
            lambda: self._reader.list(CONCURRENCY_GROUP, namespace=namespace),
            f"concurrencygroups in {namespace or 'all namespaces'}",
        )

    def jobs(self, namespace: str | None) -> list[Obj]:
        return _call(
            lambda: self._reader.list(JOB, namespace=namespace),
            f"jobs in {namespace or 'all namespaces'}",
        )


def _call(fn: Callable[[], _T], what: str) -> _T:
    try:
        return fn()
    except errors.ApiError as exc:
        raise PluginError(f"{what}: {exc.message}") from None
    except errors.TransportError as exc:
        raise PluginError(f"{what}: cannot reach the API server: {exc}") from None


# --- verbs ----------------------------------------------------------------------------


def run(args: argparse.Namespace, out: Callable[[str], None]) -> None:
    cluster = Cluster(args)
    item = cluster.cronjob(args.name)  # a clear NotFound before anything is written
    token = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    job_spec = ((item.get("spec") or {}).get("jobTemplate") or {}).get("spec") or {}
    overrides = requested_overrides(args, job_spec)
    value = token if overrides is None else overrides_.request_json(token, overrides)
    problem = overrides_.request_problem(value, job_spec)
    if problem is not None:
        raise PluginError(f"cronjob {cluster.namespace}/{args.name}: {problem}")
    cluster.patch_cronjob(args.name, {"metadata": {"annotations": {RUN_ANNOTATION: value}}})
    job = manual_job_name(args.name, token)
    deadline = time.monotonic() + args.timeout
    pending_said = False
    while time.monotonic() < deadline:
        status = cluster.cronjob(args.name).get("status") or {}
        if status.get("lastHandledRunRequest") == token:
            out(f"job.batch/{job}")
            return
        if status.get("pendingRunRequest") == token and not pending_said:
            print(
                f"{PROG}: waiting: a job is active and concurrencyPolicy is Forbid",
                file=sys.stderr,
            )
            pending_said = True
        time.sleep(0.5)
    raise PluginError(
        f"cronjob {cluster.namespace}/{args.name}: no Job after {args.timeout:g}s (is the "
        f"operator running? kubectl describe cronjobs.{CRONJOB.group} {args.name})"
    )


def requested_overrides(
    args: argparse.Namespace, job_spec: Mapping[str, Any]
) -> overrides_.Overrides | None:
    """The overrides ``run``'s flags ask for (None: none), every container named: the
    request's JSON names them, so ``-c``'s or the template's first is resolved here."""
    command: list[str] | None = args.command
    if not (args.env or args.image or command is not None or args.container):
        return None
    containers = ((job_spec.get("template") or {}).get("spec") or {}).get("containers") or ()
    target = args.container or (containers[0].get("name") if containers else None)
    if target is None:
        raise PluginError(
            f"cronjob {args.name}: spec.jobTemplate.spec.template.spec.containers is empty, "
            "so there is no container to override; add one to the template"
        )
    images = {container or target: image for container, image in args.image}
    names = [*images, *([target] if args.container or command is not None else [])]
    env = tuple(args.env)
    return overrides_.Overrides(
        env=() if args.container else env,
        containers=tuple(
            overrides_.ContainerOverride(
                name=name,
                image=images.get(name),
                args=None if command is None or name != target else tuple(command),
                env=env if args.container and name == target else (),
            )
            for name in dict.fromkeys(names)
        ),
    )


def set_suspend(args: argparse.Namespace, out: Callable[[str], None], *, suspend: bool) -> None:
    cluster = Cluster(args)
    cluster.cronjob(args.name)
    cluster.patch_cronjob(args.name, {"spec": {"suspend": suspend}})
    out(f"cronjobs.{CRONJOB.group}/{args.name} {'suspended' if suspend else 'resumed'}")


def _looks_like_schedule(text: str) -> bool:
    return " " in text.strip() or text.startswith("@")


def _parse(expression: str, zone: str | None) -> schedules.Schedule:
    try:
        return schedules.parse_schedule(expression, zone)
    except schedules.ScheduleError as exc:
        raise PluginError(str(exc)) from None


def _parse_spec(spec: Mapping[str, Any]) -> schedules.AnySchedule:
    try:
        return parse_spec_schedule(spec)
    except schedules.ScheduleError as exc:
        raise PluginError(str(exc)) from None


def _schedule_text(spec: Mapping[str, Any]) -> str:
    """spec.schedule, or spec.schedules joined by "; "."""
    many = spec.get("schedules")
    if spec.get("schedule") is None and isinstance(many, (list, tuple)):
        return "; ".join(str(entry) for entry in many)
    return str(spec.get("schedule"))


def next_times(
    schedule: schedules.AnySchedule, after: datetime, offset: timedelta = timedelta(0)
) -> Iterator[datetime]:
    """The schedule's times after ``after`` (``@every`` anchored there), plus ``offset``."""
    return (t + offset for t in schedule.times_after(after - offset))


def format_times(times: Sequence[datetime], zone: ZoneInfo) -> list[str]:
    """One line per time: local, UTC, and a mark where the UTC offset changed (DST)."""
    lines = []
    previous: timedelta | None = None
    for moment in times:
        local = moment.astimezone(zone)
        offset = local.utcoffset()
        mark = ""
        if previous is not None and offset != previous:
            mark = f"  <- DST: UTC{_hours(previous)} -> UTC{_hours(offset)}"
        lines.append(f"{local.isoformat()}  ({moment.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}){mark}")
        previous = offset
    return lines


def _hours(offset: timedelta | None) -> str:
    minutes = int((offset or timedelta(0)).total_seconds() // 60)
    sign = "+" if minutes >= 0 else "-"
    return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def next_verb(args: argparse.Namespace, out: Callable[[str], None]) -> None:
    now = args.start or datetime.now(UTC)
    target = args.target
    if target is not None and _looks_like_schedule(target):
        schedule = _parse(target, args.time_zone)
        for line in format_times(
            list(islice(next_times(schedule, now), args.count)), schedule.zone
        ):
            out(line)
        return
    if args.time_zone:
        raise PluginError("--time-zone applies to a SCHEDULE; a CronJob NAME has its own")
    cluster = Cluster(args)
    if target is None:
        from cronjob_operator.runtime.sharding import SHARD_LABEL  # it loads the manager

        rows = [("NAMESPACE", "NAME", "NEXT SCHEDULE", "SCHEDULE", "SHARD")]
        for item in cluster.cronjobs():
            meta, status = item["metadata"], item.get("status") or {}
            spec = item.get("spec") or {}
            rows.append(
                (
                    meta["namespace"],
                    meta["name"],
                    status.get("nextScheduleTime") or "<none>",
                    _schedule_text(spec),
                    (meta.get("labels") or {}).get(SHARD_LABEL) or "<none>",  # docs/sharding.md
                )
            )
        for line in _table(rows):
            out(line)
        return
    if cluster.all_namespaces:
        raise PluginError("a CronJob NAME needs one namespace: use -n, not -A")
    item = cluster.cronjob(target)
    spec = item.get("spec") or {}
    spec_schedule = _parse_spec(spec)
    offset = stagger_offset(
        item["metadata"]["namespace"], target, int(spec.get("staggerSeconds") or 0)
    )
    if spec.get("suspend"):
        out("# suspended: these times will not run until resumed")
    times = list(islice(_runnable_times(item, spec_schedule, now, offset), args.count))
    for line in format_times(times, spec_schedule.zone):
        out(line)


def _runnable_times(
    item: Obj, schedule: schedules.AnySchedule, now: datetime, offset: timedelta
) -> Iterator[datetime]:
    """A CronJob's next times that run, as the controller decides: inside spec.window,
    not excluded by spec.exclusions, no more than status.scheduledRuns.remaining."""
    spec = item.get("spec") or {}
    try:
        window = parse_spec_window(spec)
    except WindowError as exc:
        raise PluginError(str(exc)) from None
    times = (
        next_times(schedule, now, offset)
        if window is None
        else (t + offset for t in window.times_after(schedule, now - offset))
    )
    remaining = ((item.get("status") or {}).get("scheduledRuns") or {}).get("remaining")
    if spec.get("maxScheduledRuns") and isinstance(remaining, int):
        return islice(times, remaining)
    return times


def history(args: argparse.Namespace, out: Callable[[str], None]) -> None:
    cluster = Cluster(args)
    if args.name is not None and cluster.all_namespaces:
        raise PluginError("a CronJob NAME needs one namespace: use -n, not -A")
    if args.name is not None:
        owners = {cluster.cronjob(args.name)["metadata"]["uid"]}
    else:
        owners = {c["metadata"]["uid"] for c in cluster.cronjobs()}
    namespace = None if cluster.all_namespaces else cluster.namespace
    jobs = [job for job in cluster.jobs(namespace) if _owner_uid(job) in owners]
    jobs.sort(key=lambda job: job["metadata"].get("creationTimestamp") or "", reverse=True)
    rows = [("NAMESPACE", "JOB", "KIND", "OUTCOME", "STARTED", "DURATION", "OVERRIDES")]
    now = datetime.now(UTC)
    for job in jobs:
        meta = job["metadata"]
        outcome, ended = _outcome(job)
        started = parse_time((job.get("status") or {}).get("startTime"))
        rows.append(
            (
                meta["namespace"],
                meta["name"],
                _kind(meta.get("annotations") or {}),
                outcome,
                meta.get("creationTimestamp") or "",
                _duration(started, ended or now) if started else "-",
                _overrides_shown(meta.get("annotations") or {}),
            )
        )
    if len(rows) == 1:
        out("No jobs found.")
        return
    for line in _table(rows):
        out(line)


def groups(args: argparse.Namespace, out: Callable[[str], None]) -> None:
    rows = [("NAMESPACE", "GROUP", "LIMIT", "IN USE", "HOLDERS", "WAITING")]
    for group in Cluster(args).groups():
        meta, status = group["metadata"], group.get("status") or {}
        holders = [str(holder.get("job")) for holder in status.get("holders") or ()]
        waiting = [  # in the order the free slots go (controllers/cronjob/groups.py)
            (scheduled, name)
            for scheduled, _joined, name in sorted(
                (str(w.get("scheduledTime")), str(w.get("seenAt")), str(w.get("cronJob")))
                for w in status.get("waiting") or ()
            )
        ]
        rows.append(
            (
                meta["namespace"],
                meta["name"],
                str((group.get("spec") or {}).get("limit", "")),
                str(len(holders)),
                ",".join(holders) or "-",
                ",".join(f"{name}@{scheduled}" for scheduled, name in waiting) or "-",
            )
        )
    if len(rows) == 1:
        out("No concurrency groups found.")
        return
    for line in _table(rows):
        out(line)


def _kind(annotations: Mapping[str, Any]) -> str:
    """manual (run now), backfill, or scheduled."""
    if annotations.get(INSTANTIATE_ANNOTATION) == "manual":
        return "manual"
    if rules.BACKFILL_TOKEN_ANNOTATION in annotations:
        return "backfill"
    return "scheduled"


def _overrides_shown(annotations: Mapping[str, Any]) -> str:
    """A manual run's overrides in one table cell (``-``: none); the whole JSON is the
    Job's annotation ``OVERRIDES_ANNOTATION``."""
    raw = annotations.get(overrides_.OVERRIDES_ANNOTATION)
    parsed = overrides_.parse_overrides_json(raw) if isinstance(raw, str) else None
    return "-" if parsed is None else overrides_.overrides_summary(parsed)


def _owner_uid(job: Obj) -> str | None:
    for ref in job["metadata"].get("ownerReferences") or ():
        if ref.get("controller") and ref.get("kind") == CRONJOB.kind:
            return str(ref.get("uid"))
    return None


def _outcome(job: Obj) -> tuple[str, datetime | None]:
    for condition in (job.get("status") or {}).get("conditions") or ():
        if condition.get("type") in {"Complete", "Failed"} and condition.get("status") == "True":
            return str(condition["type"]), parse_time(condition.get("lastTransitionTime"))
    return "Running", None


def _duration(start: datetime, end: datetime) -> str:
    seconds = max(0, int((end - start).total_seconds()))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m{seconds % 60}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60}m"


def _table(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "   ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


def backfill(args: argparse.Namespace, out: Callable[[str], None]) -> None:
    cluster = Cluster(args)
    item = cluster.cronjob(args.name)
    if args.cancel:
        annotations = {BACKFILL_ANNOTATION: None}
        cluster.patch_cronjob(args.name, {"metadata": {"annotations": annotations}})
        out(f"cronjobs.{CRONJOB.group}/{args.name} backfill cancelled")
        return
    if (args.start is None) != (args.end is None):
        raise PluginError("--from and --to go together")
    if args.start is None:
        out(_progress(item.get("status") or {}))
        return
    token = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    raw = json.dumps({"token": token, "from": rfc3339(args.start), "to": rfc3339(args.end)})
    schedule = _parse_spec(item.get("spec") or {})
    problem = rules.request_problem(raw, schedule)
    if problem is not None:
        raise PluginError(f"cronjob {cluster.namespace}/{args.name}: {problem}")
    request = rules.Request(token, args.start, args.end)
    count = len(rules.times_of(schedule, request))
    cluster.patch_cronjob(args.name, {"metadata": {"annotations": {BACKFILL_ANNOTATION: raw}}})
    span = f"[{rfc3339(args.start)}, {rfc3339(args.end)})"
    out(f"backfill {token}: {count} scheduled time(s) in {span}")
    if args.wait:
        _wait_for_backfill(cluster, args, token, out)


def _progress(status: Mapping[str, Any]) -> str:
    progress = status.get("backfill")
    if not progress:
        return "no backfill"
    return (
        f"backfill {progress.get('token')}: {progress.get('state')}, "
        f"{progress.get('done')}/{progress.get('requested')} done"
        + (f", next {progress['next']}" if progress.get("next") else "")
        + f" ([{progress.get('from')}, {progress.get('to')}))"
    )


def _wait_for_backfill(
    cluster: Cluster, args: argparse.Namespace, token: str, out: Callable[[str], None]
) -> None:
    deadline = time.monotonic() + args.timeout
    said = ""
    while time.monotonic() < deadline:
        status = cluster.cronjob(args.name).get("status") or {}
        progress = status.get("backfill") or {}
        if progress.get("token") == token:
            line = _progress(status)
            if line != said:
                out(line)
                said = line
            if progress.get("state") != "Running":
                return
        time.sleep(0.5)
    raise PluginError(
        f"cronjob {cluster.namespace}/{args.name}: backfill not done after {args.timeout:g}s"
    )


# --- entry point ----------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Run one verb; 0 on success, 1 with one line on stderr on error, 2 on bad usage."""
    argv = list(sys.argv[1:] if argv is None else argv)
    command = None
    if "--" in argv:  # kubectl's convention: what follows is the container's args
        command = argv[argv.index("--") + 1 :]
        argv = argv[: argv.index("--")]
    parser = _parser()
    args = parser.parse_args(argv)
    if command is not None and args.verb != "run":
        parser.error(f"arguments after -- are for run, not {args.verb}")
    args.command = command

    def out(line: str) -> None:
        print(line, flush=True)

    verbs: dict[str, Callable[[argparse.Namespace, Callable[[str], None]], None]] = {
        "run": run,
        "next": next_verb,
        "suspend": lambda a, o: set_suspend(a, o, suspend=True),
        "resume": lambda a, o: set_suspend(a, o, suspend=False),
        "history": history,
        "backfill": backfill,
        "groups": groups,
    }
    try:
        verbs[args.verb](args, out)
    except PluginError as exc:
        print(f"{PROG} {args.verb}: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
