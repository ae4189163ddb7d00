"""A server's TLS certificate, reloaded when its files change; the one TLS policy.

Used by the webhook server and by the HTTPS metrics server. cert-manager renews a
serving certificate into a Secret and the kubelet swaps the mounted files; a local run
rewrites them with a script. Either way the server must start using the new pair
without a restart, as controller-runtime's ``certwatcher`` does.
``CertWatcher.context`` is called for every new connection: it compares the files'
identity (inode, size, mtime; the kubelet replaces a symlink, so the inode changes)
with what it loaded, and only on a change builds a fresh ``SSLContext``.
Connections already open keep the context they started with.

A pair that does not load (missing, or caught half-written between the two files) leaves
the last good context in use and is retried on the next connection; before any pair has
loaded there is no context, and ``problem`` says why (the readiness check reports it),
followed by the caller's ``advice``: what to do is the application's to say (its flags,
its scripts), never the runtime's.

``server_context`` is the TLS policy of every server in the process: TLS 1.2 at least;
for TLS 1.2 only ECDHE key exchange (forward secrecy) with AEAD ciphers (AES-GCM,
ChaCha20-Poly1305), so no CBC, RC4, 3DES, static RSA or SHA-1 MAC suites; TLS 1.3 with
OpenSSL's suites, all of which are AEAD; no renegotiation, no compression; ALPN offers
``http/1.1`` only (no HTTP/2 server exists here; see docs/security.md). With a
``client_ca`` file, the server asks for a client certificate: one that CA did not sign
fails the handshake, none at all is let through for the server to judge per request
(``ssl.CERT_OPTIONAL``); the CA file is watched and reloaded like the pair.
"""

from __future__ import annotations

import logging
import os
import ssl
import threading
from collections.abc import Sequence
from pathlib import Path

log = logging.getLogger(__name__)

CERT_FILE = "tls.crt"
KEY_FILE = "tls.key"

TLS12_CIPHERS = "ECDHE+AESGCM:ECDHE+CHACHA20"
"""OpenSSL cipher string for TLS 1.2: forward-secret key exchange, AEAD ciphers only."""

_Stamp = tuple[tuple[int, int, int], ...]


def server_context(
    cert_file: str | os.PathLike[str],
    key_file: str | os.PathLike[str],
    *,
    alpn_protocols: Sequence[str] = ("http/1.1",),
    client_ca: str | os.PathLike[str] | None = None,
) -> ssl.SSLContext:
    """A server ``SSLContext`` with the policy above (verifying a client certificate against
    ``client_ca`` when given); raises ``OSError``/``SSLError`` if a file does not load."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_ciphers(TLS12_CIPHERS)
    context.options |= ssl.OP_NO_RENEGOTIATION | ssl.OP_NO_COMPRESSION
    context.options |= ssl.OP_CIPHER_SERVER_PREFERENCE
    context.set_alpn_protocols(list(alpn_protocols))
    context.load_cert_chain(cert_file, key_file)
    if client_ca is not None:
        context.verify_mode = ssl.CERT_OPTIONAL  # a certificate shown must verify
        context.load_verify_locations(cafile=client_ca)
    return context


class CertWatcher:
    """The current server ``SSLContext`` for ``tls.crt``/``tls.key`` in a directory."""

    def __init__(
        self,
        cert_dir: Path,
        *,
        alpn_protocols: Sequence[str] = ("http/1.1",),
        purpose: str = "webhook",
        advice: str = "",
        client_ca: Path | None = None,
    ) -> None:
        """``advice`` is appended to ``problem`` while no pair has loaded yet; with
        ``client_ca``, a client certificate is asked for and verified against it."""
        self.cert_dir = cert_dir
        self.client_ca = client_ca
        self._purpose = purpose
        self._advice = advice
        self._alpn = list(alpn_protocols)
        self._lock = threading.Lock()
        self._context: ssl.SSLContext | None = None
        self._stamp: _Stamp | None = None
        self._problem: str | None = "no certificate loaded yet"

    @property
    def cert_file(self) -> Path:
        return self.cert_dir / CERT_FILE

    @property
    def key_file(self) -> Path:
        return self.cert_dir / KEY_FILE

    @property
    def problem(self) -> str | None:
        """Why the current files are not in use (None when they are)."""
        return self._problem

    def context(self) -> ssl.SSLContext | None:
        """The context for a new connection (reloading first if the files changed).

        Blocks only to stat two files, and to read them when they changed. Never raises:
        a failed reload is logged and the previous context (or None) is returned.
        """
        with self._lock:
            try:
                stamp = self._read_stamp()
            except OSError as exc:
                self._set_problem(f"cannot read the {self._purpose} serving certificate: {exc}")
                return self._context
            if stamp != self._stamp:
                self._reload(stamp)
            return self._context

    def _read_stamp(self) -> _Stamp:
        files = [self.cert_file, self.key_file, *([self.client_ca] if self.client_ca else [])]
        return tuple((s.st_ino, s.st_size, s.st_mtime_ns) for s in map(os.stat, files))

    def _reload(self, stamp: _Stamp) -> None:
        try:
            context = server_context(
                self.cert_file, self.key_file, alpn_protocols=self._alpn, client_ca=self.client_ca
            )
        except (OSError, ssl.SSLError) as exc:
            files = f"{self.cert_file} and {self.key_file}"
            if self.client_ca:
                files = f"{self.cert_file}, {self.key_file} and the client CA {self.client_ca}"
            self._set_problem(f"cannot load {files}: {exc}")
            return
        first = self._context is None
        self._context, self._stamp, self._problem = context, stamp, None
        log.info(
            "%s %s serving certificate",
            "loaded" if first else "reloaded",
            self._purpose,
            extra={"cert": str(self.cert_file)},
        )

    def _set_problem(self, problem: str) -> None:
        """Record (and log once) why the files are not in use; until a pair has loaded,
        the server cannot serve at all, so the message carries the caller's advice."""
        if self._context is None and self._advice:
            problem = f"{problem}; {self._advice}"
        if problem != self._problem:
            log.error("%s", problem)
        self._problem = problem
