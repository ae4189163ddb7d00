"""The command line: flags -> a Manager with our controllers, as a kubebuilder main.go does.

Subcommands: ``run`` (the manager), ``crd`` (print the generated CRDs),
``migrate-storage`` (move the CronJobs' stored version), ``version``.
Bad flag values fail at once with one line naming the flag; nothing starts.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from cronjob_operator import __version__
from cronjob_operator._flags import positive_int

if TYPE_CHECKING:
    from cronjob_operator.migrate import MigrationResult
    from cronjob_operator.runtime import LeaderElectionConfig, Manager
    from cronjob_operator.runtime.certrotation import Target
    from cronjob_operator.runtime.client import RestClient
    from cronjob_operator.runtime.sharding import Shard

__all__ = ["main"]

log = logging.getLogger("cronjob_operator")

SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
DEFAULT_LEADER_ELECTION_ID = "cronjob-operator.tutorial.kubebuilder.io"
COMPONENT = "cronjob-operator"
"""Who we are to the API server: the Events' reporting component and the user agent."""
USER_AGENT = f"{COMPONENT}/{__version__}"
OLDEST_SUPPORTED_RELEASE = (1, 34)
"""The oldest Kubernetes release (major, minor) the manager runs against; the
compatibility tests run against its newest patch (COMPAT_KUBERNETES_VERSION in
hack/versions.env). An older API server is refused at start (docs/install.md)."""
WEBHOOK_CERT_ADVICE = (
    "to run without webhooks pass --webhook-port=0 (kubebuilder's ENABLE_WEBHOOKS=false); "
    "to serve them, put tls.crt and tls.key in --webhook-cert-dir "
    "(hack/gen-webhook-certs.sh makes a pair for a local run; cert-manager in a cluster)"
)
"""What the webhook readiness problem says to do while no certificate has loaded: a new
user's first ``cronjob-operator run`` has webhooks on and no certificate, so it names
both ways out."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be more than 0")
    return value


def _qps(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a number of requests per second"
        ) from None
    if value == 0:
        raise argparse.ArgumentTypeError(
            "0 would allow no request; give a rate, or a negative value to turn the limiter off"
        )
    return value


def _duration(text: str) -> float:
    """Seconds, as a number or a Go duration in ``s`` or ``ms`` (``15s``, ``1500ms``)."""
    number, scale = text, 1.0
    if text.endswith("ms"):
        number, scale = text[:-2], 0.001
    elif text.endswith("s"):
        number = text[:-1]
    return _positive_float(number) * scale


def _long_duration(text: str) -> timedelta:
    """A Go duration of hours, minutes or seconds (``8760h``, ``90m``, ``60s``)."""
    units = {"h": 3600.0, "m": 60.0, "s": 1.0}
    unit = text[-1:]
    if unit not in units:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration such as 8760h, 90m or 60s")
    return timedelta(seconds=_positive_float(text[:-1]) * units[unit])


def _ca_target(text: str) -> Target:
    from cronjob_operator.runtime.certrotation import parse_target

    try:
        return parse_target(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} must be 0 (off) or a port, 1 to 65535")
    return value


def _bind_address(text: str) -> str:
    from cronjob_operator.runtime.serving import parse_address

    try:
        parse_address(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def build_parser() -> argparse.ArgumentParser:
    """The full flag set (``--help`` documents every flag and its default)."""
    parser = _Parser(prog="cronjob-operator", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    run = commands.add_parser(
        "run",
        help="run the controller manager",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    run.add_argument(
        "--kubeconfig", help="kubeconfig path; default: in-cluster, else ~/.kube/config"
    )
    run.add_argument(
        "--metrics-bind-address",
        type=_bind_address,
        default="0",
        help="address of /metrics, e.g. ':8443' (or ':8080' with --no-metrics-secure); "
        "'0' disables it",
    )
    run.add_argument(
        "--metrics-secure",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="serve /metrics over HTTPS to callers whose bearer token may 'get /metrics' "
        "(TokenReview + SubjectAccessReview); --no-metrics-secure serves plain HTTP to anyone",
    )
    run.add_argument(
        "--metrics-cert-path",
        help="directory of the metrics server's tls.crt and tls.key, reloaded when they "
        "change; default: a self-signed certificate made at start",
    )
    run.add_argument(
        "--health-probe-bind-address",
        type=_bind_address,
        default=":8081",
        help="address of /healthz and /readyz; '0' disables them",
    )
    run.add_argument(
        "--leader-elect",
        action="store_true",
        help="elect a leader with a Lease so only one replica reconciles",
    )
    run.add_argument(
        "--leader-election-id",
        default=DEFAULT_LEADER_ELECTION_ID,
        help="name of the leader election Lease",
    )
    run.add_argument(
        "--leader-election-namespace",
        help="namespace of the Lease; default: the pod's namespace, else 'default'",
    )
    run.add_argument(
        "--leader-elect-lease-duration",
        type=_duration,
        help="seconds (or a Go duration: 15s, 1500ms) a standby waits after the last "
        "renewal it saw before taking the Lease; default: 15s, as controller-runtime",
    )
    run.add_argument(
        "--leader-elect-renew-deadline",
        type=_duration,
        help="seconds the leader keeps trying to renew before it stops leading; its writes "
        "are refused once this long has passed since the last successful renewal began "
        "(less than the lease duration); default: 10s",
    )
    run.add_argument(
        "--leader-elect-retry-period",
        type=_duration,
        help="seconds between renewals, and between attempts to acquire; default: 2s",
    )
    run.add_argument("--namespace", help="watch only this namespace; default: all namespaces")
    run.add_argument(
        "--max-concurrent-reconciles",
        type=positive_int,
        default=1,
        help="reconciles one controller may run at once (distinct objects)",
    )
    run.add_argument(
        "--kube-api-qps",
        type=_qps,
        default=-1.0,
        help="requests per second to the API server, for the controllers together; leader "
        "election and events each get the same rate of their own (metrics authentication "
        "always has its own, 5/s) "
        "(kube-controller-manager's default is 20); negative: no client-side limit, "
        "API Priority and Fairness on the server limits and its 429s are honoured",
    )
    run.add_argument(
        "--kube-api-burst",
        type=positive_int,
        default=30,
        help="requests allowed at once above --kube-api-qps (used only when it is positive)",
    )
    run.add_argument(
        "--graceful-shutdown-timeout",
        type=_positive_float,
        default=30.0,
        help="seconds in-flight reconciles get to finish on SIGTERM",
    )
    run.add_argument(
        "--shutdown-delay",
        type=_duration,
        default=0.0,
        help="seconds (or a Go duration) between SIGTERM and the shutdown, with /readyz "
        "failing and the webhooks still served, so the webhook Service stops sending this "
        "replica reviews before its server closes",
    )
    run.add_argument(
        "--cache-sync-timeout",
        type=_positive_float,
        default=120.0,
        help="seconds to wait for informer caches before reporting them",
    )
    run.add_argument(
        "--log-format",
        choices=("text", "json"),
        help="log format; default: text on a terminal, json otherwise",
    )
    run.add_argument("--log-level", choices=("debug", "info", "warning", "error"), default="info")
    run.add_argument(
        "--cronjob-controller",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="run the CronJob controller",
    )
    run.add_argument(
        "--configdeployment-controller",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="run the ConfigDeployment controller",
    )
    run.add_argument(
        "--sharded",
        action="store_true",
        help="every replica runs the CronJob controller for its share of the CronJobs "
        "(one Lease per replica, a consistent hash assigned by the leader; "
        "docs/sharding.md); needs --leader-elect",
    )
    run.add_argument(
        "--shard-group",
        default="cronjob",
        help="name of the shard group (a label value): replicas with the same group "
        "share the CronJobs",
    )
    run.add_argument(
        "--webhook-port",
        type=_port,
        default=9443,
        help="port of the HTTPS webhook server (admission and conversion, every interface, "
        "every replica); 0 disables it",
    )
    run.add_argument(
        "--webhook-cert-dir",
        default="/tmp/k8s-webhook-server/serving-certs",
        help="directory of the webhook server's tls.crt and tls.key; reloaded when they change",
    )
    run.add_argument(
        "--webhook-client-ca",
        metavar="FILE",
        help="PEM CA bundle: admission webhooks serve only clients presenting a certificate "
        "it signed (the API server's AdmissionConfiguration kubeConfigFile gives it one; "
        "docs/security.md); conversion stays open, as the API server presents none there; "
        "reloaded when it changes. Default: no client certificate asked",
    )
    run.add_argument(
        "--webhook-cert-secret",
        help="make the webhook serving certificate in this Secret of the manager's "
        "namespace (a CA and a certificate for --webhook-service, rotated before expiry, "
        "its CA injected into every --inject-ca-bundle object) and serve it from "
        "--webhook-cert-dir, which must be writable (a tmpfs); default: serve the files "
        "someone else puts there (cert-manager)",
    )
    run.add_argument(
        "--webhook-service",
        help="the webhook Service in the manager's namespace, whose DNS names the made "
        "certificate carries (with --webhook-cert-secret)",
    )
    run.add_argument(
        "--inject-ca-bundle",
        action="append",
        type=_ca_target,
        default=[],
        metavar="KIND/NAME",
        help="an object calling the webhook whose caBundle the leader keeps equal to the "
        "made CA (repeat: validatingwebhookconfiguration/NAME, "
        "mutatingwebhookconfiguration/NAME, customresourcedefinition/NAME)",
    )
    run.add_argument(
        "--webhook-cert-validity",
        type=_long_duration,
        default=_long_duration("8760h"),
        help="how long a made certificate is valid (a Go duration: 8760h, 90m, 60s); it "
        "is renewed after two thirds of it",
    )
    run.add_argument(
        "--enable-http2",
        action="store_true",
        help="accepted for kubebuilder compatibility; the webhook server speaks HTTP/1.1 only",
    )
    commands.add_parser("crd", help="print the generated CustomResourceDefinitions as YAML")
    _add_migrate_storage(commands)
    commands.add_parser("version", help="print the version")
    return parser


def _add_migrate_storage(commands: argparse._SubParsersAction[_Parser]) -> None:
    from cronjob_operator import migrate

    parser = commands.add_parser(
        "migrate-storage",
        help="store every CronJob at another version (docs/upgrades.md)",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--to", required=True, choices=sorted(migrate.VERSIONS), help="the version to store"
    )
    parser.add_argument(
        "--kubeconfig", help="kubeconfig path; default: in-cluster, else ~/.kube/config"
    )
    parser.add_argument(
        "--page-size", type=positive_int, default=migrate.DEFAULT_PAGE_SIZE, help="objects per page"
    )
    parser.add_argument(
        "--continue", dest="continue_token", help="resume from the token a page printed"
    )
    parser.add_argument(
        "--pages",
        type=positive_int,
        help="stop after this many pages and print the token to resume; unset: every page",
    )


def migrate_storage(args: argparse.Namespace) -> int:
    """Run the storage move; print each page's progress, each object the API server
    refused to write back (skipped) and the figures at the end (exit status 1 when one
    was skipped), or the one line saying why it stopped (exit status 1)."""
    from cronjob_operator import migrate
    from cronjob_operator.runtime import RestClient, errors, load_configuration

    def progress(migrated: int, token: str | None) -> None:
        print(f"{migrated} rewritten; resume with --continue {token or '(done)'}", file=sys.stderr)

    def report(skipped: migrate.Skipped) -> None:
        print(f"migrate-storage: skipped {skipped}", file=sys.stderr)

    try:
        rest = RestClient(load_configuration(args.kubeconfig), user_agent=USER_AGENT)
    except Exception as exc:
        print(
            f"migrate-storage: cannot load a Kubernetes client configuration: {exc}",
            file=sys.stderr,
        )
        return 1
    try:
        result = migrate.migrate_storage(
            rest,
            args.to,
            page_size=args.page_size,
            continue_token=args.continue_token,
            max_pages=args.pages,
            on_page=progress,
            on_skip=report,
        )
    except (migrate.MigrationError, errors.ApiError, errors.TransportError) as exc:
        print(f"migrate-storage: {exc}", file=sys.stderr)
        return 1
    finally:
        rest.close()
    print(_migration_summary(result, args.to))
    return 1 if result.skipped else 0


def _migration_summary(result: MigrationResult, to: str) -> str:
    """The last line of ``migrate-storage``: what was rewritten, skipped, and what next."""
    done = f"{result.migrated} CronJobs rewritten as {to} in {result.seconds:.1f}s"
    if result.skipped:
        done += f"; {len(result.skipped)} skipped (refused by the API server, each named above)"
    if result.continue_token is not None:
        return f"{done}; stopped; resume with --continue {result.continue_token}"
    if result.trimmed:
        return f"{done}; storedVersions is [{to}]"
    return (
        f"{done}; storedVersions left as it was, since a skipped CronJob is still stored "
        f"in the old version: fix or delete each one skipped (docs/upgrades.md), then run "
        f"migrate-storage --to {to} again from the first page (without --continue)"
    )


def _own_namespace() -> str:
    """The pod's namespace, else ``default``."""
    try:
        return SERVICE_ACCOUNT_NAMESPACE.read_text().strip()
    except OSError:
        return "default"


