"""The manager's own webhook certificate: the PKI (``_pki``) and the rotator on a fake API
server, serving through a real ``WebhookServer`` so that readiness judges the certificate
actually served."""

from __future__ import annotations

import base64
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from cronjob_operator import cli
from cronjob_operator.envtest import wait_for
from cronjob_operator.runtime import errors, kinds
from cronjob_operator.runtime.certrotation import (
    CUSTOM_RESOURCE_DEFINITION,
    MUTATING_WEBHOOK_CONFIGURATION,
    VALIDATING_WEBHOOK_CONFIGURATION,
    CertRotator,
    RotatorConfig,
    ServingPair,
    Target,
    client_configs,
    dns_names,
    make_pair,
    parse_target,
    trusts,
    why_renew,
)
from cronjob_operator.runtime.certrotation._rotator import RETRY_SECONDS, write_if_changed
from cronjob_operator.runtime.clock import FakeClock
from cronjob_operator.runtime.fake import FakeClient
from cronjob_operator.runtime.webhook import WebhookServer

START = datetime(2026, 1, 1, tzinfo=UTC)
NAMES = dns_names("webhook-service", "system")
YEAR = timedelta(days=365)
SECRET = "webhook-server-cert"
TARGETS = (
    Target(VALIDATING_WEBHOOK_CONFIGURATION, "validating"),
    Target(MUTATING_WEBHOOK_CONFIGURATION, "mutating"),
    Target(CUSTOM_RESOURCE_DEFINITION, "cronjobs.batch.example.io"),
)


# --- the PKI ------------------------------------------------------------------------


def test_a_fresh_pair_names_the_service_and_needs_nothing() -> None:
    pair = make_pair(NAMES, now=START, validity=YEAR)
    assert why_renew(pair, NAMES, now=START) is None
    assert trusts(pair.ca_bundle, pair.cert, now=START)


def test_a_pair_is_due_after_two_thirds_of_its_life_and_not_before() -> None:
    pair = make_pair(NAMES, now=START, validity=YEAR)
    assert why_renew(pair, NAMES, now=START + timedelta(days=240)) is None
    problem = why_renew(pair, NAMES, now=START + timedelta(days=245))
    assert problem is not None
    assert "due for renewal" in problem


def test_a_short_validity_is_renewed_well_before_it_expires() -> None:
    pair = make_pair(NAMES, now=START, validity=timedelta(seconds=60))
    assert why_renew(pair, NAMES, now=START + timedelta(seconds=30)) is None
    assert why_renew(pair, NAMES, now=START + timedelta(seconds=40)) is not None


def test_a_pair_for_another_service_is_renewed() -> None:
    pair = make_pair(dns_names("old-service", "system"), now=START, validity=YEAR)
    problem = why_renew(pair, NAMES, now=START)
    assert problem == f"the certificate does not name {', '.join(sorted(NAMES))}"


def test_a_key_that_is_not_the_certificates_is_renewed() -> None:
    one, other = (make_pair(NAMES, now=START, validity=YEAR) for _ in range(2))
    mixed = type(one)(one.ca_bundle, one.cert, other.key)
    assert why_renew(mixed, NAMES, now=START) == "the key is not the certificate's"


def test_a_certificate_no_ca_of_the_bundle_issued_is_renewed() -> None:
    one, other = (make_pair(NAMES, now=START, validity=YEAR) for _ in range(2))
    foreign = type(one)(other.ca_bundle, one.cert, one.key)
    problem = why_renew(foreign, NAMES, now=START)
    assert problem is not None
    assert "no CA of the bundle issued it" in problem


def test_a_bundle_with_the_previous_ca_trusts_both_certificates() -> None:
    old = make_pair(NAMES, now=START, validity=YEAR)
    new = make_pair(NAMES, now=START, validity=YEAR, previous_ca=old.ca_bundle)
    assert trusts(new.ca_bundle, old.cert, now=START)
    assert trusts(new.ca_bundle, new.cert, now=START)
    assert not trusts(old.ca_bundle, new.cert, now=START)


def test_an_expired_certificate_is_not_trusted() -> None:
    pair = make_pair(NAMES, now=START, validity=timedelta(hours=1))
    assert not trusts(pair.ca_bundle, pair.cert, now=START + timedelta(hours=2))


def test_targets_parse_from_kind_slash_name() -> None:
    assert parse_target("ValidatingWebhookConfiguration/v") == Target(
        VALIDATING_WEBHOOK_CONFIGURATION, "v"
    )
    with pytest.raises(ValueError, match="customresourcedefinition, mutatingwebhook"):
        parse_target("secret/x")


# --- the rotator on a fake API server -----------------------------------------------


