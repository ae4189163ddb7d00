"""The webhook serving certificate, made, rotated and injected by the manager itself.

What cert-controller (Gatekeeper, kubebuilder projects without cert-manager), Kyverno and
KEDA do: a manager Runnable on every replica that keeps a CA and a serving certificate in
one Secret of its own namespace and the CA bundle in the objects the API server calls the
webhook through (``Target``: the webhook configurations, a CRD's conversion webhook).

Every replica, on each ``sync`` (at once when the Secret changes, which a watch on it
reports; otherwise every ``resync`` seconds, and at the renewal time of the certificate;
every ``RETRY_SECONDS`` while the Secret is missing or its certificate due):

1. reads the Secret and the targets;
2. the leader only, writing through the fenced client so a replica that lost the Lease
   writes nothing, and with optimistic concurrency (every update carries the
   ``resourceVersion`` it read; a ``Conflict`` is retried on the next sync): when the
   Secret is missing (then first created empty, before anything is injected, so a
   refusal changes nothing: the shipped install ships the Secret and grants no
   ``create``), unusable, names other hosts or has used up two thirds of its life
   (``_pki.why_renew``), makes a new pair and injects the bundle (new CA + the previous
   one) into every target, waits ``propagation_delay`` for the API server to see it, and
   only then writes the Secret, so no replica serves a certificate the API server does
   not trust yet. Otherwise it re-injects the pair's bundle into any target that
   differs (a target re-applied or recreated without it). What it injects is only the
   CA that issued the certificate and the previous one (``_pki.injected_bundle``), never
   another certificate the Secret's ``ca.crt`` may hold;
3. writes the Secret's pair into ``cert_dir`` (a tmpfs), where the webhook server's
   ``CertWatcher`` picks it up on the next connection, once it has checked it
   (``_pki.unusable``: the key is the certificate's, the certificate is valid now and
   was issued by a CA of the bundle); a pair that fails is not served, and the replica
   keeps what it served and looks again every ``RETRY_SECONDS``. The files are written
   through a new temporary file (``O_EXCL|O_NOFOLLOW``, mode 0600), never through a
   link, and renamed into place;
4. remembers each target's bundle for ``ready``: the readiness check is false until the
   certificate this replica's webhook server actually serves (a TLS handshake with it)
   is trusted by every target's bundle.
"""

from __future__ import annotations

import base64
import dataclasses
import logging
import os
import socket
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from cronjob_operator.runtime import errors, objects
from cronjob_operator.runtime.certrotation._pki import (
    CA_FILE,
    ServingPair,
    first_certificate,
    injected_bundle,
    issuing_ca,
    make_pair,
    renewal_time,
    trusts,
    unusable,
    why_renew,
)
from cronjob_operator.runtime.client import ObjectWriter, Reader, RestClient, WatchStream
from cronjob_operator.runtime.clock import Clock, utc_now
from cronjob_operator.runtime.kinds import SECRET, Kind

log = logging.getLogger(__name__)

VALIDATING_WEBHOOK_CONFIGURATION = Kind(
    "admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration",
    "validatingwebhookconfigurations", namespaced=False,
)  # fmt: skip
MUTATING_WEBHOOK_CONFIGURATION = Kind(
    "admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration",
    "mutatingwebhookconfigurations", namespaced=False,
)  # fmt: skip
CUSTOM_RESOURCE_DEFINITION = Kind(
    "apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions",
    namespaced=False,
)  # fmt: skip
TARGET_KINDS: Mapping[str, Kind] = {
    kind.kind.lower(): kind
    for kind in (
        VALIDATING_WEBHOOK_CONFIGURATION,
        MUTATING_WEBHOOK_CONFIGURATION,
        CUSTOM_RESOURCE_DEFINITION,
    )
}
"""The kinds a CA bundle is injected into, by lower-case kind name."""

CERT_FILE, KEY_FILE = "tls.crt", "tls.key"
RETRY_SECONDS = 2.0
"""How soon a sync that failed (a Conflict, the API server unreachable) is tried again."""
STOP_POLL_SECONDS = 0.5
"""How often a wait between syncs looks whether the manager is stopping."""
WATCH_SECONDS = 300
"""How long one watch of the Secret lasts before it is reopened."""