def _leader_election(
    args: argparse.Namespace, *, namespace: str, identity: str
) -> LeaderElectionConfig:
    """The Lease config from the flags; a timing flag not given keeps
    ``LeaderElectionConfig``'s default (controller-runtime's). Raises ``ValueError``."""
    from cronjob_operator.runtime import LeaderElectionConfig

    base = LeaderElectionConfig(
        name=args.leader_election_id, namespace=namespace, identity=identity
    )
    lease, renew, retry = (
        args.leader_elect_lease_duration,
        args.leader_elect_renew_deadline,
        args.leader_elect_retry_period,
    )
    return dataclasses.replace(
        base,
        lease_duration=base.lease_duration if lease is None else lease,
        renew_deadline=base.renew_deadline if renew is None else renew,
        retry_period=base.retry_period if retry is None else retry,
    )


def _leader_election_flags_problem(args: argparse.Namespace) -> str | None:
    try:
        _leader_election(args, namespace="check", identity="check")
    except ValueError as exc:
        return f"the --leader-elect-* timings do not fit together: {exc}"
    return None


def _metrics_flags_problem(args: argparse.Namespace) -> str | None:
    from cronjob_operator.runtime.serving import parse_address

    metrics = parse_address(args.metrics_bind_address)
    if args.metrics_secure and metrics is not None:
        if metrics == parse_address(args.health_probe_bind_address):
            return (
                "--metrics-bind-address equals --health-probe-bind-address, but secure "
                "metrics need their own port (e.g. --metrics-bind-address=:8443)"
            )
        if args.metrics_cert_path and not Path(args.metrics_cert_path).is_dir():
            return f"--metrics-cert-path {args.metrics_cert_path!r} is not a directory"
    return None