def webhook_configuration(kind: kinds.Kind, name: str) -> dict[str, Any]:
    hook = {"name": "v.example.io", "clientConfig": {"service": {"name": "webhook-service"}}}
    return {"apiVersion": kind.api_version, "kind": kind.kind, "metadata": {"name": name},
            "webhooks": [hook, {**hook, "name": "w.example.io"}]}  # fmt: skip


def conversion_crd(name: str) -> dict[str, Any]:
    client = {"service": {"name": "webhook-service", "path": "/convert"}}
    return {
        "apiVersion": CUSTOM_RESOURCE_DEFINITION.api_version,
        "kind": CUSTOM_RESOURCE_DEFINITION.kind,
        "metadata": {"name": name},
        "spec": {"conversion": {"strategy": "Webhook", "webhook": {"clientConfig": client}}},
    }


@pytest.fixture
def api() -> FakeClient:
    """The targets, and the Secret shipped empty as config/webhook-certs ships it."""
    fake = FakeClient()
    fake.add(kinds.SECRET, {"apiVersion": "v1", "kind": "Secret",
                            "metadata": {"name": SECRET, "namespace": "system"}})  # fmt: skip
    for target in TARGETS:
        if target.kind is CUSTOM_RESOURCE_DEFINITION:
            fake.add(target.kind, conversion_crd(target.name))
        else:
            fake.add(target.kind, webhook_configuration(target.kind, target.name))
    return fake


class Replica:
    """A webhook server and the rotator feeding its certificate directory."""

    def __init__(self, api: FakeClient, cert_dir: Path, clock: FakeClock) -> None:
        cert_dir.mkdir()
        self.server = WebhookServer(("127.0.0.1", 0), cert_dir, {})
        self.leading = True
        self.rotator = CertRotator(
            api,
            api,
            RotatorConfig("system", SECRET, NAMES, cert_dir, TARGETS, propagation_delay=0),
            leading=lambda: self.leading,
            serving_address=("127.0.0.1", self.server.port),
            clock=clock,
        )
        self.server.start()

    def stop(self) -> None:
        self.server.stop()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START)


@pytest.fixture
def replicas(api: FakeClient, tmp_path: Path, clock: FakeClock) -> Iterator[list[Replica]]:
    made = [Replica(api, tmp_path / f"replica-{i}", clock) for i in range(2)]
    made[1].leading = False
    yield made
    for replica in made:
        replica.stop()


def stored_pair(api: FakeClient) -> dict[str, bytes]:
    data = api.get(kinds.SECRET, SECRET, "system")["data"]
    return {key: base64.b64decode(value) for key, value in data.items()}


def injected(api: FakeClient) -> set[bytes]:
    """Every caBundle of every target, decoded."""
    return {
        base64.b64decode(config.get("caBundle", ""))
        for target in TARGETS
        for config in client_configs(api.get(target.kind, target.name))
    }


def test_the_leader_fills_the_secret_and_injects_its_ca_everywhere_first(
    api: FakeClient, replicas: list[Replica]
) -> None:
    leader = replicas[0]
    assert leader.rotator.ready() is not None  # nothing read yet
    leader.rotator.sync()
    stored = stored_pair(api)
    assert injected(api) == {stored["ca.crt"]}
    assert [(w.verb, w.kind.kind) for w in api.writes] == [
        ("update", "ValidatingWebhookConfiguration"),
        ("update", "MutatingWebhookConfiguration"),
        ("update", "CustomResourceDefinition"),
        ("update", "Secret"),
    ]
    assert set(stored) == {"ca.crt", "tls.crt", "tls.key"}
    assert (leader.rotator.config.cert_dir / "tls.crt").read_bytes() == stored["tls.crt"]
    assert leader.rotator.ready() is None


def test_a_follower_writes_nothing_and_serves_the_leaders_secret(
    api: FakeClient, replicas: list[Replica]
) -> None:
    leader, follower = replicas
    follower.rotator.sync()
    assert api.writes == []
    assert follower.rotator.ready() == f"no certificate served on port {follower.server.port} yet"
    leader.rotator.sync()
    follower.rotator.sync()
    assert api.writes_of("update", kinds.SECRET)
    assert len(api.writes) == 4
    assert follower.rotator.ready() is None


