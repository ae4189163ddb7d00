"""One supervised child process: started in its own session, logged, stopped for sure.

Each control-plane component runs as a ``ManagedProcess``: its own process group
(``start_new_session``), stdout and stderr appended to its own log file, stdin closed.
Stopping signals the whole group with SIGTERM and escalates to SIGKILL after a grace
period. A process can also be re-adopted by pid from the state file of another
interpreter (``hack/local-cluster.sh down``); its command line is checked first so a
recycled pid is never signalled.

A test plane's processes may be tied to the interpreter that started them: the kernel
then SIGKILLs them when it dies, even by SIGKILL (``PR_SET_PDEATHSIG``), so a killed
test run leaves no process behind. SIGKILL rather than SIGTERM because all of them get
it at once: an API server shutting down gracefully while its etcd is gone hangs for
many seconds, and the data is thrown away anyway. The tie is to the starting *thread*,
so it is only made from the main thread.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

PR_SET_PDEATHSIG = 1
POLL_INTERVAL = 0.05


class ManagedProcess:
    """A component's process: ``start``, ``running``, ``stop``; restartable with same argv."""

    def __init__(
        self, name: str, argv: Sequence[str], log_path: Path, *, pid: int | None = None
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self.pid = pid
        self._popen: subprocess.Popen[bytes] | None = None

    def start(self, *, tie_to_parent: bool) -> None:
        """Start the process (non-blocking); appends to the log file across restarts."""
        if self.running():
            raise RuntimeError(f"{self.name} is already running as pid {self.pid}")
        preexec = _die_with_parent() if tie_to_parent else None
        with self.log_path.open("ab") as log:
            log.write(f"\n==== {time.strftime('%H:%M:%S')} {' '.join(self.argv)}\n".encode())
            log.flush()
            self._popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=preexec,  # noqa: PLW1509 - only prctl, no locks or allocation
            )
        self.pid = self._popen.pid

    def running(self) -> bool:
        """True while the process exists and is not a zombie (never blocks)."""
        if self._popen is not None:
            return self._popen.poll() is None
        return self.pid is not None and _is_our_live_process(self.pid, self.argv[0])

    def stop(self, *, grace: float, kill: bool = False) -> None:
        """Stop the process group and block until the process has exited.

        Sends SIGTERM (SIGKILL at once when ``kill``), waits up to ``grace`` seconds,
        then sends SIGKILL. Idempotent; a process that already exited is only reaped.
        """
        if self.pid is not None and self.running():
            _signal_group(self.pid, signal.SIGKILL if kill else signal.SIGTERM)
            if not self._wait_exit(grace):
                _signal_group(self.pid, signal.SIGKILL)
                self._wait_exit(10.0)
        if self._popen is not None:
            self._popen.wait()

    def exit_code(self) -> int | None:
        """The exit status of a child that has exited, else None."""
        return None if self._popen is None else self._popen.poll()

    def log_tail(self, lines: int = 25) -> str:
        """The last ``lines`` lines of the log, for error messages."""
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def _wait_exit(self, timeout: float) -> bool:
        if self._popen is not None:
            try:
                self._popen.wait(timeout)
            except subprocess.TimeoutExpired:
                return False
            return True
        deadline = time.monotonic() + timeout
        while self.running():
            if time.monotonic() >= deadline:
                return False
            time.sleep(POLL_INTERVAL)
        return True


def pid_alive(pid: int) -> bool:
    """True when ``pid`` names a live (non-zombie) process."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return _proc_state(pid) not in {"Z", "X", None}


def _is_our_live_process(pid: int, executable: str) -> bool:
    if not pid_alive(pid):
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return cmdline[0].decode(errors="replace") == executable


def _proc_state(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name is in parentheses and may contain spaces; the state follows it.
    return stat.rpartition(")")[2].split()[0]


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)


def _die_with_parent() -> Callable[[], None] | None:
    if threading.current_thread() is not threading.main_thread():
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    parent = os.getpid()

    def preexec() -> None:
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL))
        if os.getppid() != parent:  # the parent died before prctl took effect
            os.kill(os.getpid(), signal.SIGKILL)

    return preexec
