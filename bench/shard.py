"""Sharding: N CronJobs x M Jobs on 1 replica (unsharded), then 2 and 3 sharded replicas.

One control plane (no Job controller: the Jobs are stored, never run; bench/_cluster.py)
holds N CronJobs that never fire and M suspended Jobs owned by each. For each replica
count, every CronJob's status is emptied, then that many real ``cronjob-operator run``
processes start (``--leader-elect``, and ``--sharded`` above 1 replica; 4 s leases, or
the defaults with ``--default-leases``).
Reported per replica count:

* the time from the start of the processes (interpreter start included) until every
  CronJob's status is correct (M active Jobs and an Available condition) and, sharded,
  every CronJob is labelled with a running member and not draining; looked at once a
  second in the bench's own watch of the CronJobs (``CronJobView``). With sharding
  this includes assigning every CronJob (the members are new processes, so every
  CronJob moves: one label write each; the Jobs carry their CronJob's bucket from
  creation, as a sharded member makes them, so none is written) and each member's
  sync of its buckets' Jobs;
* each replica's RSS (VmRSS) and CPU seconds once the statuses are correct, its share
  of the CronJobs (its shard label), and which one leads (it also runs the assigner);
* a burst (unless ``--no-burst``): every CronJob's schedule is set to one minute a little
  ahead (``M H * * *``, UTC); once every status names that minute as its next run, a
  watch records each Job created for it. Reported: the creation p99 and the time until
  the last Job (``creationTimestamp`` minus the scheduled minute), each replica's CPU
  from before the minute until the last Job, and the bound no controller can beat: N
  divided by the Job creates per second of a bare client (16 threads, no limit),
  measured in the same run after the rows. The schedule is set back and the minute's
  Jobs deleted (background propagation) and gone before the next row;
* with 3 replicas, the rebalance: a member that is not the leader is SIGKILLed and the
  time until no CronJob is labelled with it any more is measured;
* the fixed cost: before the population, the RSS of one replica with nothing to cache
  (once its controller has started, so its caches have synced). Whatever the number of
  replicas, each holds at least that, so an even split over N can reach at best
  ``(fixed + (one replica - fixed) / N) / one replica``, printed as the floor of each
  row's RSS ratio.

    python -m bench.shard [--cronjobs 2000] [--jobs-per-cronjob 5] [--replicas 1,2,3]
                          [--no-burst]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import _cluster, _common
from bench._runner import cpu_seconds, rss_kb
from bench.skew import JobWatcher, bare_create_rate
from cronjob_operator.api.batch_v1 import CRONJOB
from cronjob_operator.cli import DEFAULT_LEADER_ELECTION_ID
from cronjob_operator.envtest import ControlPlane, wait_for
from cronjob_operator.runtime import errors
from cronjob_operator.runtime.cache import Informer
from cronjob_operator.runtime.client import LiveReader, Propagation, RestClient, Writer
from cronjob_operator.runtime.kinds import JOB
from cronjob_operator.runtime.leaderelection import LeaderElectionConfig
from cronjob_operator.runtime.sharding import DRAIN_LABEL, SHARD_LABEL

LEASE_NAMESPACE = "bench-leases"
BURST_LEAD = 20.0
"""Seconds from every status naming the burst minute to that minute, at least."""
JOB_GONE_TIMEOUT = 120.0
"""Seconds a deleted Job of the burst may take to be gone (none has a finalizer)."""
STATUS_RATE = 50.0
"""Status writes per second the lead time assumes: after the schedule changes, every
CronJob's status must name the burst minute before it comes (one write each). The 2
cores here took 95 per second for one replica at 2,000 CronJobs; 20,000 on the previous
guess of 200 per second ran out of lead."""


@dataclass(frozen=True)
class Leases:
    """The lease timings the replicas run with, s."""

    duration: float
    renew: float
    retry: float

    def flags(self) -> list[str]:
        return [
            f"--leader-elect-lease-duration={self.duration:g}",
            f"--leader-elect-renew-deadline={self.renew:g}",
            f"--leader-elect-retry-period={self.retry:g}",
        ]

    def __str__(self) -> str:
        return f"{self.duration:g} s / {self.renew:g} s / {self.retry:g} s"


FAST_LEASES = Leases(duration=4, renew=3, retry=0.5)
"""The leases of every row unless ``--default-leases``: a quick rebalance. At 20,000
CronJobs the burst kept the API server of 2 cores so busy that both members of the
2-replica row missed the 3 s renew deadline of their shard Leases and stopped (as a
lost Lease must stop them); the defaults give 10 s."""
_DEFAULT = LeaderElectionConfig(name="bench", namespace=LEASE_NAMESPACE, identity="bench")
DEFAULT_LEASES = Leases(_DEFAULT.lease_duration, _DEFAULT.renew_deadline, _DEFAULT.retry_period)
"""The CLI's defaults (the runtime's, as controller-runtime's)."""


