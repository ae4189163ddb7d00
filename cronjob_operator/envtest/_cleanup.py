"""Making sure a test plane never outlives the run that started it.

Three layers, from gentle to blunt: ``register`` hooks the plane's ``stop`` into
``atexit`` and turns SIGTERM and SIGHUP into ``KeyboardInterrupt`` (so pytest tears its
session fixtures down exactly as for Ctrl-C); processes started from the main thread
die with the interpreter anyway (``PR_SET_PDEATHSIG`` in ``_processes``); and
``reap_orphans`` stops the processes, removes the real node's cgroups and the state
directory of any earlier plane whose owning interpreter is gone, which is run before a
new test plane starts.
Persistent clusters (``local-cluster.sh up``) have no owner and use none of this.
"""

from __future__ import annotations

import atexit
import logging
import shutil
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from cronjob_operator.envtest import _node, _processes, _state
from cronjob_operator.envtest._components import START_ORDER

log = logging.getLogger(__name__)

TERMINATION_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def register(stop: Callable[[], None]) -> None:
    """Run ``stop`` at interpreter exit, including exit on SIGTERM or SIGHUP."""
    atexit.register(stop)
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in TERMINATION_SIGNALS:
        if signal.getsignal(sig) == signal.SIG_DFL:
            signal.signal(sig, _interrupt)


def unregister(stop: Callable[[], None]) -> None:
    """Undo ``register`` for ``stop`` (the signal handlers stay; they are harmless)."""
    atexit.unregister(stop)


def reap_orphans(root: Path, prefix: str, *, grace: float = 5.0) -> None:
    """Stop and remove every plane under ``root/prefix*`` whose owner process is dead."""
    for state_dir in sorted(root.glob(f"{prefix}*")):
        try:
            record = _state.load_record(state_dir)
        except (OSError, ValueError):
            continue
        if record.owner_pid is None or _processes.pid_alive(record.owner_pid):
            continue
        log.warning("removing the orphaned control plane in %s", state_dir)
        for component in reversed(START_ORDER):
            entry = record.components.get(component)
            if entry is not None and entry.pid is not None:
                process = _processes.ManagedProcess(
                    component, entry.argv, Path(entry.log), pid=entry.pid
                )
                process.stop(grace=grace)
        if record.node_bin_dir is not None:
            node = _node.NodeLayout.of(state_dir, Path(record.node_bin_dir))
            _node.remove_cgroups(node.cgroup_root)
        shutil.rmtree(state_dir, ignore_errors=True)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"received {signal.Signals(signum).name}")
