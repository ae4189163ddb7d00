"""The certificates themselves: make a CA and a serving certificate, and judge a stored pair.

The manager's own PKI is one CA per serving certificate: both are made together, the CA
signs the serving certificate and its key is then thrown away (never stored, so nothing
can sign another certificate with it), and both expire together. A rotation makes a new
pair; the bundle the API server trusts holds the new CA and the one before it, so a
replica still serving the old certificate stays trusted while it switches.

Keys are ECDSA P-256 and signatures ECDSA-SHA256, what the API server and Go's TLS
accept everywhere. ``why_renew`` is the one judgement of a stored pair: what is wrong
with it, or that it has used up ``RENEW_FRACTION`` of its life, or None.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime, timedelta

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

RENEW_FRACTION = 2 / 3
"""A pair is renewed once this much of its validity has passed (a year: after 243 days),
so a renewal that fails has a third of the lifetime to be retried before anything breaks."""

CLOCK_SKEW = timedelta(minutes=5)
"""How far before its creation a certificate is valid from, for clocks a little behind
(a tenth of the validity when that is shorter, so a short test validity stays usable)."""

MAX_COMMON_NAME = 64
"""X.509's limit on a common name; the DNS names, which are what TLS checks, have none."""

CA_FILE = "ca.crt"
"""The Secret key of the CA bundle (the new CA first, then the one before it)."""


@dataclasses.dataclass(frozen=True, slots=True)
class ServingPair:
    """PEM bytes: the CA bundle to trust, the serving certificate and its key."""

    ca_bundle: bytes
    cert: bytes
    key: bytes


_CA_KEY_USAGE = x509.KeyUsage(
    digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
    key_encipherment=False, data_encipherment=False, key_agreement=False,
    encipher_only=False, decipher_only=False,
)  # fmt: skip


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _pem(certificate: x509.Certificate) -> bytes:
    return certificate.public_bytes(serialization.Encoding.PEM)


def make_pair(
    dns_names: Sequence[str],
    *,
    now: datetime,
    validity: timedelta,
    previous_ca: bytes = b"",
) -> ServingPair:
    """A fresh CA and a serving certificate for ``dns_names`` valid ``validity`` from
    ``now``; the bundle is the new CA followed by ``previous_ca`` (PEM, may be empty)."""
    ca_key = ec.generate_private_key(ec.SECP256R1())
    key = ec.generate_private_key(ec.SECP256R1())
    start, end = now - min(CLOCK_SKEW, validity / 10), now + validity
    ca_name = _name(f"webhook-ca@{int(now.timestamp())}")
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_CA_KEY_USAGE, critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(dns_names[0][:MAX_COMMON_NAME]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName(name) for name in dns_names]), False
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return ServingPair(_pem(ca) + previous_ca, _pem(cert), key_pem)


def first_certificate(bundle: bytes) -> bytes:
    """The first certificate of a PEM bundle, as PEM (empty when there is none)."""
    try:
        certificates = x509.load_pem_x509_certificates(bundle)
    except ValueError:
        return b""
    return _pem(certificates[0]) if certificates else b""


def trusts(bundle: bytes, cert_pem_or_der: bytes, *, now: datetime) -> bool:
    """True when a CA of ``bundle`` issued this certificate and both are valid at ``now``."""
    try:
        cert = (
            x509.load_pem_x509_certificate(cert_pem_or_der)
            if cert_pem_or_der.lstrip().startswith(b"-----")
            else x509.load_der_x509_certificate(cert_pem_or_der)
        )
        cas = x509.load_pem_x509_certificates(bundle)
    except ValueError:
        return False
    return _valid_at(cert, now) and any(_issued(ca, cert, now) for ca in cas)


def _valid_at(certificate: x509.Certificate, now: datetime) -> bool:
    return certificate.not_valid_before_utc <= now < certificate.not_valid_after_utc


def _issued(ca: x509.Certificate, cert: x509.Certificate, now: datetime) -> bool:
    if not _valid_at(ca, now):
        return False
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def unusable(pair: ServingPair, *, now: datetime) -> str | None:
    """Why ``pair`` must not be served (a certificate or key that does not parse, a key
    that is not the certificate's, a certificate not valid at ``now`` or that no CA of
    the bundle valid at ``now`` issued), or None."""
    try:
        cert = x509.load_pem_x509_certificate(pair.cert)
        key = serialization.load_pem_private_key(pair.key, password=None)
    except ValueError as exc:
        return f"the certificate or key does not parse: {exc}"
    public = serialization.PublicFormat.SubjectPublicKeyInfo
    if key.public_key().public_bytes(serialization.Encoding.DER, public) != (
        cert.public_key().public_bytes(serialization.Encoding.DER, public)
    ):
        return "the key is not the certificate's"
    if not trusts(pair.ca_bundle, pair.cert, now=now):
        return "the certificate is not valid now, or no CA of the bundle issued it"
    return None


def injected_bundle(pair: ServingPair, *, now: datetime) -> bytes:
    """What the API server is to trust for ``pair``: the CA of its bundle that issued its
    certificate, then the certificate that follows it in the bundle when that is a CA
    valid at ``now`` (the previous CA, which replicas not yet switched serve under), and
    nothing else the Secret may hold. Empty when no CA of the bundle issued it."""
    try:
        cert = x509.load_pem_x509_certificate(pair.cert)
        cas = x509.load_pem_x509_certificates(pair.ca_bundle)
    except ValueError:
        return b""
    for index, ca in enumerate(cas):
        if _issued(ca, cert, now):
            following = cas[index + 1 : index + 2]
            return b"".join(_pem(c) for c in [ca, *following] if c is ca or _is_ca(c, now))
    return b""


def issuing_ca(pair: ServingPair, *, now: datetime) -> bytes:
    """The CA of ``pair``'s bundle that issued its certificate, as PEM (empty if none)."""
    return first_certificate(injected_bundle(pair, now=now))


def _is_ca(certificate: x509.Certificate, now: datetime) -> bool:
    try:
        constraints = certificate.extensions.get_extension_for_class(x509.BasicConstraints)
    except x509.ExtensionNotFound:
        return False
    return constraints.value.ca and _valid_at(certificate, now)


def why_renew(pair: ServingPair, dns_names: Sequence[str], *, now: datetime) -> str | None:
    """Why ``pair`` must be replaced now (unusable, wrong names, or due), or None."""
    problem = unusable(pair, now=now)
    if problem is not None:
        return problem
    cert = x509.load_pem_x509_certificate(pair.cert)
    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return "the certificate has no DNS names"
    missing = set(dns_names) - set(names.get_values_for_type(x509.DNSName))
    if missing:
        return f"the certificate does not name {', '.join(sorted(missing))}"
    renew_at = _renew_at(cert)
    if now >= renew_at:
        return (
            f"it expires at {cert.not_valid_after_utc.isoformat()} and is due for renewal "
            f"since {renew_at.isoformat()}"
        )
    return None


def _renew_at(cert: x509.Certificate) -> datetime:
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    return start + (end - start) * RENEW_FRACTION


def renewal_time(cert_pem: bytes) -> datetime | None:
    """When a certificate is due for renewal (None if it does not parse)."""
    try:
        return _renew_at(x509.load_pem_x509_certificate(cert_pem))
    except ValueError:
        return None
