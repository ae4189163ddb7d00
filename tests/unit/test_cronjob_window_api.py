"""spec.window, spec.maxScheduledRuns and spec.exclusions in the API (issue 40 item 2):
the validating webhook's field errors, the v1 model, and lossless v1 <-> v2 conversion."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pydantic
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cronjob_operator.api import batch_v1, batch_v2
from cronjob_operator.webhooks import conversion, cronjob
from tests.unit.test_webhooks import a_cronjob, a_stored_cronjob, messages

V1 = batch_v1.CRONJOB.api_version
V2 = batch_v2.CRONJOB.api_version


def test_the_webhook_names_each_bad_field() -> None:
    errors = messages(
        cronjob.validate_create(
            a_cronjob(
                window={"start": "2026-06-01T00:00:00Z", "end": "2026-05-01T00:00:00Z"},
                maxScheduledRuns=0,
                exclusions={"dates": ["2026-12-25", "2026-02-30"], "schedules": ["0 25 * * *"]},
            )
        )
    )
    assert errors == [
        "spec.maxScheduledRuns: Invalid value: 0: must be a whole number of at least 1, or "
        "unset for no limit",
        'spec.window.end: Invalid value: "2026-05-01T00:00:00Z": must be after spec.window.start',
        'spec.exclusions.dates[1]: Invalid value: "2026-02-30": must be a calendar date YYYY-MM-DD',
        'spec.exclusions.schedules[0]: Invalid value: "0 25 * * *": hour 25 is out of range 0-23',
    ]


def test_the_webhook_refuses_more_exclusions_than_the_schema_before_parsing_them() -> None:
    errors = messages(
        cronjob.validate_create(
            a_cronjob(
                exclusions={
                    "dates": ["2026-12-25"] * 367,
                    "schedules": ["0 9 * * *", "1," * 600 + "0 9 * * *"],
                }
            )
        )
    )
    assert errors == [
        'spec.exclusions.dates: Invalid value: "<367 dates>": must list at most 366 dates',
        'spec.exclusions.schedules[1]: Invalid value: "' + "1," * 20 + '...": must be at most '
        "1024 characters (five short cron fields)",
    ]


def test_a_good_window_limit_and_exclusions_pass_the_webhook_and_the_model() -> None:
    spec: dict[str, Any] = {
        "window": {"start": "2026-06-01T00:00:00Z", "end": "2026-07-01T00:00:00+02:00"},
        "maxScheduledRuns": 5,
        "exclusions": {"dates": ["2026-06-15"], "schedules": ["* * 25 12 *"]},
    }
    assert cronjob.validate_create(a_cronjob(**spec)) == []
    model = batch_v1.CronJobSpec.model_validate({**a_cronjob(**spec)["spec"]})
    assert model.max_scheduled_runs == 5


def test_the_model_refuses_what_the_webhook_refuses() -> None:
    with pytest.raises(pydantic.ValidationError, match="no calendar date"):
        batch_v1.Exclusions.model_validate({"dates": ["2026-02-30"]})
    with pytest.raises(pydantic.ValidationError, match="start must be before end"):
        batch_v1.RunWindow.model_validate(
            {"start": "2026-06-01T00:00:00Z", "end": "2026-06-01T00:00:00Z"}
        )


_INSTANTS = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
).map(lambda moment: moment.replace(microsecond=0))
_DATES = st.dates(min_value=datetime(2000, 1, 1).date(), max_value=datetime(2100, 1, 1).date())


@given(
    start=_INSTANTS,
    span=st.integers(min_value=1, max_value=10**8),
    limit=st.one_of(st.none(), st.integers(min_value=1, max_value=2**31 - 1)),
    dates=st.lists(_DATES, max_size=5, unique=True),
    hour=st.integers(min_value=0, max_value=23),
    remaining=st.integers(min_value=0, max_value=10),
)
def test_window_limit_and_exclusions_round_trip_through_v2(
    start: datetime, span: int, limit: int | None, dates: list[Any], hour: int, remaining: int
) -> None:
    v1 = a_stored_cronjob("0 * * * *")
    end = start + timedelta(seconds=span)
    v1["spec"].update(
        window={"start": start.isoformat(), "end": end.isoformat()},
        exclusions={"dates": [d.isoformat() for d in dates], "schedules": [f"* {hour} * * *"]},
    )
    if limit is not None:
        v1["spec"]["maxScheduledRuns"] = limit
    v1["status"].update(
        scheduledRuns={
            "count": 3,
            "countedThrough": "2026-01-02T03:00:00Z",
            "remaining": remaining,
        },
        skippedRuns={"accountedThrough": "2026-01-02T03:00:00Z", "excluded": 2},
    )
    v2 = conversion.convert(v1, V2)
    for field in ("window", "exclusions", "maxScheduledRuns"):
        assert v2["spec"].get(field) == v1["spec"].get(field)
    assert v2["status"] == v1["status"]
    assert conversion.convert(v2, V1) == v1
    assert conversion.convert(conversion.convert(v2, V1), V2) == v2
