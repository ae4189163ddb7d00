"""The REST client's retry loop runs on tenacity, and only once a retry is due.

tests/unit/test_retries.py holds what is retried and when (client-go's table); this
checks how the loop is run: the first attempt is sent before tenacity is involved (a
call that needs no retry builds no ``tenacity.Retrying``), a retried call builds exactly
one, and a line is logged before each wait.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
import tenacity

from cronjob_operator.runtime import errors
from cronjob_operator.runtime.client import _rest
from tests.unit.test_retries import CREATE, RESET, Response, client


@pytest.fixture
def loops(monkeypatch: pytest.MonkeyPatch) -> list[tenacity.Retrying]:
    """Every ``tenacity.Retrying`` the client builds; its waits are not slept."""
    built: list[tenacity.Retrying] = []
    real = tenacity.Retrying

    def retrying(**kwargs: Any) -> tenacity.Retrying:
        loop = real(**{**kwargs, "sleep": lambda _seconds: None})
        built.append(loop)
        return loop

    monkeypatch.setattr(tenacity, "Retrying", retrying)
    return built


def test_a_call_that_needs_no_retry_never_builds_the_loop(loops: list[tenacity.Retrying]) -> None:
    rest, _ = client([Response(200, b'{"kind":"List"}')])
    assert rest.request("GET", CREATE) == {"kind": "List"}
    rest, _ = client([Response(404, b'{"reason":"NotFound"}')])
    with pytest.raises(errors.NotFound):
        rest.request("GET", CREATE)
    assert loops == []


def test_a_retried_call_runs_in_one_tenacity_loop_that_counts_the_first_attempt(
    loops: list[tenacity.Retrying], caplog: pytest.LogCaptureFixture
) -> None:
    busy = Response(429, b"{}", {"Retry-After": "3"})
    rest, pool = client([RESET, busy, Response(200, b'{"kind":"List"}')])
    with caplog.at_level(logging.INFO, logger=_rest.__name__):
        assert rest.request("GET", CREATE) == {"kind": "List"}
    assert pool.sent == ["GET", "GET", "GET"]
    (loop,) = loops
    assert loop.statistics["attempt_number"] == 3
    assert loop.statistics["idle_for"] == 4.0  # 1 s after the reset, then Retry-After
    assert [record.getMessage().split(", as")[0] for record in caplog.records] == [
        f"GET {CREATE}: retry 1 in 1s",
        f"GET {CREATE}: retry 2 in 3s",
    ]