def _webhook_cert_flags_problem(args: argparse.Namespace) -> str | None:
    if not args.webhook_cert_secret:
        if args.inject_ca_bundle:
            return "--inject-ca-bundle injects the CA the manager makes: give --webhook-cert-secret"
        return None
    if not args.webhook_port:
        return "--webhook-cert-secret makes the webhook certificate, but --webhook-port is 0"
    if not args.webhook_service:
        return "--webhook-cert-secret needs --webhook-service: the certificate names its DNS names"
    return None


def _sharding_flags_problem(args: argparse.Namespace) -> str | None:
    if not args.sharded:
        return None
    if not args.leader_elect:
        return "--sharded needs --leader-elect: the leader assigns the CronJobs to replicas"
    if not args.cronjob_controller:
        return "--sharded shards the CronJob controller; it cannot be disabled with it"
    return None


def _attach_shard(args: argparse.Namespace, manager: Manager) -> Shard | None:
    """With ``--sharded``, make this replica a member of the CronJob shard group."""
    if not args.sharded:
        return None
    from cronjob_operator.api.batch_v1 import CRONJOB
    from cronjob_operator.runtime import kinds, sharding

    return sharding.attach(manager, group=args.shard_group, kind=CRONJOB, owned=(kinds.JOB,))


def run(args: argparse.Namespace) -> int:
    """Build the manager from ``args``, register the enabled controllers, run it."""
    from cronjob_operator.controllers import concurrencygroup, configdeployment, cronjob
    from cronjob_operator.runtime import Manager, Options, RestClient, load_configuration, logs
    from cronjob_operator.runtime.client import TokenBucket
    from cronjob_operator.runtime.leaderelection import default_identity
    from cronjob_operator.runtime.serving import SelfSignedError, release_large_allocations

    logs.configure(args.log_format or ("text" if sys.stderr.isatty() else "json"), args.log_level)
    release_large_allocations()  # a freed request body goes back to the system
    if not (args.cronjob_controller or args.configdeployment_controller):
        log.error("every controller is disabled; enable at least one")
        return 2
    identity = default_identity()
    leader_election = None
    if args.leader_elect:
        namespace = args.leader_election_namespace or _own_namespace()
        leader_election = _leader_election(args, namespace=namespace, identity=identity)
    options = Options(
        namespace=args.namespace,
        leader_election=leader_election,
        metrics_bind_address=args.metrics_bind_address,
        metrics_secure=args.metrics_secure,
        metrics_cert_dir=args.metrics_cert_path,
        health_probe_bind_address=args.health_probe_bind_address,
        graceful_shutdown_timeout=args.graceful_shutdown_timeout,
        shutdown_delay=args.shutdown_delay,
        cache_sync_timeout=args.cache_sync_timeout,
        max_concurrent_reconciles=args.max_concurrent_reconciles,
        component=COMPONENT,
    )
    try:
        limiter = (
            TokenBucket(args.kube_api_qps, args.kube_api_burst) if args.kube_api_qps > 0 else None
        )
        rest = RestClient(
            load_configuration(args.kubeconfig),
            user_agent=f"{USER_AGENT} ({identity})",
            rate_limiter=limiter,
        )
    except Exception as exc:
        log.error("cannot load a Kubernetes client configuration: %s", exc)
        return 1
    problem = _server_release_problem(rest)
    if problem:
        log.error("%s", problem)
        return 1
    manager = Manager(rest, options)
    shard = _attach_shard(args, manager)
    if args.cronjob_controller:
        cronjob.setup(manager, shard=shard)
        concurrencygroup.setup(manager)
    if args.configdeployment_controller:
        configdeployment.setup(manager)
    try:
        _add_webhook_server(args, manager)
    except OSError as exc:
        log.error("cannot serve webhooks on port %d: %s", args.webhook_port, exc)
        return 1
    log.info("starting manager", extra={"version": __version__, "pid": os.getpid()})
    try:
        return manager.run()
    except SelfSignedError as exc:  # no --metrics-cert-path and no openssl to make one
        log.error("%s", exc)
        return 1


