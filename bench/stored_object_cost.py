"""Stored-object cost: time and memory of one reconcile of each hostile stored object.

Issue 47 asks that a bad object stored past validation be bounded in what it costs the
manager. This benchmark reconciles every hostile object the stored-object fuzzer
generates (``bench._stored_objects.cases``: every field of a CronJob v1 and v2, a
ConcurrencyGroup and a ConfigDeployment, each with wrong types, a huge string and list,
a deep value and values past each rule) on the runtime's fake client, beside a good
CronJob and ConfigDeployment, at the minute a run is due. For each it measures the
process CPU of that reconcile (and of its follow-up) and the peak of Python memory it
allocated (``tracemalloc``, which slows the reconcile but not the peak it reports), and
prints the ``--top`` costliest, by CPU and by memory, with the reconcile of the
well-formed CronJob for scale. Cases whose v2 object the conversion webhook refuses are
never stored, and are left out.

    python -m bench.stored_object_cost [--kinds CronJob/v1,ConfigDeployment] [--top 10]
        [--huge 1048576] [--every 1]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import _common
from bench._stored_objects import BAD, GOOD, HUGE, KINDS, Case, Reconciled, World, cases
from cronjob_operator.api.batch_v1 import CRONJOB
from cronjob_operator.runtime.serving import clipped
from cronjob_operator.webhooks.conversion import ConversionError


def reconcile_due(case: Case | None) -> Reconciled | None:
    """The measured reconcile of ``case``'s hostile object (None: the good CronJob) a
    minute after its creation, when its run is due; None when it is never stored."""
    try:
        stored = [] if case is None else case.stored()
    except ConversionError:
        return None
    world = World(stored, validate=False)  # the API server's checks are not ours to time
    kind = CRONJOB if case is None else case.reconciled
    world.reconcile(kind, BAD if case is not None else GOOD)  # at creation: nothing due
    world.advance(60)
    return world.reconcile(kind, BAD if case is not None else GOOD, measure=True)


def row(label: str, reconciled: Reconciled) -> list[object]:
    outcome = "raised" if reconciled.error is not None else "returned"
    return [
        label,
        f"{reconciled.seconds * 1e3:.1f} ms",
        f"{reconciled.peak_bytes / 2**20:.1f} MiB",
        outcome,
    ]


def costliest(
    measured: list[tuple[Case, Reconciled]], good: Reconciled, top: int
) -> list[tuple[str, str]]:
    """The report's tables: the ``top`` costliest by CPU and by memory (with ``good``,
    the well-formed CronJob), and the reconciles that raised."""
    headers = ["stored object", "CPU", "peak Python memory", "reconcile"]
    tables = []
    for title, key in (
        ("by CPU", lambda pair: pair[1].seconds),
        ("by peak memory", lambda pair: pair[1].peak_bytes),
    ):
        worst = sorted(measured, key=key, reverse=True)[:top]
        rows = [row(str(case), reconciled) for case, reconciled in worst]
        rows.append(row("(a well-formed CronJob)", good))
        caption = f"The {top} costliest of {len(measured)} reconciles, {title}:"
        tables.append((caption, _common.markdown_table(headers, rows)))
    raised = [(case, r) for case, r in measured if r.error is not None]
    if raised:
        rows = [[str(case), clipped(reconciled.error)] for case, reconciled in raised[:top]]
        table = _common.markdown_table(["stored object", "raised"], rows)
        tables.append((f"Reconciles that raised ({len(raised)}):", table))
    return tables


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the arguments, run, print the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", default=",".join(KINDS), help="kinds fuzzed (all)")
    parser.add_argument("--top", type=int, default=10, help="rows per table (10)")
    parser.add_argument("--huge", type=int, default=HUGE, help="bytes of a huge value (1 MiB)")
    parser.add_argument("--every", type=int, default=1, help="measure every Nth case (1)")
    args = parser.parse_args(argv)
    good = reconcile_due(None)  # first: the schemas and imports are warm for every case
    assert good is not None
    measured: list[tuple[Case, Reconciled]] = []
    for case in cases(args.kinds.split(","), huge=args.huge)[:: args.every]:
        reconciled = reconcile_due(case)
        if reconciled is not None:
            measured.append((case, reconciled))
    _common.print_report(
        "One reconcile of a hostile stored object, at the minute its run is due",
        costliest(measured, good, args.top),
        notes=[
            f"{sum(r.error is not None for _, r in measured)} of {len(measured)} reconciles "
            "raised (each a finding).",
            "Pod templates are not validated here (the API server's work, not the manager's): "
            "every Job is created.",
        ],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
