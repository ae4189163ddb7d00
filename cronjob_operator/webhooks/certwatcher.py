"""The webhook server's TLS certificate, reloaded when its files change.

cert-manager renews the serving certificate into a Secret and the kubelet swaps the
mounted files; a local run rewrites them with ``hack/gen-webhook-certs.sh``. Either way
the server must start using the new pair without a restart, as controller-runtime's
``certwatcher`` does. ``CertWatcher.context`` is called for every new connection: it
compares the files' identity (inode, size, mtime; the kubelet replaces a symlink, so the
inode changes) with what it loaded, and only on a change builds a fresh ``SSLContext``.
Connections already open keep the context they started with.

A pair that does not load (missing, or caught half-written between the two files) leaves
the last good context in use and is retried on the next connection; before any pair has
loaded there is no context, and ``problem`` says why (the readiness check reports it)
and what to do: a new user's first ``cronjob-operator run`` has webhooks on and no
certificate, so the message names both ways out (``CERT_FIX``).
"""

from __future__ import annotations

import logging
import os
import ssl
import threading
from collections.abc import Sequence
from pathlib import Path

__all__ = ["CERT_FILE", "CERT_FIX", "KEY_FILE", "CertWatcher"]

log = logging.getLogger(__name__)

CERT_FILE = "tls.crt"
KEY_FILE = "tls.key"

CERT_FIX = (
    "to run without webhooks pass --webhook-port=0 (kubebuilder's ENABLE_WEBHOOKS=false); "
    "to serve them, put tls.crt and tls.key in --webhook-cert-dir "
    "(hack/gen-webhook-certs.sh makes a pair for a local run; cert-manager in a cluster)"
)
"""What to do when no serving certificate has loaded yet; appended to the problem."""

_Stamp = tuple[tuple[int, int, int], ...]


class CertWatcher:
    """The current server ``SSLContext`` for ``tls.crt``/``tls.key`` in a directory."""

    def __init__(self, cert_dir: Path, *, alpn_protocols: Sequence[str] = ("http/1.1",)) -> None:
        self.cert_dir = cert_dir
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
                self._set_problem(f"cannot read the webhook serving certificate: {exc}")
                return self._context
            if stamp != self._stamp:
                self._reload(stamp)
            return self._context

    def _read_stamp(self) -> _Stamp:
        stats = (os.stat(self.cert_file), os.stat(self.key_file))
        return tuple((s.st_ino, s.st_size, s.st_mtime_ns) for s in stats)

    def _reload(self, stamp: _Stamp) -> None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.set_alpn_protocols(self._alpn)
        try:
            context.load_cert_chain(self.cert_file, self.key_file)
        except (OSError, ssl.SSLError) as exc:
            self._set_problem(f"cannot load {self.cert_file} and {self.key_file}: {exc}")
            return
        first = self._context is None
        self._context, self._stamp, self._problem = context, stamp, None
        log.info(
            "%s webhook serving certificate",
            "loaded" if first else "reloaded",
            extra={"cert": str(self.cert_file)},
        )

    def _set_problem(self, problem: str) -> None:
        """Record (and log once) why the files are not in use; until a pair has loaded,
        the webhooks cannot serve at all, so the message says what to do about it."""
        if self._context is None:
            problem = f"{problem}; {CERT_FIX}"
        if problem != self._problem:
            log.error("%s", problem)
        self._problem = problem
