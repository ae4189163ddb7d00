"""``wait_for``, the one way tests wait: its value, and what a timeout says."""

from __future__ import annotations

import pytest

from cronjob_operator.envtest import WaitTimeout, wait_for


def test_returns_the_first_truthy_value() -> None:
    answers = iter([0, None, "ready"])
    assert wait_for(lambda: next(answers), 5, interval=0) == "ready"


def test_a_timeout_names_the_wait_the_last_value_and_error_and_the_detail() -> None:
    calls: list[int] = []

    def never() -> int:
        calls.append(1)
        if len(calls) == 1:
            raise KeyError("not yet")
        return 0

    with pytest.raises(WaitTimeout) as raised:
        wait_for(
            never,
            0.05,
            interval=0.01,
            message="the thing",
            ignore=(KeyError,),
            detail=lambda: f"after {len(calls)} calls",
        )
    text = str(raised.value)
    assert text.startswith("timed out after 0.05s waiting for the thing (last value 0, ")
    assert "last error KeyError('not yet')" in text
    assert text.endswith(f"; after {len(calls)} calls")


def test_an_exception_not_ignored_propagates_at_once() -> None:
    def broken() -> bool:
        raise ValueError("bad")

    with pytest.raises(ValueError, match="bad"):
        wait_for(broken, 30, ignore=(KeyError,))
