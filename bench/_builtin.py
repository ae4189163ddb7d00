"""The built-in side of bench/fire.py: kube-controller-manager's cronjob-controller, alone.

Issue 48 compares the operator with the controller platform teams actually run: the
built-in ``cronjob-controller`` of kube-controller-manager (Go, protobuf, five workers).
For that the bench plane's own kube-controller-manager runs neither ``cronjob-controller``
nor ``job-controller`` (``PLANE_CONTROLLERS``), and this module starts a second one that
runs only ``cronjob-controller`` (``BuiltinManager``), as a user of its own
(``USER``: a client certificate from the plane's CA, in ``system:masters`` as the admin
every other side runs as, so the API server's priority and fairness treat it alike),
leader election off, serving its /healthz and /metrics on a free 127.0.0.1 port (its own
client's request counts, ``client_requests``, are this process's alone) and with a
client limit of ``--builtin-stock-limits``' choice: none (``--kube-api-qps=-1``, as ours
runs) or its stock qps 20 / burst 30.

Its CronJobs are ``batch/v1`` CronJobs with the same spec as ours (bench/skew.py's
``builtin_cronjob``); their status counts as written once it names the minute as its
``lastScheduleTime`` and has an ``active`` Job (``BuiltinStatusWatcher``). Its startup
ends once its log says its caches synced and its CPU is quiet (it writes nothing at
startup: a CronJob that never ran has no status to write).
"""

from __future__ import annotations

import collections
import os
import re
import ssl
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import _cluster
from bench._runner import ChildProcess, parse_k8s_time
from bench.skew import BUILTIN_CRONJOB, Limits, StatusWatcher
from cronjob_operator.envtest import ControlPlane, _certs, _kubeconfig
from cronjob_operator.envtest._components import Component, free_ports
from cronjob_operator.runtime.kinds import Kind

CONTROLLER = "cronjob-controller"
PLANE_CONTROLLERS = tuple(name for name in _cluster.BENCH_CONTROLLERS if name != CONTROLLER)
"""The bench plane's kube-controller-manager for bench/fire.py: no Job controller (as
every bench plane) and no CronJob controller (the second process runs it)."""
USER = "bench-builtin-cronjob-controller"
UNTHROTTLED = Limits(None, 0)
STOCK = Limits(20, 30)
"""kube-controller-manager's defaults (``--kube-api-qps`` 20, ``--kube-api-burst`` 30)."""
SYNCED = re.compile(r"Starting cronjob controller.*Caches are synced", re.DOTALL)
"""Its log once its CronJob controller's informers have synced (the line names no
controller; this one is the only one that runs)."""
_CLIENT_REQUESTS = re.compile(
    r"^rest_client_requests_total\{(?P<labels>[^}]*)\} (?P<value>\S+)$", re.MULTILINE
)
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def write_kubeconfig(plane: ControlPlane, directory: Path) -> Path:
    """A kubeconfig in ``directory`` that acts as ``USER`` (a client certificate)."""
    directory.mkdir(parents=True, exist_ok=True)
    pki = _certs.Pki(plane.state_dir / "pki")
    cert, key = directory / f"{USER}.crt", directory / f"{USER}.key"
    _certs._issue(
        pki,
        subject=f"/O=system:masters/CN={USER}",
        usage="clientAuth",
        alt_names=(),
        cert=cert,
        key=key,
    )
    path = directory / "kubeconfig"
    _kubeconfig.write_cert_kubeconfig(
        path, server=plane.server, ca_cert=pki.ca_cert, client_cert=cert, client_key=key, user=USER
    )
    return path


@dataclass
class BuiltinStatusWatcher(StatusWatcher):
    """When each batch/v1 CronJob was first seen with the minute as its
    ``lastScheduleTime`` and an ``active`` Job (the built-in writes both at once)."""

    kind: Kind = BUILTIN_CRONJOB

    def _record(self, event: dict[str, Any], received: float) -> None:
        status = (event.get("object") or {}).get("status") or {}
        last = status.get("lastScheduleTime")
        if status.get("active") and last and parse_k8s_time(last) == self.target:
            super()._record(event, received)


class BuiltinManager(ChildProcess):
    """kube-controller-manager running only ``cronjob-controller``, in a subprocess (see
    ``ChildProcess``): when its caches synced (from its log), its own request counts from
    its /metrics."""

    def __init__(self, plane: ControlPlane, directory: Path, limits: Limits, log: Path) -> None:
        (port,) = free_ports(1)
        self.metrics_url = f"https://127.0.0.1:{port}/metrics"
        argv = [
            str(plane.bin_dir / Component.CONTROLLER_MANAGER),
            f"--kubeconfig={write_kubeconfig(plane, directory)}",
            f"--controllers={CONTROLLER}",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            f"--cert-dir={directory / 'serving'}",
            "--authentication-skip-lookup",
            "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
            *limits.flags(),
        ]
        # The built-in reads a schedule without spec.timeZone in its process's zone; ours
        # reads it in UTC.
        env = {**os.environ, "TZ": "UTC"}
        super().__init__("the built-in's kube-controller-manager", argv, env, log)

    def wait_synced(self, deadline: float) -> float:
        """When its log first said its CronJob controller's caches synced (polled)."""
        while not SYNCED.search(self.log.read_text(errors="replace")):
            self.check_running()
            if time.time() > deadline:
                raise TimeoutError(f"the built-in's caches not synced; see {self.log}")
            time.sleep(0.2)
        return time.time()

    def client_requests(self) -> collections.Counter[str]:
        """Every request its client has sent so far, by method and response code
        (``rest_client_requests_total``): this user's requests, counted by the process."""
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE  # its self-signed serving certificate
        with urllib.request.urlopen(self.metrics_url, context=context, timeout=10) as answer:
            text = answer.read().decode()
        counts: collections.Counter[str] = collections.Counter()
        for match in _CLIENT_REQUESTS.finditer(text):
            labels = dict(_LABEL.findall(match["labels"]))
            counts[f"{labels.get('method', '?')} {labels.get('code', '?')}"] += int(
                float(match["value"])
            )
        return counts


def since(after: collections.Counter[str], before: collections.Counter[str]) -> str:
    """The requests counted between two ``client_requests`` readings, for a note."""
    delta = {key: after[key] - before.get(key, 0) for key in after}
    return ", ".join(f"{key} {n:,}" for key, n in sorted(delta.items()) if n) or "none"
