"""How fast ``kubectl cjt`` starts, and what the manager holds before it caches anything.

A user waits for ``kubectl cjt --help`` and ``kubectl cjt next SCHEDULE`` (neither needs
a cluster) as long as the interpreter takes to import what the plugin imports, so this
measures that: the wall and CPU time of each command, best of ``--repeat`` fresh
interpreters (best, not mean: other processes on a shared machine only ever add time),
the import time's top ten by cumulative time (``python -X importtime``) and the peak RSS
of each process. Beside them, the manager's fixed memory: the peak RSS of an interpreter that
imported what the manager imports before it starts its caches, and nothing else.

    .venv/bin/python -m bench.plugin_start [--repeat 5] [--top 10]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from collections.abc import Sequence

from bench._common import markdown_table, print_report

__all__ = ["main"]

COMMANDS: dict[str, tuple[str, ...]] = {
    "kubectl cjt --help": ("--help",),
    "kubectl cjt next '*/5 * * * *'": ("next", "*/5 * * * *"),
}
"""The plugin's commands that need no cluster (its arguments)."""

MANAGER_IMPORTS = (
    "cronjob_operator.cli",
    "cronjob_operator.controllers",
    "cronjob_operator.runtime.certrotation",
    "cronjob_operator.runtime.webhook",
    "cronjob_operator.webhooks.conversion",
    "cronjob_operator.webhooks.manifests",
    "kubernetes.config",
)
"""What the manager's process has imported when it starts its caches (``cli.py``'s
imports, and the ``kubernetes`` package it reads its kubeconfig with)."""

_PRINT_PEAK_AT_EXIT = (
    "import atexit, sys\n"
    "atexit.register(lambda: print(open('/proc/self/status').read()"
    ".split('VmHWM:')[1].split()[0], file=sys.stderr))\n"
)
"""Print the process's peak RSS (KiB) as the last stderr line when it exits: VmHWM is
the process's own, where a child's ru_maxrss keeps the parent's peak across fork."""


def plugin_argv(args: Sequence[str]) -> list[str]:
    """The interpreter arguments that run ``kubectl cjt`` with ``args``."""
    return ["-m", "cronjob_operator.plugin", *args]


def _plugin_code(args: Sequence[str]) -> str:
    return (
        f"import runpy, sys\nsys.argv = ['kubectl-cjt', *{list(args)!r}]\n"
        "runpy.run_module('cronjob_operator.plugin', run_name='__main__')"
    )


def best_seconds(argv: Sequence[str], repeat: int) -> tuple[float, float]:
    """The shortest wall time and the shortest CPU time (user + system) of ``repeat``
    fresh interpreters running ``argv``: CPU time is what a busy machine disturbs least."""
    walls, cpus = [], []
    for _ in range(repeat):
        start = time.perf_counter()
        usage = _run(argv)
        walls.append(time.perf_counter() - start)
        cpus.append(usage.ru_utime + usage.ru_stime)
    return min(walls), min(cpus)


def _run(argv: Sequence[str]) -> resource.struct_rusage:
    """Run ``argv`` in a fresh interpreter; return its resource usage (its CPU time)."""
    child = subprocess.Popen(
        [sys.executable, *argv], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    if child.returncode:
        raise subprocess.CalledProcessError(child.returncode, child.args)
    return usage


def peak_rss_mib(code: str) -> float:
    """The peak RSS (MiB) of a fresh interpreter running ``code``."""
    err = subprocess.run(
        [sys.executable, "-c", _PRINT_PEAK_AT_EXIT + code],
        check=False,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    ).stderr
    return int(err.split()[-1]) / 1024


def import_top(argv: Sequence[str], top: int) -> list[tuple[str, float, float]]:
    """The ``top`` imports of ``argv`` by cumulative time: (module, cumulative ms, self ms)."""
    err = subprocess.run(
        [sys.executable, "-X", "importtime", *argv], check=True, capture_output=True, text=True
    ).stderr
    rows = []
    for text in err.splitlines():
        if not text.startswith("import time:") or "cumulative" in text:
            continue
        own, cumulative, name = (part.strip() for part in text[len("import time:") :].split("|"))
        rows.append((name.strip(), int(cumulative) / 1000, int(own) / 1000))
    return sorted(rows, key=lambda row: row[1], reverse=True)[:top]


def main(argv: Sequence[str] | None = None) -> int:
    """Print the start time, import top and memory of each command, and the manager's."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="interpreters per command")
    parser.add_argument("--top", type=int, default=10, help="imports listed per command")
    args = parser.parse_args(argv)
    rows = [
        (
            name,
            *(f"{s:.3f}" for s in best_seconds(plugin_argv(cmd), args.repeat)),
            f"{peak_rss_mib(_plugin_code(cmd)):.0f}",
        )
        for name, cmd in COMMANDS.items()
    ]
    manager = f"import {', '.join(MANAGER_IMPORTS)}"
    rows.append(("the manager's imports", "", "", f"{peak_rss_mib(manager):.0f}"))
    tables = [
        (
            f"Wall and CPU time (each the best of {args.repeat}) and peak RSS:",
            markdown_table(["command", "wall s", "CPU s", "peak RSS MiB"], rows),
        )
    ]
    for name, cmd in COMMANDS.items():
        imports = import_top(plugin_argv(cmd), args.top)
        top = [(module, f"{cum:.1f}", f"{own:.1f}") for module, cum, own in imports]
        tables.append(
            (
                f"`{name}`: imports by cumulative time (`-X importtime`):",
                markdown_table(["module", "cumulative ms", "self ms"], top),
            )
        )
    print_report("kubectl cjt start time", tables)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
