"""Plot the naive-vs-indexed figures: reconcile latency, CPU and API requests against N.

Reads the "Naive vs indexed" markdown table that ``python -m bench.scale --all`` (or
``python -m bench.naive_vs_indexed``) printed, from a file such as bench/SCALE.md, and
writes a PNG with three panels: reconcile latency (p50 solid, p99 dashed), operator CPU
per reconcile and API GET+LIST requests per reconcile, one line per Job lookup.

    python -m bench.plot bench/SCALE.md docs/perf.png

Needs matplotlib: ``pip install -e '.[bench]'``.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

LOOKUP_COLUMN = "lookup"
COLORS = {"indexed": "tab:green", "scan": "tab:orange", "live": "tab:red"}
LABELS = {
    "indexed": "indexed (field index, production)",
    "scan": "cache scan + filter",
    "live": "live LIST with label selector",
}

Series = dict[str, list[tuple[int, dict[str, float]]]]


def read_table(text: str) -> Series:
    """The rows of the first table with a ``lookup`` column, by lookup, sorted by N."""
    series: Series = defaultdict(list)
    header: list[str] | None = None
    for line in text.splitlines():
        if not line.startswith("|"):
            if header is not None and series:
                break
            header = None
            continue
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if header is None:
            header = cells if LOOKUP_COLUMN in cells else None
            continue
        if cells[0].startswith(":") or cells[0].startswith("-"):
            continue
        row = dict(zip(header, cells, strict=True))
        values = {k: float(v.replace(",", "")) for k, v in row.items() if k not in {LOOKUP_COLUMN}}
        series[row[LOOKUP_COLUMN]].append((int(values["N"]), values))
    if not series:
        raise SystemExit("no naive-vs-indexed table (a 'lookup' column) found")
    return {k: sorted(v, key=lambda item: item[0]) for k, v in series.items()}


def plot(series: Series, output: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (latency, cpu, api) = plt.subplots(1, 3, figsize=(15, 4.6))
    for lookup, points in series.items():
        ns = [n for n, _ in points]
        color = COLORS.get(lookup)
        label = LABELS.get(lookup, lookup)
        latency.plot(ns, [v["p50 ms"] for _, v in points], "o-", color=color, label=label)
        latency.plot(ns, [v["p99 ms"] for _, v in points], "o--", color=color, alpha=0.6)
        cpu.plot(ns, [v["CPU ms/reconcile"] for _, v in points], "o-", color=color, label=label)
        on_top = 3 if lookup == "indexed" else 2  # indexed and scan coincide at 0
        api.plot(
            ns,
            [v["GET+LIST/reconcile"] for _, v in points],
            "o-",
            color=color,
            label=label,
            zorder=on_top,
            markersize=5 if on_top == 3 else 9,
        )
    latency.set(
        title="Reconcile latency (p50 solid, p99 dashed)",
        xlabel="CronJobs (N), 10 Jobs each",
        ylabel="ms",
        xscale="log",
        yscale="log",
    )
    cpu.set(
        title="Operator CPU per reconcile",
        xlabel="CronJobs (N), 10 Jobs each",
        ylabel="ms",
        xscale="log",
        yscale="log",
    )
    api.set(
        title="API GET+LIST requests per reconcile",
        xlabel="CronJobs (N), 10 Jobs each",
        ylabel="requests",
        xscale="log",
        ylim=(-0.1, 1.5),
    )
    for axes in (latency, cpu, api):
        axes.grid(True, which="both", alpha=0.3)
    latency.legend(fontsize=8)
    api.legend(fontsize=8, loc="center right")
    figure.suptitle("CronJob reconcile: indexed cache vs naive Job lookups (local cluster)")
    figure.tight_layout()
    output.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(output, dpi=110)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="a file with the naive-vs-indexed table")
    parser.add_argument("output", type=Path, help="the PNG to write")
    args = parser.parse_args(argv)
    plot(read_table(args.source.read_text()), args.output)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