def _server_release_problem(rest: RestClient) -> str | None:
    """Why the manager must not start against the API server behind ``rest`` (one line
    naming the release found and the one needed), or None. One request, once, at start."""
    from cronjob_operator.runtime import errors
    from cronjob_operator.runtime.client import server_version

    try:
        found = server_version(rest)
    except (errors.ApiError, errors.TransportError, ValueError) as exc:
        return f"cannot read the Kubernetes release of the API server at {rest.host}: {exc}"
    if (found.major, found.minor) >= OLDEST_SUPPORTED_RELEASE:
        return None
    needed = ".".join(map(str, OLDEST_SUPPORTED_RELEASE))
    return (
        f"the API server at {rest.host} runs Kubernetes {found.git_version}; "
        f"cronjob-operator {__version__} needs {needed} or newer: upgrade the cluster "
        "(the supported releases are listed in docs/install.md)"
    )


def _add_webhook_server(args: argparse.Namespace, manager: Manager) -> None:
    """Serve the webhooks (a manager Runnable on every replica) with a readiness check."""
    from cronjob_operator.runtime.webhook import WebhookServer
    from cronjob_operator.webhooks import conversion, manifests

    if not args.webhook_port:
        return
    if args.enable_http2:
        log.warning("--enable-http2 has no effect: the webhook server speaks HTTP/1.1 only")
    server = WebhookServer(
        ("", args.webhook_port),
        Path(args.webhook_cert_dir),
        manifests.routes(),
        cert_advice=WEBHOOK_CERT_ADVICE,
        client_ca=Path(args.webhook_client_ca) if args.webhook_client_ca else None,
        anonymous=[conversion.PATH],  # the API server presents no certificate to convert
    )
    manager.add_ready_check("webhook", server.ready)
    manager.on_shutdown(server.drain)
    if args.webhook_cert_secret:
        _add_cert_rotator(args, manager, server.port)
    manager.add(server)
    log.info("serving webhooks", extra={"port": server.port, "cert_dir": args.webhook_cert_dir})


