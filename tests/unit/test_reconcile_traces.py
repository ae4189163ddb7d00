"""The CronJob reconcile still does what the recorded traces say (tests/unit/reconcile_traces.py).

A tripwire for refactors of ``controllers/cronjob/``: the first seeds' traces (every
write, event, result and metric of a randomized story) must hash as recorded. A change
meant to alter behaviour re-records them: ``python -m tests.unit.reconcile_traces
--record`` (1000 seeds, a few minutes), and says why in its commit.
"""

from __future__ import annotations

import json
import logging

import pytest

from tests.unit import reconcile_traces

SEEDS = 30


def test_the_first_seeds_trace_as_recorded() -> None:
    recorded = json.loads(reconcile_traces.RECORDED.read_text())
    logging.disable(logging.WARNING)
    try:
        differ = [seed for seed in range(SEEDS) if reconcile_traces.digest(seed) != recorded[seed]]
    finally:
        logging.disable(logging.NOTSET)
    if differ:
        pytest.fail(
            f"seeds {differ} trace differently from the recording; "
            "`python -m tests.unit.reconcile_traces --dump <seed>` prints one"
        )
