"""``ControlPlane``: a real local Kubernetes control plane, started and stopped as a unit.

Like controller-runtime's envtest, but complete: etcd, kube-apiserver (RBAC, client
certificates, service-account tokens), kube-controller-manager (Job, CronJob, garbage
collector, namespace, Deployment, ReplicaSet, service account, node lifecycle and TTL
controllers), kube-scheduler and kwok, which plays the kubelet for fake nodes. Jobs
really complete, owner references really cascade, namespaces really finish deleting.
With ``real_node=True`` a real kubelet node (containerd, runc) joins too, so images
really run as Pods (see ``_node``: hostNetwork Pods, or with ``pod_network=True`` Pods
with their own addresses, see ``_podnet``; the host left untouched either way).

A plane lives in a state directory: PKI, kubeconfig, kwok stages, etcd data, one log
per component and ``state.json`` (see ``_state``). A test plane uses a fresh temporary
directory and is tied to the interpreter that started it (see ``_cleanup``); a
persistent plane (``persistent=True``, used by ``hack/local-cluster.sh up``) outlives
it and is found again with ``ControlPlane.attach``. Everything is removed on ``stop``.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from cronjob_operator.envtest import (
    _binaries,
    _certs,
    _cleanup,
    _http,
    _kubeconfig,
    _node,
    _podnet,
    _probes,
    _stages,
    audit,
)
from cronjob_operator.envtest._components import (
    CONTROLLERS,
    START_ORDER,
    Component,
    Layout,
    Ports,
    command,
    fake_node,
)
from cronjob_operator.envtest._processes import ManagedProcess
from cronjob_operator.envtest._state import (
    STATE_FILE,
    ComponentRecord,
    PlaneRecord,
    load_record,
    save_record,
)
from cronjob_operator.envtest.waiting import WaitTimeout, wait_for

__all__ = ["KEEP_STATE_ENV", "ComponentStatus", "ControlPlane", "ControlPlaneError"]

log = logging.getLogger(__name__)

TEMP_PREFIX = "cronjob-operator-envtest-"
KEEP_STATE_ENV = "CRONJOB_OPERATOR_KEEP_STATE"
READY_TIMEOUT = 60.0
NODE_BUILD_SCRIPT = Path(__file__).resolve().parents[2] / "hack" / "build-node.sh"


class ControlPlaneError(RuntimeError):
    """The control plane failed to start, a component died, or a command failed."""


@dataclass(frozen=True)
class ComponentStatus:
    """What ``status`` reports for one component."""

    component: Component
    pid: int | None
    running: bool
    port: int | None
    log: Path


class ControlPlane:
    """A local control plane. ``start`` blocks until it is usable; ``stop`` removes it.

    ``bin_dir`` defaults to ``$CRONJOB_OPERATOR_BIN_DIR`` or the output of
    ``hack/build-binaries.sh``; ``state_dir`` to a fresh temporary directory (it must be
    empty or absent). ``pod_run_seconds`` is how long a Job's pod stays Running before
    kwok completes it (default ``$CRONJOB_OPERATOR_POD_RUN_SECONDS`` or 3 s).
    ``controllers`` are the kube-controller-manager controllers to run (default
    ``CONTROLLERS``; benchmarks drop ``job-controller`` so no pods run). ``feature_gates``
    go to kube-apiserver (``{"WatchList": False}`` turns streaming lists off);
    ``extra_args`` are appended to a component's flags, by its name
    (``{"kube-controller-manager": ["--kube-api-qps=20"]}``). ``audit`` turns on the API
    server's audit log of writes (see ``audit``; ``audit_log``, ``audit_events``).
    ``real_node`` adds a
    kubelet node named ``_node.NODE_NAME`` (tainted ``_node.NODE_TAINT``: only Pods
    that tolerate it run there) with its binaries from ``node_bin_dir``, else
    ``$CRONJOB_OPERATOR_NODE_BIN_DIR`` or ``hack/build-node.sh``; the API server then
    admits service accounts and the root CA is published, as in a real cluster.
    ``pod_network`` (implies ``real_node``) gives that node's Pods addresses of their
    own (``_podnet``): Pods off the host network reach the API server at
    ``pod_gateway`` and the API server reaches them (webhooks). Usable
    as a context manager. Methods block; failures raise ``ControlPlaneError``.
    """

    def __init__(
        self,
        *,
        bin_dir: Path | None = None,
        state_dir: Path | None = None,
        pod_run_seconds: float | None = None,
        nodes: int = 1,
        persistent: bool = False,
        stop_grace: float = 10.0,
        controllers: Sequence[str] = CONTROLLERS,
        feature_gates: Mapping[str, bool] | None = None,
        extra_args: Mapping[str, Sequence[str]] | None = None,
        audit: bool = False,
        real_node: bool = False,
        node_bin_dir: Path | None = None,
        pod_network: bool = False,
    ) -> None:
        if nodes < 1:
            raise ValueError(f"nodes={nodes}: a control plane needs at least one node")
        self.persistent = persistent
        self.stop_grace = stop_grace
        self.pod_run_seconds = (
            _stages.pod_run_seconds_from_env() if pod_run_seconds is None else pod_run_seconds
        )
        self.node_names = [f"kwok-node-{index}" for index in range(nodes)]
        self.controllers = tuple(controllers)
        self.feature_gates = dict(feature_gates or {})
        self.extra_args = {name: tuple(args) for name, args in (extra_args or {}).items()}
        self.audit = audit
        self._requested_bin_dir = bin_dir
        self.real_node = real_node or node_bin_dir is not None or pod_network
        self.pod_network = pod_network
        self._requested_node_bin_dir = node_bin_dir
        self._requested_state_dir = state_dir
        self._layout: Layout | None = None
        self._record: PlaneRecord | None = None
        self._processes: dict[Component, ManagedProcess] = {}
        self._admin_client: _http.AdminClient | None = None

    @classmethod
    def attach(cls, state_dir: Path) -> ControlPlane:
        """Adopt the plane recorded in ``state_dir`` (started by any process)."""
        try:
            record = load_record(state_dir)
        except (OSError, ValueError) as error:
            raise ControlPlaneError(f"no control plane state in {state_dir}: {error}") from None
        plane = cls(
            bin_dir=Path(record.bin_dir),
            state_dir=state_dir,
            pod_run_seconds=record.pod_run_seconds,
            persistent=record.owner_pid is None,
        )
        plane.node_names = list(record.nodes)
        plane.real_node = record.node_bin_dir is not None
        plane.pod_network = record.pod_network
        plane._layout = Layout(state_dir, Path(record.bin_dir))
        plane._record = record
        plane._processes = {
            Component(name): ManagedProcess(name, entry.argv, Path(entry.log), pid=entry.pid)
            for name, entry in record.components.items()
        }
        return plane

    # -- where things are ------------------------------------------------------------

    @property
    def state_dir(self) -> Path:
        return self._started_layout().state_dir

    @property
    def bin_dir(self) -> Path:
        return self._started_layout().bin_dir

    @property
    def kubeconfig(self) -> Path:
        """The admin kubeconfig (client certificate, group system:masters)."""
        return self._started_layout().kubeconfig

    @property
    def server(self) -> str:
        """The API server URL, ``https://127.0.0.1:<port>``."""
        return self._started_record().server

    @property
    def etcd_url(self) -> str:
        return self._started_record().etcd_url

    @property
    def ports(self) -> Ports:
        return Ports(**self._started_record().ports)

    @property
    def pod_gateway(self) -> str:
        """Where a Pod on the real node's Pod network reaches the API server (at the
        port of ``ports.apiserver``); its serving certificate names this address."""
        if not self.pod_network:
            raise ControlPlaneError("this control plane has no Pod network (pod_network=True)")
        return _podnet.POD_GATEWAY

    @property
    def node_state_dir(self) -> Path:
        """The real node's directory (configuration, containerd and kubelet logs)."""
        return self._node_layout().directory

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> None:
        """Start every component in order and block until the plane is usable.

        Ready means: API server ready with the ``default`` namespace, the controller
        manager has created the default ServiceAccount, the scheduler is healthy and
        every fake node (and the real node, if any) is Ready. Cleans up before raising.
        """
        if self._layout is not None:
            raise ControlPlaneError(f"this control plane was already started in {self.state_dir}")
        began = time.monotonic()
        bin_dir = self._requested_bin_dir or _binaries.find_bin_dir()
        bin_dir = _binaries.check_bin_dir(bin_dir, source="bin_dir")
        if not self.persistent:
            _cleanup.reap_orphans(Path(tempfile.gettempdir()), TEMP_PREFIX)
        self._layout = Layout(self._create_state_dir(), bin_dir)
        if not self.persistent:
            _cleanup.register(self.stop)
        try:
            self._prepare()
            for component in START_ORDER:
                if component not in self._processes:
                    continue
                self._launch(component)
                self._wait_ready(component)
                if component is Component.APISERVER:
                    self._create_nodes()
        except BaseException:
            self.stop()
            raise
        log.info(
            "control plane ready in %.1fs at %s (state in %s)",
            time.monotonic() - began,
            self.server,
            self.state_dir,
        )

    def stop(self) -> None:
        """Stop every component (reverse order, SIGTERM then SIGKILL) and remove the state.

        Idempotent. With ``$CRONJOB_OPERATOR_KEEP_STATE`` set the logs are kept.
        """
        if not self.persistent:
            _cleanup.unregister(self.stop)
        for component in reversed(START_ORDER):
            process = self._processes.pop(component, None)
            if process is not None:
                process.stop(grace=self.stop_grace)
        if self._layout is None or not self._layout.state_dir.exists():
            return
        if self.real_node and self._record is not None:
            _node.remove_cgroups(self._node_layout().cgroup_root)
        if os.environ.get(KEEP_STATE_ENV):
            (self._layout.state_dir / STATE_FILE).unlink(missing_ok=True)
            log.warning("kept the control plane's logs in %s", self._layout.state_dir)
        else:
            shutil.rmtree(self._layout.state_dir, ignore_errors=True)

    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def stop_component(self, name: str, *, kill: bool = False) -> None:
        """Stop one component: gracefully, or with SIGKILL at once (a crash) if ``kill``."""
        component = Component(name)
        self._process(component).stop(grace=self.stop_grace, kill=kill)
        self._started_record().components[component].pid = None
        self._save()

    def start_component(self, name: str, *, timeout: float = READY_TIMEOUT) -> None:
        """Start a stopped component again with the same flags and ports; wait until ready."""
        component = Component(name)
        self._launch(component)
        self._wait_ready(component, timeout=timeout)

    def healthy(self) -> bool:
        """True when every component runs and the API server answers /readyz."""
        if not self._processes or not all(p.running() for p in self._processes.values()):
            return False
        try:
            return _probes.apiserver_ready(self._admin())
        except _http.HttpError:
            return False

    def status(self) -> list[ComponentStatus]:
        """Pid, liveness, port and log of each component, in start order."""
        ports = self.ports
        port_of = {
            Component.ETCD: ports.etcd_client,
            Component.APISERVER: ports.apiserver,
            Component.SCHEDULER: ports.scheduler,
        }
        return [
            ComponentStatus(
                component=component,
                pid=process.pid,
                running=process.running(),
                port=port_of.get(component),
                log=process.log_path,
            )
            for component in START_ORDER
            if (process := self._processes.get(component)) is not None
        ]

    # -- using the plane -------------------------------------------------------------

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = False, timeout: float = 60.0
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl as admin against this plane and return the completed process.

        Blocks up to ``timeout`` seconds. With ``check``, a non-zero exit raises
        ``ControlPlaneError`` carrying kubectl's stderr.
        """
        argv = [str(self.bin_dir / "kubectl"), f"--kubeconfig={self.kubeconfig}", *args]
        result = subprocess.run(
            argv, input=input, capture_output=True, text=True, timeout=timeout, check=False
        )
        if check and result.returncode != 0:
            raise ControlPlaneError(
                f"kubectl {' '.join(args)} failed ({result.returncode}): {result.stderr.strip()}"
            )
        return result

    def kubectl_json(self, *args: str, input: str | None = None) -> Any:
        """Run kubectl with ``-o json`` and parse its output; raises on a non-zero exit."""
        return json.loads(self.kubectl(*args, "-o", "json", input=input, check=True).stdout)

    @property
    def audit_log(self) -> Path:
        """The API server's audit log (written only with ``audit=True``)."""
        return audit.log_path(self.state_dir)

    def audit_events(self) -> list[audit.AuditEvent]:
        """The writes logged so far (``audit=True``), in the order the server logged them."""
        if not self.audit:
            raise ControlPlaneError("this control plane was started without audit=True")
        return audit.read_events(self.audit_log)

    def import_image(self, archive: Path) -> None:
        """Import a docker or OCI image archive into the real node's containerd.

        The node pulls from nowhere (every registry is mirrored to an unreachable
        address), so a Pod's image must be imported first. Blocks; raises
        ``ControlPlaneError`` when there is no real node or the import fails.
        """
        try:
            _node.import_image(self._node_layout(), archive)
        except (_node.NodeError, subprocess.TimeoutExpired) as error:
            raise ControlPlaneError(str(error)) from None

    def pod_log(self, namespace: str, pod: str, container: str) -> str:
        """What a container of a Pod on the real node logged ('' before it started).

        ``kubectl logs`` cannot reach this kubelet (it listens on 127.0.0.1 only, while
        the API server dials the Node's address); the node writes the logs to files.
        """
        return _node.pod_log(self._node_layout(), namespace, pod, container)

    def apiserver_metrics(self) -> str:
        """The API server's /metrics text (Prometheus format)."""
        return self._admin().get("/metrics", timeout=30.0).decode()

    def compact_etcd(self) -> int:
        """Compact etcd to its current revision (so older watches get 410 Gone).

        Uses etcd's v3 JSON gateway. Returns the revision compacted to.
        """
        base = self.etcd_url
        header = _http.post_json(f"{base}/v3/kv/range", {"key": "AA==", "count_only": True})
        revision = int(header["header"]["revision"])
        try:
            _http.post_json(f"{base}/v3/kv/compaction", {"revision": revision, "physical": True})
        except _http.HttpError as error:
            if "required revision has been compacted" not in error.body:
                raise ControlPlaneError(f"compacting etcd to {revision}: {error}") from None
        return revision

    def token_kubeconfig(
        self, namespace: str, service_account: str, path: Path, *, duration: str = "1h"
    ) -> Path:
        """Write to ``path`` a kubeconfig that acts as ``namespace/service_account``.

        Creates the ServiceAccount if it does not exist, then a token for it with the
        TokenRequest API (``kubectl create token``). Returns ``path``.
        """
        created = self.kubectl("create", "serviceaccount", service_account, "-n", namespace)
        if created.returncode != 0 and "already exists" not in created.stderr.lower():
            raise ControlPlaneError(
                f"creating ServiceAccount {namespace}/{service_account}: {created.stderr.strip()}"
            )
        token = self.kubectl(
            "create", "token", service_account, "-n", namespace, f"--duration={duration}"
        )
        if token.returncode != 0:
            raise ControlPlaneError(
                f"creating a token for {namespace}/{service_account}: {token.stderr.strip()}"
            )
        _kubeconfig.write_token_kubeconfig(
            path,
            server=self.server,
            ca_cert=self._started_layout().pki.ca_cert,
            token=token.stdout.strip(),
            user=f"system:serviceaccount:{namespace}:{service_account}",
        )
        return path

    # -- internals -------------------------------------------------------------------

    def _create_state_dir(self) -> Path:
        requested = self._requested_state_dir
        if requested is None:
            return Path(tempfile.mkdtemp(prefix=TEMP_PREFIX))
        if (requested / STATE_FILE).exists():
            raise ControlPlaneError(
                f"{requested} already holds a control plane; stop it first "
                "(ControlPlane.attach(path).stop() or hack/local-cluster.sh down)"
            )
        if requested.exists() and any(requested.iterdir()):
            raise ControlPlaneError(f"state directory {requested} is not empty")
        requested.mkdir(parents=True, exist_ok=True)
        return requested.resolve()

    def _prepare(self) -> None:
        layout = self._started_layout()
        node = (
            _node.NodeLayout.of(layout.state_dir, self._find_node_bin_dir())
            if self.real_node
            else None
        )
        pki = _certs.generate_pki(layout.pki.directory)
        ports = Ports.allocate()
        server = f"https://127.0.0.1:{ports.apiserver}"
        _kubeconfig.write_cert_kubeconfig(
            layout.kubeconfig,
            server=server,
            ca_cert=pki.ca_cert,
            client_cert=pki.admin_cert,
            client_key=pki.admin_key,
            user="admin",
        )
        _stages.write_kwok_config(
            layout.bin_dir / "stages", layout.kwok_config, pod_run_seconds=self.pod_run_seconds
        )
        extra_args = dict(self.extra_args)
        apiserver = str(Component.APISERVER)
        if self.audit:
            extra_args[apiserver] = (
                *audit.apiserver_flags(layout.state_dir),
                *extra_args.get(apiserver, ()),
            )
        if node is not None and self.pod_network:
            extra_args[apiserver] = (
                f"--egress-selector-config-file={node.egress_selector_config}",
                *extra_args.get(apiserver, ()),
            )
        components = {}
        for component in START_ORDER:
            if component is Component.NODE:
                if node is None:
                    continue
                _node.prepare(
                    node,
                    kubeconfig=layout.kubeconfig,
                    client_ca=pki.ca_cert,
                    apiserver_port=ports.apiserver,
                    pod_network=self.pod_network,
                )
                argv = _node.command(node)
            else:
                argv = command(
                    component,
                    layout,
                    ports,
                    controllers=self.controllers,
                    feature_gates=self.feature_gates,
                    extra_args=extra_args,
                    real_node=node is not None,
                )
            self._processes[component] = ManagedProcess(component, argv, layout.log(component))
            components[str(component)] = ComponentRecord(argv=argv, log=str(layout.log(component)))
        self._record = PlaneRecord(
            owner_pid=None if self.persistent else os.getpid(),
            bin_dir=str(layout.bin_dir),
            server=server,
            etcd_url=f"http://127.0.0.1:{ports.etcd_client}",
            kubeconfig=str(layout.kubeconfig),
            ports=asdict(ports),
            nodes=self.node_names,
            pod_run_seconds=self.pod_run_seconds,
            components=components,
            node_bin_dir=None if node is None else str(node.bin_dir),
            pod_network=self.pod_network,
        )
        self._save()

    def _launch(self, component: Component) -> None:
        process = self._process(component)
        process.start(tie_to_parent=not self.persistent)
        self._started_record().components[component].pid = process.pid
        self._save()

    def _wait_ready(self, component: Component, *, timeout: float = READY_TIMEOUT) -> None:
        process = self._process(component)
        admin = self._admin()
        checks: dict[Component, Callable[[], bool]] = {
            Component.ETCD: lambda: _probes.etcd_healthy(self.etcd_url),
            Component.APISERVER: lambda: _probes.apiserver_ready(admin),
            Component.CONTROLLER_MANAGER: lambda: _probes.controller_manager_ready(admin),
            Component.SCHEDULER: lambda: _probes.scheduler_healthy(self.ports.scheduler),
            Component.KWOK: lambda: all(_probes.node_ready(admin, n) for n in self.node_names),
            Component.NODE: lambda: _probes.node_ready(
                admin, _node.NODE_NAME, own_taint=_node.NODE_TAINT
            ),
        }
        check = checks[component]

        def ready() -> bool:
            if not process.running():
                raise ControlPlaneError(
                    f"{component} exited with status {process.exit_code()}; "
                    f"last lines of {process.log_path}:\n{process.log_tail()}"
                )
            return check()

        try:
            wait_for(ready, timeout, message=f"{component} to be ready", ignore=(_http.HttpError,))
        except WaitTimeout as error:
            raise ControlPlaneError(
                f"{error}; last lines of {process.log_path}:\n{process.log_tail()}"
            ) from None

    def _create_nodes(self) -> None:
        for name in self.node_names:
            self._admin().post_json("/api/v1/nodes", fake_node(name))

    def _find_node_bin_dir(self) -> Path:
        requested = self._requested_node_bin_dir or _env_path(_node.NODE_BIN_DIR_ENV)
        try:
            if requested is None:
                requested = _run_build_script(NODE_BUILD_SCRIPT)
            return _node.check_node_bin_dir(requested)
        except _node.NodeError as error:
            raise ControlPlaneError(str(error)) from None

    def _node_layout(self) -> _node.NodeLayout:
        node_bin_dir = self._started_record().node_bin_dir
        if node_bin_dir is None:
            raise ControlPlaneError("this control plane has no real node (real_node=False)")
        return _node.NodeLayout.of(self._started_layout().state_dir, Path(node_bin_dir))

    def _admin(self) -> _http.AdminClient:
        if self._admin_client is None:
            pki = self._started_layout().pki
            self._admin_client = _http.AdminClient(
                self.server,
                ca_cert=pki.ca_cert,
                client_cert=pki.admin_cert,
                client_key=pki.admin_key,
            )
        return self._admin_client

    def _process(self, component: Component) -> ManagedProcess:
        try:
            return self._processes[component]
        except KeyError:
            raise ControlPlaneError(f"{component} is not part of a running plane") from None

    def _save(self) -> None:
        save_record(self._started_layout().state_dir, self._started_record())

    def _started_layout(self) -> Layout:
        if self._layout is None:
            raise ControlPlaneError("the control plane has not been started")
        return self._layout

    def _started_record(self) -> PlaneRecord:
        if self._record is None:
            raise ControlPlaneError("the control plane has not been started")
        return self._record


def _env_path(name: str) -> Path | None:
    value = os.environ.get(name)
    return Path(value) if value else None


def _run_build_script(script: Path) -> Path:
    """Run a ``hack/build-*.sh`` that prints its output directory last; return it."""
    if not script.is_file():
        raise ControlPlaneError(f"{script} does not exist (not a source checkout?)")
    result = subprocess.run(["bash", str(script)], stdout=subprocess.PIPE, text=True, check=False)
    lines = result.stdout.strip().splitlines()
    if result.returncode != 0 or not lines:
        raise ControlPlaneError(f"{script} failed with exit code {result.returncode}")
    return Path(lines[-1])