def _add_cert_rotator(args: argparse.Namespace, manager: Manager, port: int) -> None:
    """Make, rotate and inject the webhook certificate (``--webhook-cert-secret``) and make
    readiness wait until the certificate served on ``port`` is trusted where injected."""
    from cronjob_operator.runtime.certrotation import CertRotator, RotatorConfig, dns_names
    from cronjob_operator.runtime.client import LiveReader

    namespace = _own_namespace()
    config = RotatorConfig(
        namespace=namespace,
        secret_name=args.webhook_cert_secret,
        dns_names=dns_names(args.webhook_service, namespace),
        cert_dir=Path(args.webhook_cert_dir),
        targets=tuple(args.inject_ca_bundle),
        validity=args.webhook_cert_validity,
    )
    elector = manager.elector
    rotator = CertRotator(
        LiveReader(manager.rest),
        manager.client,
        config,
        leading=(lambda: True) if elector is None else (lambda: elector.is_leader),
        serving_address=("127.0.0.1", port),
        watch=manager.rest,
    )
    manager.add_ready_check("webhook-certificate", rotator.ready)
    manager.add(rotator)


def print_crds() -> int:
    """Write every generated CRD to stdout as a YAML stream."""
    from cronjob_operator.api import crdgen

    sys.stdout.write("---\n".join(crdgen.render_yaml(crd) for crd in crdgen.generate_crds()))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """The ``cronjob-operator`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "run":
        problem = (
            _metrics_flags_problem(args)
            or _leader_election_flags_problem(args)
            or _sharding_flags_problem(args)
            or _webhook_cert_flags_problem(args)
        )
        if problem:
            parser.error(problem)
    if args.command == "version":
        print(f"cronjob-operator {__version__}")
        return 0
    if args.command == "crd":
        return print_crds()
    if args.command == "migrate-storage":
        return migrate_storage(args)
    return run(args)