def test_rotation_keeps_the_old_ca_trusted_until_every_replica_switched(
    api: FakeClient, replicas: list[Replica], clock: FakeClock
) -> None:
    leader, follower = replicas
    leader.rotator.sync()
    assert follower.rotator.sync() == 60  # the resync: renewal is 243 days away
    old = stored_pair(api)
    clock.advance(timedelta(days=250))
    # Due, and the leader has not renewed it yet: the follower waits, never a loop.
    assert follower.rotator.sync() == RETRY_SECONDS
    assert stored_pair(api) == old
    leader.rotator.sync()
    new = stored_pair(api)
    assert new["tls.crt"] != old["tls.crt"]
    assert new["ca.crt"].endswith(old["ca.crt"])  # the new CA, then the previous one
    assert injected(api) == {new["ca.crt"]}
    assert follower.rotator.ready() is None  # still serving the old certificate: trusted
    follower.rotator.sync()
    assert (follower.rotator.config.cert_dir / "tls.crt").read_bytes() == new["tls.crt"]
    assert follower.rotator.ready() is None


def test_a_deleted_secret_is_made_again_trusting_the_ca_still_served(
    api: FakeClient, replicas: list[Replica]
) -> None:
    leader = replicas[0]
    leader.rotator.sync()
    old = stored_pair(api)
    api.delete(kinds.SECRET, SECRET, namespace="system")
    leader.rotator.sync()
    new = stored_pair(api)
    assert new["tls.crt"] != old["tls.crt"]
    assert trusts(new["ca.crt"], old["tls.crt"], now=START)


def test_a_target_reapplied_without_the_bundle_gets_it_back(
    api: FakeClient, replicas: list[Replica]
) -> None:
    leader = replicas[0]
    leader.rotator.sync()
    stored = stored_pair(api)
    validating = api.get(VALIDATING_WEBHOOK_CONFIGURATION, "validating")
    api.update(VALIDATING_WEBHOOK_CONFIGURATION, {**validating, **webhook_configuration(
        VALIDATING_WEBHOOK_CONFIGURATION, "validating"
    ), "metadata": validating["metadata"]})  # fmt: skip
    leader.rotator.sync()
    assert injected(api) == {stored["ca.crt"]}
    assert stored_pair(api) == stored  # re-injected, not rotated


def test_a_conflict_on_injection_leaves_the_secret_unwritten(
    api: FakeClient, replicas: list[Replica]
) -> None:
    leader = replicas[0]

    def conflict(action: Any) -> BaseException:
        return errors.Conflict({"message": "the object has been modified"}, code=409)

    api.prepend_reactor("update", MUTATING_WEBHOOK_CONFIGURATION, conflict)
    with pytest.raises(errors.Conflict):
        leader.rotator.sync()
    assert not api.writes_of("update", kinds.SECRET)
    assert not (leader.rotator.config.cert_dir / "tls.crt").exists()


def test_readiness_waits_for_every_target_to_trust_the_served_certificate(
    api: FakeClient, replicas: list[Replica]
) -> None:
    leader, follower = replicas
    leader.rotator.sync()
    follower.rotator.sync()
    crd = api.get(CUSTOM_RESOURCE_DEFINITION, TARGETS[2].name)
    api.update(CUSTOM_RESOURCE_DEFINITION, {**conversion_crd(crd["metadata"]["name"]),
                                            "metadata": crd["metadata"]})  # fmt: skip
    follower.rotator.sync()
    assert follower.rotator.ready() == (
        f"the CA bundle of CustomResourceDefinition {TARGETS[2].name} does not trust "
        "the certificate served yet"
    )
    api.delete(CUSTOM_RESOURCE_DEFINITION, TARGETS[2].name)
    follower.rotator.sync()
    assert follower.rotator.ready() == (
        f"CustomResourceDefinition {TARGETS[2].name} not found: the API server cannot call "
        "the webhook through it"
    )


def test_run_stops_when_asked(api: FakeClient, replicas: list[Replica]) -> None:
    leader = replicas[0]
    stop = threading.Event()
    thread = threading.Thread(target=leader.rotator.run, args=(stop,))
    thread.start()
    # Stopped only once the first sync is done: the loop is then in its 60 s wait.
    wait_for(lambda: api.writes_of("update", kinds.SECRET), 10, message="the first sync")
    assert leader.rotator.config.resync == 60
    stop.set()
    thread.join(5)
    assert not thread.is_alive()


def test_the_cli_needs_a_service_for_a_made_certificate() -> None:
    parser = cli.build_parser()
    args = parser.parse_args(["run", "--webhook-cert-secret=s"])
    assert cli._webhook_cert_flags_problem(args) == (
        "--webhook-cert-secret needs --webhook-service: the certificate names its DNS names"
    )
    args = parser.parse_args(["run", "--inject-ca-bundle=customresourcedefinition/c"])
    assert "give --webhook-cert-secret" in (cli._webhook_cert_flags_problem(args) or "")
    args = parser.parse_args(["run", "--webhook-cert-secret=s", "--webhook-service=w",
                              "--webhook-cert-validity=90s"])  # fmt: skip
    assert cli._webhook_cert_flags_problem(args) is None
    assert args.webhook_cert_validity == timedelta(seconds=90)


