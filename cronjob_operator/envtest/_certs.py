"""The control plane's PKI, generated with the ``openssl`` command line tool.

One CA signs the API server's serving certificate (valid for 127.0.0.1, localhost, the
in-cluster names of the ``kubernetes`` Service and the real node's Pod gateway) and the
admin client certificate (CN=admin, O=system:masters, so RBAC grants it everything).
The service-account token signing key is a separate pair, as in a real cluster. Keys are
ECDSA P-256: fast to generate and accepted everywhere Kubernetes takes a key. The
``openssl`` CLI is used rather than a Python crypto package so the project needs no
extra dependency.
"""

from __future__ import annotations

import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path

from cronjob_operator.envtest._podnet import POD_GATEWAY

CA_SUBJECT = "/CN=cronjob-operator-envtest-ca"
SERVING_NAMES = (
    "IP:127.0.0.1",
    "DNS:localhost",
    "IP:10.0.0.1",
    "DNS:kubernetes",
    "DNS:kubernetes.default",
    "DNS:kubernetes.default.svc",
    "DNS:kubernetes.default.svc.cluster.local",
    f"IP:{POD_GATEWAY}",
)
VALID_DAYS = "3650"
# A minimal config so that the result never depends on the system's openssl.cnf.
REQ_CONFIG = "[req]\ndistinguished_name = dn\nprompt = no\n[dn]\nCN = unused\n"
CA_EXTENSIONS = (
    "basicConstraints = critical, CA:TRUE",
    "keyUsage = critical, keyCertSign, cRLSign, digitalSignature",
    "subjectKeyIdentifier = hash",
)


class PkiError(RuntimeError):
    """openssl failed; the message holds the command and its stderr."""


@dataclass(frozen=True)
class Pki:
    """Paths of the generated certificates and keys (PEM files in one directory)."""

    directory: Path

    @property
    def ca_cert(self) -> Path:
        return self.directory / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.directory / "ca.key"

    @property
    def serving_cert(self) -> Path:
        return self.directory / "apiserver.crt"

    @property
    def serving_key(self) -> Path:
        return self.directory / "apiserver.key"

    @property
    def admin_cert(self) -> Path:
        return self.directory / "admin.crt"

    @property
    def admin_key(self) -> Path:
        return self.directory / "admin.key"

    @property
    def service_account_key(self) -> Path:
        return self.directory / "sa.key"

    @property
    def service_account_public_key(self) -> Path:
        return self.directory / "sa.pub"


def generate_pki(directory: Path) -> Pki:
    """Create a fresh CA, serving and admin certificates and SA keys in ``directory``.

    Blocks for the few ``openssl`` calls (tens of milliseconds each). Raises
    ``PkiError`` (with openssl's stderr) when openssl fails.
    """
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o700)
    pki = Pki(directory)
    config = directory / "openssl.cnf"
    # `openssl req` (3.0) takes extensions from its config only, so the CA's live there.
    config.write_text(REQ_CONFIG + "[ext]\n" + "\n".join(CA_EXTENSIONS) + "\n")
    _new_key(pki.ca_key)
    _openssl(
        "req", "-x509", "-new", "-key", pki.ca_key, "-config", config, "-subj", CA_SUBJECT,
        "-extensions", "ext", "-sha256", "-days", VALID_DAYS, "-out", pki.ca_cert,
    )  # fmt: skip
    _issue(
        pki,
        subject="/CN=kube-apiserver",
        usage="serverAuth",
        alt_names=SERVING_NAMES,
        cert=pki.serving_cert,
        key=pki.serving_key,
    )
    _issue(
        pki,
        subject="/O=system:masters/CN=admin",
        usage="clientAuth",
        alt_names=(),
        cert=pki.admin_cert,
        key=pki.admin_key,
    )
    _new_key(pki.service_account_key)
    _openssl(
        "pkey", "-in", pki.service_account_key, "-pubout", "-out", pki.service_account_public_key
    )
    return pki


def _issue(
    pki: Pki, *, subject: str, usage: str, alt_names: tuple[str, ...], cert: Path, key: Path
) -> None:
    """Create ``key`` and a certificate for it, signed by the CA, in ``cert``."""
    _new_key(key)
    csr = cert.with_suffix(".csr")
    ext = cert.with_suffix(".ext")
    lines = [
        "basicConstraints = critical, CA:FALSE",
        "keyUsage = critical, digitalSignature, keyEncipherment",
        f"extendedKeyUsage = {usage}",
        "authorityKeyIdentifier = keyid",
    ]
    if alt_names:
        lines.append("subjectAltName = " + ", ".join(alt_names))
    _write_extensions(ext, lines)
    _openssl(
        "req", "-new", "-key", key, "-config", pki.directory / "openssl.cnf",
        "-subj", subject, "-out", csr,
    )  # fmt: skip
    _openssl(
        "x509", "-req", "-in", csr, "-CA", pki.ca_cert, "-CAkey", pki.ca_key,
        "-set_serial", f"0x{secrets.token_hex(16)}", "-extfile", ext, "-extensions", "ext",
        "-sha256", "-days", VALID_DAYS, "-out", cert,
    )  # fmt: skip
    csr.unlink()


def _new_key(path: Path) -> None:
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path)
    path.chmod(0o600)


def _write_extensions(path: Path, lines: list[str]) -> None:
    path.write_text("[ext]\n" + "\n".join(lines) + "\n")


def _openssl(*args: str | Path) -> None:
    argv = ["openssl", *map(str, args)]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    if result.returncode != 0:
        raise PkiError(f"{' '.join(argv)} failed ({result.returncode}): {result.stderr.strip()}")
