"""Sharding: N CronJobs x M Jobs on 1 replica (unsharded), then 2 and 3 sharded replicas.

One control plane (no Job controller: the Jobs are stored, never run; bench/_cluster.py)
holds N CronJobs that never fire and M suspended Jobs owned by each. For each replica
count, every CronJob's status is emptied, then that many real ``cronjob-operator run``
processes start (``--leader-elect``, and ``--sharded`` above 1 replica; 4 s leases).
Reported per replica count:

* the time from the start of the processes (interpreter start included) until every
  CronJob's status is correct (M active Jobs and an Available condition) and, sharded,
  every CronJob is labelled with a running member and not draining; polled with one
  LIST a second. With sharding this includes assigning every CronJob and relabelling
  its Jobs (the members are new processes, so every CronJob moves);
* each replica's RSS (VmRSS) and CPU seconds once the statuses are correct, its share
  of the CronJobs (its shard label), and which one leads (it also runs the assigner);
* with 3 replicas, the rebalance: a member that is not the leader is SIGKILLed and the
  time until no CronJob is labelled with it any more is measured.

Not measured here (issue 24's other figures): 20,000 runs due in one minute and the
bare-client Job-create bound.

    python -m bench.shard [--cronjobs 2000] [--jobs-per-cronjob 5] [--replicas 1,2,3]
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
from cronjob_operator.api.batch_v1 import CRONJOB
from cronjob_operator.cli import DEFAULT_LEADER_ELECTION_ID
from cronjob_operator.envtest import ControlPlane, wait_for
from cronjob_operator.runtime.client import LiveReader
from cronjob_operator.runtime.sharding import DRAIN_LABEL, SHARD_LABEL

LEASE_NAMESPACE = "bench-leases"
FAST_LEASE = (
    "--leader-elect-lease-duration=4s",
    "--leader-elect-renew-deadline=3s",
    "--leader-elect-retry-period=500ms",
)


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
    plane: ControlPlane, count: int, directory: Path, *, sharded: bool
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
                *FAST_LEASE,
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


def correct(cronjob: dict[str, Any], jobs: int) -> bool:
    status = cronjob.get("status") or {}
    available = any(c.get("type") == "Available" for c in status.get("conditions") or ())
    return available and len(status.get("active") or ()) == jobs


def cronjobs(reader: LiveReader) -> list[dict[str, Any]]:
    return [dict(item) for item in reader.list(CRONJOB)]


def placed(cronjob: dict[str, Any], running: Sequence[Replica]) -> bool:
    """Labelled with one of the running members and not being drained."""
    labels = cronjob["metadata"].get("labels") or {}
    members = {replica.member() for replica in running}
    return labels.get(SHARD_LABEL) in members - {None} and DRAIN_LABEL not in labels


@dataclass
class Row:
    replicas: int
    sharded: bool
    seconds: float
    rss_mib: list[float]
    cpu: list[float]
    shares: list[int]
    leader: list[bool]


def measure(
    plane: ControlPlane,
    reader: LiveReader,
    population: _cluster.Population,
    *,
    count: int,
    jobs: int,
    directory: Path,
    timeout: float,
) -> tuple[Row, float | None]:
    """One replica count: start, wait for correct statuses, read RSS and CPU, rebalance."""
    _cluster.clear_statuses(_cluster.rest_client(plane), population.cronjobs)
    sharded = count > 1
    with replicas(plane, count, directory, sharded=sharded) as running:
        began = time.monotonic()
        wait_for(
            lambda: all(
                correct(item, jobs) and (not sharded or placed(item, running))
                for item in cronjobs(reader)
            ),
            timeout,
            interval=1.0,
            message=f"every status correct with {count} replicas",
        )
        seconds = time.monotonic() - began
        shares = Counter(
            (item["metadata"].get("labels") or {}).get(SHARD_LABEL) for item in cronjobs(reader)
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
        rebalance = rebalance_seconds(reader, running, timeout) if count == 3 else None
    return row, rebalance


def rebalance_seconds(reader: LiveReader, running: list[Replica], timeout: float) -> float:
    """SIGKILL a member that does not lead; seconds until no CronJob names it."""
    victim = next(replica for replica in running if not replica.leads())
    gone = victim.member()
    victim.process.send_signal(signal.SIGKILL)
    began = time.monotonic()
    wait_for(
        lambda: all(
            (item["metadata"].get("labels") or {}).get(SHARD_LABEL) not in (gone, None)
            for item in cronjobs(reader)
        ),
        timeout,
        interval=0.2,
        message="the killed member's CronJobs on the others",
    )
    return time.monotonic() - began


def render(rows: Sequence[Row], rebalance: float | None, args: argparse.Namespace) -> None:
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
        "CPU s",
    ]
    notes = [
        f"{args.cronjobs} CronJobs x {args.jobs_per_cronjob} Jobs over "
        f"{_cluster.NAMESPACES} namespaces; leases 4 s / 3 s / 0.5 s",
        "CPU s: the process's CPU from its start until every status was correct",
    ]
    if rebalance is not None:
        notes.append(
            f"rebalance: a non-leading member of 3 SIGKILLed, its CronJobs relabelled "
            f"onto the others {rebalance:.1f}s later (lease 4 s on the leader's clock)"
        )
    _common.print_report(
        "Sharding", [("Per replica:", _common.markdown_table(headers, table))], notes
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cronjobs", type=int, default=2000)
    parser.add_argument("--jobs-per-cronjob", type=int, default=5)
    parser.add_argument("--replicas", default="1,2,3", help="replica counts, in order")
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--logs", type=Path, help="directory for the operators' logs")
    args = parser.parse_args(argv)
    counts = [int(part) for part in args.replicas.split(",")]
    directory = args.logs or Path(tempfile.mkdtemp(prefix="bench-shard-"))
    directory.mkdir(parents=True, exist_ok=True)
    print(f"operator logs in {directory}", file=sys.stderr)
    with _cluster.bench_plane() as plane:
        rest = _cluster.rest_client(plane)
        _cluster.create_namespaces(rest)
        plane.kubectl("create", "namespace", LEASE_NAMESPACE, check=True)
        population = _cluster.populate(rest, args.cronjobs, jobs_per_cronjob=args.jobs_per_cronjob)
        print(f"populated in {population.seconds:.0f}s", file=sys.stderr)
        reader = LiveReader(rest)
        rows: list[Row] = []
        rebalance: float | None = None
        for count in counts:
            row, seconds = measure(
                plane,
                reader,
                population,
                count=count,
                jobs=args.jobs_per_cronjob,
                directory=directory,
                timeout=args.timeout,
            )
            rows.append(row)
            rebalance = seconds if seconds is not None else rebalance
            print(f"{count} replicas: {row.seconds:.1f}s", file=sys.stderr)
    render(rows, rebalance, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