@dataclasses.dataclass(frozen=True, slots=True)
class Target:
    """An object the API server calls the webhook through: its CA bundle is injected."""

    kind: Kind
    name: str

    def __str__(self) -> str:
        return f"{self.kind.kind} {self.name}"


@dataclasses.dataclass(frozen=True, slots=True)
class RotatorConfig:
    """Where the certificate lives, whom it names, where its CA goes, how long it lives."""

    namespace: str
    secret_name: str
    dns_names: tuple[str, ...]
    cert_dir: Path
    targets: tuple[Target, ...]
    validity: timedelta = timedelta(days=365)
    resync: float = 60.0
    propagation_delay: float = 2.0

    @property
    def secret(self) -> str:
        return f"Secret {self.namespace}/{self.secret_name}"


def parse_target(text: str) -> Target:
    """``kind/name`` (e.g. ``validatingwebhookconfiguration/my-webhooks``) as a Target;
    raises ``ValueError`` naming the kinds accepted."""
    kind, _, name = text.partition("/")
    if kind.lower() not in TARGET_KINDS or not name:
        raise ValueError(
            f"{text!r} is not KIND/NAME with KIND one of {', '.join(sorted(TARGET_KINDS))}"
        )
    return Target(TARGET_KINDS[kind.lower()], name)


