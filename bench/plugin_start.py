"""How fast ``kubectl cjt`` starts, and what the manager holds before it caches anything.

A user waits for ``kubectl cjt --help`` and ``kubectl cjt next SCHEDULE`` (neither needs
a cluster) as long as the interpreter takes to import what the plugin imports, so this
measures that: the wall time of each command, best of ``--repeat`` fresh interpreters
(best, not mean: other processes on a shared machine only ever add time), the import
time's top ten by cumulative time (``python -X importtime``) and the peak RSS of each
process. Beside them, the manager's fixed memory: the peak RSS of an interpreter that
imported ``cronjob_operator.cli`` (everything the manager runs) and nothing else.

    .venv/bin/python -m bench.plugin_start [--repeat 5] [--top 10]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Sequence

from bench._common import markdown_table, print_report

__all__ = ["main"]

COMMANDS: dict[str, tuple[str, ...]] = {
    "kubectl cjt --help": ("-m", "cronjob_operator.plugin", "--help"),
    "kubectl cjt next '*/5 * * * *'": ("-m", "cronjob_operator.plugin", "next", "*/5 * * * *"),
}
"""The plugin's commands that need no cluster, as the interpreter runs them."""

MANAGER_IMPORTS = "import cronjob_operator.cli"
"""What the manager's process imports before it reads its flags."""

_PEAK_RSS = "import resource; print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"


def best_wall_seconds(argv: Sequence[str], repeat: int) -> float:
    """The shortest wall time of ``repeat`` fresh interpreters running ``argv``."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run([sys.executable, *argv], check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return min(times)


def peak_rss_mib(argv: Sequence[str]) -> float:
    """The peak RSS (MiB) of one interpreter running ``argv`` (its own ru_maxrss)."""
    child = subprocess.Popen(
        [sys.executable, *argv], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        raise subprocess.CalledProcessError(child.returncode, child.args)
    return usage.ru_maxrss / 1024


def manager_fixed_mib() -> float:
    """The peak RSS (MiB) of an interpreter that imported what the manager imports."""
    out = subprocess.run(
        [sys.executable, "-c", f"{MANAGER_IMPORTS}; {_PEAK_RSS}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return int(out.split()[-1]) / 1024


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
        (name, f"{best_wall_seconds(cmd, args.repeat):.3f}", f"{peak_rss_mib(cmd):.0f}")
        for name, cmd in COMMANDS.items()
    ]
    rows.append((MANAGER_IMPORTS, "", f"{manager_fixed_mib():.0f}"))
    tables = [
        (
            f"Wall time (best of {args.repeat}) and peak RSS:",
            markdown_table(["command", "wall s", "peak RSS MiB"], rows),
        )
    ]
    for name, cmd in COMMANDS.items():
        top = [
            (module, f"{cum:.1f}", f"{own:.1f}") for module, cum, own in import_top(cmd, args.top)
        ]
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
