"""The state file: what a control plane runs, so another process can find and stop it.

``state.json`` in the plane's state directory records each component's pid, command
line and log, the ports, and the owner: the pid of the interpreter whose exit must take
the plane down (a test run), or none for a persistent cluster (``local-cluster.sh up``).
``hack/local-cluster.sh down|status|env`` and the orphan sweep read it. It is rewritten
atomically (write to a temporary file, then rename) whenever a pid changes.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

STATE_FILE = "state.json"


@dataclass
class ComponentRecord:
    """One component's command line, log file and current pid (None when stopped)."""

    argv: list[str]
    log: str
    pid: int | None = None


@dataclass
class PlaneRecord:
    """Everything needed to reach, inspect and stop a running control plane."""

    owner_pid: int | None
    bin_dir: str
    server: str
    etcd_url: str
    kubeconfig: str
    ports: dict[str, int]
    nodes: list[str]
    pod_run_seconds: float
    components: dict[str, ComponentRecord] = field(default_factory=dict)
    node_bin_dir: str | None = None
    """The real node's binaries, when the plane has one (``_node``)."""
    pod_network: bool = False
    """Whether the real node has its own Pod network (``_podnet``)."""


def save_record(state_dir: Path, record: PlaneRecord) -> None:
    """Write ``record`` to ``state_dir/state.json`` atomically."""
    target = state_dir / STATE_FILE
    temporary = target.with_suffix(".tmp")
    temporary.write_text(json.dumps(dataclasses.asdict(record), indent=2) + "\n")
    os.replace(temporary, target)


def load_record(state_dir: Path) -> PlaneRecord:
    """Read ``state_dir/state.json``; raises ``FileNotFoundError`` or ``ValueError``."""
    raw: dict[str, Any] = json.loads((state_dir / STATE_FILE).read_text())
    try:
        components = {
            name: ComponentRecord(**value) for name, value in raw.pop("components").items()
        }
        return PlaneRecord(**raw, components=components)
    except (KeyError, TypeError) as error:
        raise ValueError(
            f"{state_dir / STATE_FILE} is not a control plane state file: {error}"
        ) from None