def client_configs(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The ``clientConfig`` maps of an object's webhooks (none for a CRD without a
    conversion webhook); mutable views into ``obj``."""
    if obj.get("kind") == CUSTOM_RESOURCE_DEFINITION.kind:
        webhook = ((obj.get("spec") or {}).get("conversion") or {}).get("webhook") or {}
        return [webhook["clientConfig"]] if "clientConfig" in webhook else []
    return [hook["clientConfig"] for hook in obj.get("webhooks") or [] if "clientConfig" in hook]


def _bundles(obj: Mapping[str, Any]) -> list[bytes]:
    return [base64.b64decode(config.get("caBundle") or "") for config in client_configs(obj)]


def _pair_of(secret: Mapping[str, Any] | None) -> ServingPair | None:
    data = (secret or {}).get("data") or {}
    if not all(data.get(key) for key in (CA_FILE, CERT_FILE, KEY_FILE)):
        return None
    ca, cert, key = (base64.b64decode(data[k]) for k in (CA_FILE, CERT_FILE, KEY_FILE))
    return ServingPair(ca, cert, key)


def write_if_changed(path: Path, content: bytes) -> None:
    """Replace ``path`` atomically (a temporary file renamed over it), owner-only. The
    temporary file is made new (``O_EXCL|O_NOFOLLOW``): whatever was left in its place,
    a link included, is removed first, and anything that appears there meanwhile makes
    the open fail rather than write through it."""
    try:
        if path.read_bytes() == content:
            return
    except OSError:
        pass
    temporary = path.with_name(f".{path.name}.new")
    temporary.unlink(missing_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    descriptor = os.open(temporary, flags, 0o600)
    with os.fdopen(descriptor, "wb") as file:
        file.write(content)
    os.replace(temporary, path)


class CertRotator:
    """Keeps the webhook certificate (see the module docstring); a Runnable on every replica."""

    needs_leader_election = False

    def __init__(
        self,
        reader: Reader,
        writer: ObjectWriter,
        config: RotatorConfig,
        *,
        leading: Callable[[], bool],
        serving_address: tuple[str, int],
        watch: RestClient | None = None,
        clock: Clock = utc_now,
    ) -> None:
        """``reader`` reads the API server itself (not a cache); ``writer`` is the
        manager's fenced client; ``leading`` says whether this replica may write;
        ``serving_address`` is the webhook server whose certificate ``ready`` checks;
        ``watch``, when given, watches the Secret so that a change is seen at once."""
        self.config = config
        self._reader = reader
        self._writer = writer
        self._watch = watch
        self._leading = leading
        self._serving_address = serving_address
        self._clock = clock
        self._lock = threading.Lock()
        self._bundles: dict[Target, list[bytes]] | None = None
        self._missing: list[Target] = []
        self._stream: WatchStream | None = None

    # --- the Runnable ---------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Sync until ``stop`` is set; a watch of the Secret wakes the loop early."""
        wake = threading.Event()
        if self._watch is not None:
            threading.Thread(
                target=self._watch_secret,
                args=(self._watch, stop, wake),
                name="cert-rotator-watch",
                daemon=True,
            ).start()
        while not stop.is_set():
            wake.clear()
            try:
                delay = self.sync(stop)
            except (errors.ApiError, errors.TransportError) as exc:
                log.warning("webhook certificate sync failed, retrying: %s", exc)
                delay = RETRY_SECONDS
            _wait_either(stop, wake, delay)
        stream = self._stream
        if stream is not None:
            stream.close()

    def _watch_secret(self, rest: RestClient, stop: threading.Event, wake: threading.Event) -> None:
        params = {
            "fieldSelector": f"metadata.name={self.config.secret_name}",
            "timeoutSeconds": WATCH_SECONDS,
        }
        path = SECRET.collection_path(self.config.namespace)
        while not stop.is_set():
            try:
                self._stream = rest.watch(path, params, read_timeout=WATCH_SECONDS + 30)
                for _event in self._stream:
                    wake.set()
            except Exception as exc:  # the loop's resync covers what the watch misses
                if not stop.is_set():
                    log.debug("watch of %s ended: %s", self.config.secret, exc)
            stop.wait(RETRY_SECONDS)  # never a tight loop on a watch that ends at once

    # --- one pass -------------------------------------------------------------------

    def sync(self, stop: threading.Event | None = None) -> float:
        """One pass (module docstring); returns the seconds until the next is due.
        Raises the typed API error of a read or write that failed."""
        now = self._clock()
        secret = self._get(SECRET, self.config.secret_name, self.config.namespace)
        pair = _pair_of(secret)
        found = {t: self._get(t.kind, t.name) for t in self.config.targets}
        if self._leading():
            pair = self._lead(secret, pair, found, now, stop or threading.Event())
        pair = self._serve(pair, now)
        with self._lock:
            self._bundles = {t: _bundles(obj) for t, obj in found.items() if obj is not None}
            self._missing = [t for t, obj in found.items() if obj is None]
        return self._next_delay(pair, now)

    def _lead(
        self,
        secret: objects.Obj | None,
        pair: ServingPair | None,
        found: dict[Target, objects.Obj | None],
        now: datetime,
        stop: threading.Event,
    ) -> ServingPair:
        """The leader's part: the pair renewed when it must be (a new pair made, its
        bundle injected, a wait for the API server, then the Secret written), else its
        bundle re-injected wherever it is missing; returns the pair now stored."""
        problem = (
            why_renew(pair, self.config.dns_names, now=now)
            if pair is not None
            else "it does not exist or lacks ca.crt, tls.crt or tls.key"
        )
        if pair is not None and problem is None:
            self._inject(found, injected_bundle(pair, now=now))
            return pair
        if secret is None:
            secret = self._create_empty_secret()
        log.info("renewing the webhook certificate in %s: %s", self.config.secret, problem)
        previous = (issuing_ca(pair, now=now) if pair is not None else b"") or (
            self._injected_ca(found)
        )
        new = make_pair(
            self.config.dns_names, now=now, validity=self.config.validity, previous_ca=previous
        )
        self._inject(found, new.ca_bundle)
        stop.wait(self.config.propagation_delay)
        self._store(secret, new)
        return new

    def _serve(self, pair: ServingPair | None, now: datetime) -> ServingPair | None:
        """Write ``pair`` where the webhook server reads it, once it passes
        ``_pki.unusable``; returns it, or None when it was not served."""
        if pair is None:
            return None
        problem = unusable(pair, now=now)
        if problem is not None:
            log.warning(
                "not serving the webhook certificate in %s (%s): waiting for the leader "
                "to renew it",
                self.config.secret,
                problem,
            )
            return None
        write_if_changed(self.config.cert_dir / KEY_FILE, pair.key)
        write_if_changed(self.config.cert_dir / CERT_FILE, pair.cert)
        return pair

    def _next_delay(self, pair: ServingPair | None, now: datetime) -> float:
        """The resync, or sooner the renewal time; ``RETRY_SECONDS`` while there is no
        pair or it is due (a follower waiting for the leader, never a loop without a wait)."""
        due = renewal_time(pair.cert) if pair is not None else None
        if due is None or due <= now:
            return min(self.config.resync, RETRY_SECONDS)
        return min(self.config.resync, (due - now).total_seconds())

    def _get(self, kind: Kind, name: str, namespace: str | None = None) -> objects.Obj | None:
        try:
            return self._reader.get(kind, name, namespace)
        except errors.NotFound:
            return None

    def _create_empty_secret(self) -> objects.Obj:
        """The Secret, created without data (as the install ships it), before anything
        is injected: a refusal (no ``create`` granted) changes nothing."""
        metadata = {"name": self.config.secret_name, "namespace": self.config.namespace}
        log.info("creating %s, which is missing", self.config.secret)
        return self._writer.create(SECRET, {"metadata": metadata})

    def _store(self, secret: objects.Obj, pair: ServingPair) -> None:
        """Write ``pair`` into the Secret, updated with the resourceVersion read."""
        data = {CA_FILE: pair.ca_bundle, CERT_FILE: pair.cert, KEY_FILE: pair.key}
        encoded = {key: base64.b64encode(value).decode() for key, value in data.items()}
        self._writer.update(SECRET, {**objects.thaw(secret), "data": encoded})
        log.info(
            "stored a new webhook certificate in %s",
            self.config.secret,
            extra={"renew_at": str(renewal_time(pair.cert)), "dns_names": self.config.dns_names},
        )

    def _injected_ca(self, found: Mapping[Target, objects.Obj | None]) -> bytes:
        """The first CA the targets trust now (what old replicas may still serve under)."""
        for obj in found.values():
            for bundle in _bundles(obj or {}):
                first = first_certificate(bundle)
                if first:
                    return first
        return b""

    def _inject(self, found: dict[Target, objects.Obj | None], bundle: bytes) -> None:
        """Set ``bundle`` in every client config of every target that differs; ``found``
        is updated with what the API server returned."""
        encoded = base64.b64encode(bundle).decode()
        for target, obj in found.items():
            if obj is None or all(c.get("caBundle") == encoded for c in client_configs(obj)):
                continue
            changed = objects.thaw(obj)
            for config in client_configs(changed):
                config["caBundle"] = encoded
            found[target] = self._writer.update(target.kind, changed)
            log.info("injected the webhook CA bundle into %s", target)

    # --- readiness ------------------------------------------------------------------

    def ready(self) -> str | None:
        """The readiness check: None once every target's CA bundle trusts the certificate
        this replica's webhook server serves."""
        with self._lock:
            bundles, missing = self._bundles, list(self._missing)
        if bundles is None:
            return f"the webhook certificate has not been read from {self.config.secret} yet"
        if missing:
            names = ", ".join(map(str, missing))
            return f"{names} not found: the API server cannot call the webhook through it"
        served = self._served_certificate()
        if served is None:
            return f"no certificate served on port {self._serving_address[1]} yet"
        now = self._clock()
        for target, target_bundles in bundles.items():
            if not all(trusts(bundle, served, now=now) for bundle in target_bundles):
                return f"the CA bundle of {target} does not trust the certificate served yet"
        return None

    def _served_certificate(self) -> bytes | None:
        """The DER certificate a TLS handshake with our webhook server presents."""
        host, port = self._serving_address
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE  # we judge it ourselves, against each bundle
        try:
            with (
                socket.create_connection((_local(host), port), timeout=2) as raw,
                context.wrap_socket(raw) as tls,
            ):
                return tls.getpeercert(binary_form=True)
        except OSError:
            return None


def _local(host: str) -> str:
    """The address to reach a server bound to ``host`` from this process."""
    return "127.0.0.1" if host in ("", "0.0.0.0") else host


def _wait_either(stop: threading.Event, wake: threading.Event, seconds: float) -> None:
    """Wait until ``stop`` or ``wake`` is set, or ``seconds`` have passed (``stop`` is
    looked at every ``STOP_POLL_SECONDS``)."""
    deadline = time.monotonic() + seconds
    while not stop.is_set():
        left = deadline - time.monotonic()
        if left <= 0 or wake.wait(min(left, STOP_POLL_SECONDS)):
            return


def dns_names(service: str, namespace: str) -> tuple[str, ...]:
    """The names the API server calls a Service by: ``<service>.<namespace>.svc`` first."""
    return (f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.cluster.local")