@dataclass
class Replica:
    """One operator process and its JSON log."""

    process: subprocess.Popen[bytes]
    log: Path

    def lines(self) -> list[dict[str, Any]]:
        entries = []
        for text in self.log.read_text(errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                entries.append(json.loads(text))
        return entries

    def member(self) -> str | None:
        for entry in self.lines():
            if entry.get("msg") == "joined shard group":
                return str(entry["shard"])
        return None

    def leads(self) -> bool:
        prefix = f"successfully acquired lease {LEASE_NAMESPACE}/{DEFAULT_LEADER_ELECTION_ID} "
        return any(str(entry.get("msg", "")).startswith(prefix) for entry in self.lines())


@contextlib.contextmanager
def replicas(
    plane: ControlPlane, count: int, directory: Path, *, sharded: bool, leases: Leases
) -> Iterator[list[Replica]]:
    """``count`` operator processes for the block; SIGTERMed (then killed) after it."""
    started: list[Replica] = []
    try:
        for index in range(count):
            log = directory / f"replicas{count}-{index}.log"
            argv = [
                sys.executable,
                "-m",
                "cronjob_operator",
                "run",
                f"--kubeconfig={plane.kubeconfig}",
                "--no-configdeployment-controller",
                "--webhook-port=0",
                "--health-probe-bind-address=0",
                "--metrics-bind-address=0",
                "--log-format=json",
                "--leader-elect",
                f"--leader-election-namespace={LEASE_NAMESPACE}",
                *leases.flags(),
                *(["--sharded"] if sharded else []),
            ]
            with log.open("wb") as out:
                process = subprocess.Popen(
                    argv, env=_common.subprocess_env(), stdout=out, stderr=subprocess.STDOUT
                )
            started.append(Replica(process, log))
        yield started
    finally:
        for replica in started:
            if replica.process.poll() is None:
                replica.process.send_signal(signal.SIGTERM)
        for replica in started:
            try:
                replica.process.wait(60)
            except subprocess.TimeoutExpired:
                replica.process.kill()
                replica.process.wait()


def still_running(running: Sequence[Replica]) -> bool:
    """True, or raise when a replica has exited: nothing restarts it, so a wait on its
    work would only run out its timeout."""
    for replica in running:
        code = replica.process.poll()
        if code is not None:
            raise RuntimeError(f"a replica exited with {code}; its log: {replica.log}")
    return True


def correct(cronjob: dict[str, Any], jobs: int) -> bool:
    status = cronjob.get("status") or {}
    available = any(c.get("type") == "Available" for c in status.get("conditions") or ())
    return available and len(status.get("active") or ()) == jobs


class CronJobView:
    """Every CronJob as the bench sees it: an informer's store (one watch).

    The waits poll it once a second, which costs the API server nothing. Each poll used
    to be a LIST: at 20,000 CronJobs 40 pages of 500, about 10 s of the API server's
    time, back to back for the whole row, so the bench took about one of the 2 cores
    from the replicas it measured, and the longer a row ran, the more it took.
    """

    def __init__(self, rest: RestClient) -> None:
        self._informer = Informer(rest, CRONJOB)

    def __enter__(self) -> CronJobView:
        self._informer.start()
        if not self._informer.wait_for_sync(300):
            raise RuntimeError(f"the bench's CronJob informer did not sync: {self._informer}")
        return self

    def __exit__(self, *exc: object) -> None:
        self._informer.stop()

    def items(self) -> list[dict[str, Any]]:
        return [dict(item) for item in self._informer.store.list()]


def placed(cronjob: dict[str, Any], members: set[str | None]) -> bool:
    """Labelled with one of the running ``members`` and not being drained."""
    labels = cronjob["metadata"].get("labels") or {}
    return labels.get(SHARD_LABEL) in members - {None} and DRAIN_LABEL not in labels


def settled(view: CronJobView, running: Sequence[Replica], jobs: int, *, sharded: bool) -> bool:
    """Every status correct and, sharded, every CronJob placed on a running member. The
    members are read from the logs once per poll: once per CronJob, 20,000 CronJobs
    parsed 20,000-line logs for minutes per poll."""
    still_running(running)
    members = {replica.member() for replica in running} if sharded else set()
    return all(
        correct(item, jobs) and (not sharded or placed(item, members)) for item in view.items()
    )


@dataclass
class Burst:
    """One minute's runs of every CronJob: when their Jobs were created, and the CPU."""

    created: list[float]
    """Each Job's ``creationTimestamp`` minus the scheduled minute, s."""
    expected: int
    cpu: list[float]
    """Each replica's CPU s from before the minute until the last Job."""

    @property
    def p50(self) -> float:
        return _cluster.percentile(self.created, 0.5)

    @property
    def p99(self) -> float:
        return _cluster.percentile(self.created, 0.99)

    @property
    def last(self) -> float:
        return max(self.created, default=0.0)


@dataclass
class Row:
    replicas: int
    sharded: bool
    seconds: float
    rss_mib: list[float]
    cpu: list[float]
    shares: list[int]
    leader: list[bool]
    burst: Burst | None = None


def burst(
    rest: RestClient,
    view: CronJobView,
    population: _cluster.Population,
    running: Sequence[Replica],
    timeout: float,
) -> Burst:
    """Make every CronJob due in one minute; when was each Job of that minute created."""
    writer = Writer(rest)
    keys = population.cronjobs
    # The spec writes themselves take a while at 20,000 (16 threads, about 300 a second
    # here): the status writes' lead counts from their end.
    spec_seconds = len(keys) / 300
    lead = BURST_LEAD + len(keys) / STATUS_RATE
    target = (int(time.time() + spec_seconds + lead) // 60 + 1) * 60
    minute = time.gmtime(target)
    spec = {"schedule": f"{minute.tm_min} {minute.tm_hour} * * *", "timeZone": "Etc/UTC"}
    _set_spec(writer, keys, spec)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", minute)
    wait_for(
        lambda: (
            still_running(running)
            and all(
                (item.get("status") or {}).get("nextScheduleTime") == stamp for item in view.items()
            )
        ),
        max(1.0, target - time.time() - 2),
        interval=1.0,
        message="every status names the burst minute before it comes",
    )
    watcher = JobWatcher(rest)
    watcher.start()
    before = [cpu_seconds(r.process.pid) for r in running]
    suffix = f"-{target}"
    wait_for(
        lambda: (
            still_running(running)
            and sum(s.name.endswith(suffix) for s in list(watcher.seen)) >= len(keys)
        ),
        target - time.time() + timeout,
        interval=0.2,
        message="a Job of the burst minute for every CronJob",
    )
    cpu = [cpu_seconds(r.process.pid) - b for r, b in zip(running, before, strict=True)]
    watcher.stop()
    created = [s.created - target for s in watcher.seen if s.name.endswith(suffix)]
    _set_spec(writer, keys, {"schedule": _cluster.NEVER, "timeZone": None})
    reader = LiveReader(rest)
    _cluster.bulk(lambda key: _delete_job(writer, reader, key, f"{key[1]}{suffix}"), keys)
    return Burst(created=created, expected=len(keys), cpu=cpu)


def _set_spec(writer: Writer, keys: Sequence[tuple[str, str]], spec: dict[str, Any]) -> None:
    _cluster.bulk(lambda key: writer.patch(CRONJOB, key[1], {"spec": spec}, namespace=key[0]), keys)


def _delete_job(writer: Writer, reader: LiveReader, key: tuple[str, str], name: str) -> None:
    """Delete a Job of the burst and return once it is gone.

    Background propagation: a batch/v1 Job deleted with its default (orphan) keeps an
    orphan finalizer until the garbage collector removes it, about 20 a second here.
    20,000 such Jobs were still terminating 10 minutes into the next row, and each
    terminating Job kept its CronJob's status from being correct (one active Job too
    many), so that row's cold start measured the garbage collector.
    """
    with contextlib.suppress(errors.NotFound):
        writer.delete(JOB, name, namespace=key[0], propagation=Propagation.BACKGROUND)
    wait_for(
        lambda: _gone(reader, name, key[0]),
        JOB_GONE_TIMEOUT,
        interval=0.5,
        message=f"Job {key[0]}/{name} deleted",
    )


def _gone(reader: LiveReader, name: str, namespace: str) -> bool:
    try:
        reader.get(JOB, name, namespace)
    except errors.NotFound:
        return True
    return False


def measure(
    plane: ControlPlane,
    view: CronJobView,
    population: _cluster.Population,
    *,
    count: int,
    jobs: int,
    directory: Path,
    timeout: float,
    with_burst: bool,
    leases: Leases,
) -> tuple[Row, float | None]:
    """One replica count: start, wait for correct statuses, read RSS and CPU, rebalance."""
    _cluster.clear_statuses(_cluster.rest_client(plane), population.cronjobs)
    wait_for(
        lambda: not any(correct(item, jobs) for item in view.items()),
        timeout,
        interval=1.0,
        message="the bench's view shows every status emptied",
    )
    sharded = count > 1
    with replicas(plane, count, directory, sharded=sharded, leases=leases) as running:
        began = time.monotonic()
        wait_for(
            lambda: settled(view, running, jobs, sharded=sharded),
            timeout,
            interval=1.0,
            message=f"every status correct with {count} replicas",
        )
        seconds = time.monotonic() - began
        shares = Counter(
            (item["metadata"].get("labels") or {}).get(SHARD_LABEL) for item in view.items()
        )
        row = Row(
            replicas=count,
            sharded=sharded,
            seconds=seconds,
            rss_mib=[rss_kb(r.process.pid) / 1024 for r in running],
            cpu=[cpu_seconds(r.process.pid) for r in running],
            shares=[shares[r.member()] if sharded else sum(shares.values()) for r in running],
            leader=[r.leads() for r in running],
        )
        if with_burst:
            rest = _cluster.rest_client(plane)
            row.burst = burst(rest, view, population, running, timeout)
        rebalance = rebalance_seconds(view, running, timeout) if count == 3 else None
    return row, rebalance


def idle_rss_mib(plane: ControlPlane, directory: Path, leases: Leases, timeout: float) -> float:
    """The RSS of one replica with nothing to cache, once its controller has started
    (the manager starts it after the caches synced)."""
    (directory / "idle").mkdir(exist_ok=True)
    with replicas(plane, 1, directory / "idle", sharded=False, leases=leases) as running:
        (replica,) = running
        wait_for(
            lambda: (
                still_running(running)
                and any(e.get("msg") == "controller started" for e in replica.lines())
            ),
            timeout,
            interval=0.2,
            message="an idle replica's controller started",
        )
        return rss_kb(replica.process.pid) / 1024


def split_floor(row: Row, base: float, idle: float) -> float:
    """The least RSS ratio an even split over the row's replicas can reach (module doc)."""
    return (idle + (base - idle) / row.replicas) / base


def rebalance_seconds(view: CronJobView, running: list[Replica], timeout: float) -> float:
    """SIGKILL a member that does not lead; seconds until no CronJob names it."""
    victim = next(replica for replica in running if not replica.leads())
    gone = victim.member()
    victim.process.send_signal(signal.SIGKILL)
    began = time.monotonic()
    wait_for(
        lambda: all(
            (item["metadata"].get("labels") or {}).get(SHARD_LABEL) not in (gone, None)
            for item in view.items()
        ),
        timeout,
        interval=0.2,
        message="the killed member's CronJobs on the others",
    )
    return time.monotonic() - began


def summary(row: Row, rebalance: float | None) -> str:
    """One row's figures on one line, printed as soon as it is measured, so that a later
    row's failure does not lose them."""
    figures: dict[str, Any] = {
        "seconds": round(row.seconds, 1),
        "owned": row.shares,
        "leader": row.leader,
        "rss_mib": [round(rss, 1) for rss in row.rss_mib],
        "cpu_s": [round(cpu, 1) for cpu in row.cpu],
    }
    if row.burst is not None:
        figures["burst"] = {
            "created": len(row.burst.created),
            "due": row.burst.expected,
            "p50_s": row.burst.p50,
            "p99_s": row.burst.p99,
            "last_s": row.burst.last,
            "cpu_s": [round(cpu, 1) for cpu in row.burst.cpu],
        }
    if rebalance is not None:
        figures["rebalance_s"] = round(rebalance, 1)
    return json.dumps(figures)


def burst_table(rows: Sequence[Row], bare_rate: float) -> str:
    """One line per replica count: the burst's creation times beside the bare bound."""
    table = []
    for row in rows:
        if row.burst is None:
            continue
        bound = row.burst.expected / bare_rate
        table.append(
            [
                f"{row.replicas} {'sharded' if row.sharded else 'unsharded'}",
                f"{len(row.burst.created):,} / {row.burst.expected:,}",
                f"{row.burst.p50:.0f}",
                f"{row.burst.p99:.0f}",
                f"{row.burst.last:.0f}",
                f"{bound:.2f}",
                f"{row.burst.p99 / bound:.2f}x",
                " / ".join(f"{cpu:.1f}" for cpu in row.burst.cpu),
            ]
        )
    headers = [
        "replicas",
        "Jobs created / due",
        "creation p50 s",
        "creation p99 s",
        "last Job s",
        "bare-client bound s",
        "p99 / bound",
        "CPU s per replica",
    ]
    return _common.markdown_table(headers, table)


def render(
    rows: Sequence[Row],
    rebalance: float | None,
    bare_rate: float | None,
    idle: float,
    args: argparse.Namespace,
) -> None:
    base = rows[0].rss_mib[0] if rows else 0.0
    table = []
    for row in rows:
        for index in range(row.replicas):
            table.append(
                [
                    f"{row.replicas} {'sharded' if row.sharded else 'unsharded'}",
                    f"{index}{' (leader)' if row.leader[index] else ''}",
                    row.shares[index],
                    f"{row.seconds:.1f}",
                    f"{row.rss_mib[index]:.1f}",
                    f"{row.rss_mib[index] / base:.2f}x" if base else "-",
                    f"{split_floor(row, base, idle):.2f}x" if base else "-",
                    f"{row.cpu[index]:.1f}",
                ]
            )
    headers = [
        "replicas",
        "replica",
        "CronJobs owned",
        "s to every status correct",
        "RSS MiB",
        "RSS / 1 replica",
        "even-split floor",
        "CPU s",
    ]
    notes = [
        f"{args.cronjobs} CronJobs x {args.jobs_per_cronjob} Jobs over "
        f"{_cluster.NAMESPACES} namespaces; leases {args.leases}",
        "CPU s: the process's CPU from its start until every status was correct",
        f"fixed cost: one replica with nothing to cache held {idle:.1f} MiB; even-split "
        "floor = (fixed + (1 replica - fixed) / replicas) / 1 replica",
    ]
    if rebalance is not None:
        notes.append(
            f"rebalance: a non-leading member of 3 SIGKILLed, its CronJobs labelled "
            f"for the others {rebalance:.1f}s later (on the leader's clock)"
        )
    tables = [("Per replica:", _common.markdown_table(headers, table))]
    if bare_rate is not None:
        tables.append(("Every CronJob due in the same minute:", burst_table(rows, bare_rate)))
        notes.append(
            f"burst: creation = creationTimestamp (1 s resolution) - the scheduled minute; "
            f"bare client {bare_rate:,.0f} Jobs/s ({args.cronjobs:,} creates, "
            f"{_cluster.THREADS} threads, no limit, the same control plane after the rows), "
            "so the bound is N / that rate; CPU from before the minute to the last Job"
        )
    _common.print_report("Sharding", tables, notes)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cronjobs", type=int, default=2000)
    parser.add_argument("--jobs-per-cronjob", type=int, default=5)
    parser.add_argument("--replicas", default="1,2,3", help="replica counts, in order")
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--logs", type=Path, help="directory for the operators' logs")
    parser.add_argument(
        "--no-burst", dest="burst", action="store_false", help="skip the due-in-one-minute burst"
    )
    parser.add_argument(
        "--default-leases",
        dest="leases",
        action="store_const",
        const=DEFAULT_LEASES,
        default=FAST_LEASES,
        help=f"the CLI's lease timings ({DEFAULT_LEASES}) instead of {FAST_LEASES}",
    )
    args = parser.parse_args(argv)
    counts = [int(part) for part in args.replicas.split(",")]
    directory = args.logs or Path(tempfile.mkdtemp(prefix="bench-shard-"))
    directory.mkdir(parents=True, exist_ok=True)
    print(f"operator logs in {directory}", file=sys.stderr)
    with _cluster.bench_plane() as plane, contextlib.ExitStack() as stack:
        rest = _cluster.rest_client(plane)
        _cluster.create_namespaces(rest)
        plane.kubectl("create", "namespace", LEASE_NAMESPACE, check=True)
        idle = idle_rss_mib(plane, directory, args.leases, args.timeout)
        print(f"one replica with nothing to cache: {idle:.1f} MiB", file=sys.stderr)
        population = _cluster.populate(rest, args.cronjobs, jobs_per_cronjob=args.jobs_per_cronjob)
        print(f"populated in {population.seconds:.0f}s", file=sys.stderr)
        view = stack.enter_context(CronJobView(rest))
        rows: list[Row] = []
        rebalance: float | None = None
        for count in counts:
            row, seconds = measure(
                plane,
                view,
                population,
                count=count,
                jobs=args.jobs_per_cronjob,
                directory=directory,
                timeout=args.timeout,
                with_burst=args.burst,
                leases=args.leases,
            )
            rows.append(row)
            rebalance = seconds if seconds is not None else rebalance
            print(f"{count} replicas: {summary(row, seconds)}", file=sys.stderr)
        bare_rate = bare_create_rate(rest, args.cronjobs, _cluster.THREADS) if args.burst else None
    render(rows, rebalance, bare_rate, idle, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
