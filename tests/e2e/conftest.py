"""A fixture that tells an e2e fixture whether its test failed (to print the cluster then).

pytest keeps a test's reports only for hooks, so the hook below stores them on the item;
``test_failed`` (a fixture, so that no test module imports this conftest a second time
under another name) reads them back in a fixture's teardown.
"""

from __future__ import annotations

from collections.abc import Callable, Generator

import pytest

REPORTS = pytest.StashKey[dict[str, pytest.TestReport]]()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    item.stash.setdefault(REPORTS, {})[report.when] = report
    return report


@pytest.fixture
def test_failed(request: pytest.FixtureRequest) -> Callable[[], bool]:
    """Call it in teardown: true when the requesting test's setup or call failed."""

    def failed() -> bool:
        return any(report.failed for report in request.node.stash.get(REPORTS, {}).values())

    return failed