# --- what is injected and what is served --------------------------------------------


def store(api: FakeClient, pair: ServingPair) -> None:
    """The Secret as the leader would have written it, holding ``pair``."""
    data = {"ca.crt": pair.ca_bundle, "tls.crt": pair.cert, "tls.key": pair.key}
    encoded = {key: base64.b64encode(value).decode() for key, value in data.items()}
    api.add(kinds.SECRET, {"apiVersion": "v1", "kind": "Secret",
                           "metadata": {"name": SECRET, "namespace": "system"},
                           "data": encoded})  # fmt: skip


def replace_stored(api: FakeClient, pair: ServingPair) -> None:
    api.delete(kinds.SECRET, SECRET, namespace="system")
    store(api, pair)


@pytest.mark.parametrize("stranger_first", [False, True])
def test_the_leader_injects_only_the_issuing_ca_and_the_previous_one(
    api: FakeClient, replicas: list[Replica], stranger_first: bool
) -> None:
    previous = make_pair(NAMES, now=START, validity=YEAR)
    pair = make_pair(NAMES, now=START, validity=YEAR, previous_ca=previous.ca_bundle)
    stranger = make_pair(NAMES, now=START, validity=YEAR).ca_bundle
    bundle = stranger + pair.ca_bundle if stranger_first else pair.ca_bundle + stranger
    store(api, ServingPair(bundle, pair.cert, pair.key))
    replicas[0].rotator.sync()
    assert injected(api) == {pair.ca_bundle}  # the issuing CA, then the previous one
    assert stored_pair(api)["tls.crt"] == pair.cert  # not a reason to rotate


def expired(pair: ServingPair) -> ServingPair:
    return make_pair(NAMES, now=START - 2 * YEAR, validity=YEAR)


def foreign_key(pair: ServingPair) -> ServingPair:
    return ServingPair(pair.ca_bundle, pair.cert, make_pair(NAMES, now=START, validity=YEAR).key)


def foreign_ca(pair: ServingPair) -> ServingPair:
    return ServingPair(make_pair(NAMES, now=START, validity=YEAR).ca_bundle, pair.cert, pair.key)


@pytest.mark.parametrize("spoil", [expired, foreign_key, foreign_ca])
def test_a_follower_serves_only_a_pair_that_matches_is_valid_and_chains_to_the_ca(
    api: FakeClient, replicas: list[Replica], spoil: Any
) -> None:
    leader, follower = replicas
    leader.rotator.sync()
    follower.rotator.sync()
    cert_dir = follower.rotator.config.cert_dir
    served = {name: (cert_dir / name).read_bytes() for name in ("tls.crt", "tls.key")}
    good = ServingPair(*(stored_pair(api)[k] for k in ("ca.crt", "tls.crt", "tls.key")))
    replace_stored(api, spoil(good))
    assert follower.rotator.sync() == RETRY_SECONDS  # waits for the leader to renew it
    assert {name: (cert_dir / name).read_bytes() for name in served} == served


def test_the_key_file_is_never_written_through_a_link(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.write_bytes(b"not yours")
    cert_dir = tmp_path / "certs"
    cert_dir.mkdir()
    (cert_dir / ".tls.key.new").symlink_to(outside)
    write_if_changed(cert_dir / "tls.key", b"key")
    assert outside.read_bytes() == b"not yours"
    assert not (cert_dir / "tls.key").is_symlink()
    assert (cert_dir / "tls.key").read_bytes() == b"key"
    assert (cert_dir / "tls.key").stat().st_mode & 0o777 == 0o600


def test_a_missing_secret_it_may_not_create_leaves_every_bundle_as_it_is(
    api: FakeClient, replicas: list[Replica]
) -> None:
    """The shipped install grants no `create` of Secrets (config/webhook-certs ships the
    Secret): a deleted one must not make the leader inject a new CA on every retry, which
    would push the CA the replicas still serve under out of the bundle."""

    def forbidden(action: Any) -> BaseException:
        return errors.Forbidden({"message": "secrets is forbidden: cannot create"}, code=403)

    leader = replicas[0]
    leader.rotator.sync()
    bundles = injected(api)
    api.delete(kinds.SECRET, SECRET, namespace="system")
    api.prepend_reactor("create", kinds.SECRET, forbidden)
    for _ in range(3):
        with pytest.raises(errors.Forbidden):
            leader.rotator.sync()
    assert injected(api) == bundles
