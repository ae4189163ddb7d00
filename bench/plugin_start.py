"""How fast ``kubectl cjt`` starts, and what the manager holds before it caches anything.

A user waits for ``kubectl cjt --help`` and ``kubectl cjt next SCHEDULE`` (neither needs
a cluster) as long as the interpreter takes to import what the plugin imports, so this
measures that: the wall and CPU time of each command, best of ``--repeat`` fresh
interpreters (best, not mean: other processes on a shared machine only ever add time),
the import time's top ten by cumulative time (``python -X importtime``) and the peak RSS
of each process. Beside them, the manager's fixed memory: the peak RSS of an interpreter that
imported what the manager imports before it starts its caches, and nothing else.

With ``--before TREE`` (another checkout, say ``git worktree add --detach TREE main``)
each figure is measured for that tree's code and this one's, and the repetitions
alternate between the two (before, after, before, ...), so the load of a shared machine
falls on both alike; each interpreter runs in its tree's directory, whose
``cronjob_operator`` comes first on ``sys.path``.

    .venv/bin/python -m bench.plugin_start [--repeat 5] [--top 10] [--before TREE]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from bench._common import REPO, markdown_table, print_report

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
    "cronjob_operator.runtime.client",
    "cronjob_operator.runtime.leaderelection",
    "cronjob_operator.runtime.logs",
    "cronjob_operator.runtime.manager",
    "cronjob_operator.runtime.serving",
    "cronjob_operator.runtime.webhook",
    "cronjob_operator.webhooks.conversion",
    "cronjob_operator.webhooks.manifests",
    "kubernetes.config",
)
"""What the manager's process has imported when it starts its caches: what ``cli.run``
imports (the controllers, the manager, the client, leader election, serving, the
webhook server and certificate rotation) and the ``kubernetes`` package it reads its
kubeconfig with. Named one by one, as the runtime's facade imports nothing itself."""

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


def sampled_seconds(
    trees: Sequence[Path], argv: Sequence[str], repeat: int
) -> dict[Path, tuple[list[float], list[float]]]:
    """The wall times and CPU times (user + system) of ``repeat`` fresh interpreters
    running ``argv`` in each tree, the trees taking turns within each repetition."""
    samples: dict[Path, tuple[list[float], list[float]]] = {tree: ([], []) for tree in trees}
    for _ in range(repeat):
        for tree in trees:
            start = time.perf_counter()
            usage = _run(argv, tree)
            samples[tree][0].append(time.perf_counter() - start)
            samples[tree][1].append(usage.ru_utime + usage.ru_stime)
    return samples


def _run(argv: Sequence[str], tree: Path) -> resource.struct_rusage:
    """Run ``argv`` in a fresh interpreter in ``tree``; return its resource usage."""
    child = subprocess.Popen(
        [sys.executable, *argv], cwd=tree, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    if child.returncode:
        raise subprocess.CalledProcessError(child.returncode, child.args)
    return usage


def peak_rss_mib(code: str, tree: Path) -> float:
    """The peak RSS (MiB) of a fresh interpreter running ``code`` in ``tree``."""
    err = subprocess.run(
        [sys.executable, "-c", _PRINT_PEAK_AT_EXIT + code],
        cwd=tree,
        check=False,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    ).stderr
    return int(err.split()[-1]) / 1024


def import_top(argv: Sequence[str], top: int, tree: Path) -> list[tuple[str, float, float]]:
    """The ``top`` imports of ``argv`` in ``tree`` by cumulative time: (module, cumulative
    ms, self ms)."""
    err = subprocess.run(
        [sys.executable, "-X", "importtime", *argv],
        cwd=tree,
        check=True,
        capture_output=True,
        text=True,
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
    parser.add_argument(
        "--before", type=Path, help="another checkout to measure too, alternating with this one"
    )
    args = parser.parse_args(argv)
    trees = {"before": args.before.resolve(), "after": REPO} if args.before else {"": REPO}
    rows = []
    for name, cmd in COMMANDS.items():
        samples = sampled_seconds(list(trees.values()), plugin_argv(cmd), args.repeat)
        for label, tree in trees.items():
            walls, cpus = samples[tree]
            rows.append(
                (
                    f"{name} {label}".rstrip(),
                    f"{min(walls):.3f}",
                    f"{statistics.median(walls):.3f}",
                    f"{min(cpus):.3f}",
                    f"{peak_rss_mib(_plugin_code(cmd), tree):.0f}",
                )
            )
    manager = f"import {', '.join(MANAGER_IMPORTS)}"
    for label, tree in trees.items():
        rss = f"{peak_rss_mib(manager, tree):.0f}"
        rows.append((f"the manager's imports {label}".rstrip(), "", "", "", rss))
    tables = [
        (
            f"Wall time (best and median of {args.repeat}), CPU time (best) and peak RSS:",
            markdown_table(["command", "wall s", "median s", "CPU s", "peak RSS MiB"], rows),
        )
    ]
    for name, cmd in COMMANDS.items():
        for label, tree in trees.items():
            imports = import_top(plugin_argv(cmd), args.top, tree)
            top = [(module, f"{cum:.1f}", f"{own:.1f}") for module, cum, own in imports]
            tables.append(
                (
                    f"`{name}` {label}: imports by cumulative time (`-X importtime`):",
                    markdown_table(["module", "cumulative ms", "self ms"], top),
                )
            )
    print_report("kubectl cjt start time", tables)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
