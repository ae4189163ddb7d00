"""Property tests: the schedule agrees with a brute-force reference.

The reference walks every UTC minute of a short window and asks the spec's question of
each one directly: does its wall-clock time in the zone match the field sets (robfig's
day rule: both day fields restricted means OR, else AND), and is it not the second pass of
a repeated hour (unless the schedule runs every hour)? Schedules are generated from field
sets, written in every syntax the built-in accepts, so the reference never reads the
parser's output. Times are drawn near the DST transitions of the zones as often as not.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from zoneinfo import ZoneInfo

from hypothesis import event, given, settings
from hypothesis import strategies as st

from cronjob_operator import schedule
from cronjob_operator.schedule import ScheduleError, most_recent_due, parse_schedule

WINDOW = timedelta(hours=36)
MINUTE = timedelta(minutes=1)
SECOND = timedelta(seconds=1)
ZONES = [
    "UTC",
    "America/New_York",
    "Europe/Berlin",
    "Australia/Lord_Howe",  # a 30-minute DST shift
    "America/St_Johns",  # -03:30, with DST
    "Pacific/Chatham",  # +12:45, with DST
    "Asia/Kolkata",
    "Etc/GMT+5",
]
MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
DAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]


@dataclass(frozen=True)
class Field:
    text: str
    values: frozenset[int]
    star: bool


@dataclass(frozen=True)
class Cron:
    expression: str
    minutes: Field
    hours: Field
    days: Field
    months: Field
    weekdays: Field

    def matches(self, wall: datetime) -> bool:
        day = wall.day in self.days.values
        weekday = wall.isoweekday() % 7 in self.weekdays.values
        either = self.days.star or self.weekdays.star
        return (
            wall.minute in self.minutes.values
            and wall.hour in self.hours.values
            and wall.month in self.months.values
            and ((day and weekday) if either else (day or weekday))
        )

    def fires(
        self,
        zone: ZoneInfo,
        after: datetime,
        until: datetime,
        second_pass: Callable[[datetime], bool] = lambda first: False,
    ) -> list[datetime]:
        """Every schedule time in (after, until], by looking at each minute.

        On a fall-back day an every-hour schedule fires in both passes; any other fires in
        the second pass of a wall-clock time only when ``second_pass(first occurrence)``."""
        found = []
        t = after.replace(second=0, microsecond=0) + MINUTE
        twice = len(self.hours.values) == 24
        while t <= until:
            wall = t.astimezone(zone)
            if self.matches(wall) and (wall.fold == 0 or twice or second_pass(first_of(wall))):
                found.append(t)
            t += MINUTE
        return found


def first_of(wall: datetime) -> datetime:
    """The first-pass instant (UTC) of the repeated wall-clock time ``wall``."""
    return wall.replace(fold=0).astimezone(UTC)


@st.composite
def items(draw: st.DrawFn, low: int, high: int, names: list[str] | None) -> Field:
    def show(value: int) -> str:
        use_name: bool = bool(names) and draw(st.booleans())
        if names and use_name:
            name = names[value - low]
            return draw(st.sampled_from([name, name.upper(), name.title()]))
        return str(value)

    value = st.integers(low, high)
    step = st.integers(1, high - low + 2)
    kind = draw(st.sampled_from(["star", "stepped star", "one", "range", "stepped range", "from"]))
    if kind == "star":
        return Field(draw(st.sampled_from(["*", "?"])), frozenset(range(low, high + 1)), True)
    if kind == "stepped star":
        n = draw(step)
        return Field(f"*/{n}", frozenset(range(low, high + 1, n)), n == 1)
    if kind == "one":
        v = draw(value)
        return Field(show(v), frozenset([v]), False)
    a, b = sorted((draw(value), draw(value)))
    if kind == "range":
        return Field(f"{show(a)}-{show(b)}", frozenset(range(a, b + 1)), False)
    n = draw(step)
    if kind == "stepped range":
        return Field(f"{show(a)}-{show(b)}/{n}", frozenset(range(a, b + 1, n)), False)
    return Field(f"{show(a)}/{n}", frozenset(range(a, high + 1, n)), False)


@st.composite
def fields(
    draw: st.DrawFn, low: int, high: int, names: list[str] | None = None, star_chance: int = 0
) -> Field:
    if draw(st.integers(0, 9)) < star_chance:
        return Field("*", frozenset(range(low, high + 1)), True)
    parts = draw(st.lists(items(low, high, names), min_size=1, max_size=3))
    return Field(
        ",".join(p.text for p in parts),
        frozenset().union(*(p.values for p in parts)),
        any(p.star for p in parts),
    )


@st.composite
def small_hours(draw: st.DrawFn) -> Field:
    """Hours around 00:00-04:00, where the DST transitions of most zones are."""
    a, b = sorted((draw(st.integers(0, 4)), draw(st.integers(0, 4))))
    if draw(st.booleans()):
        return Field(f"{a}-{b}", frozenset(range(a, b + 1)), False)
    return Field(f"{a},{b}", frozenset([a, b]), False)


@st.composite
def crons(draw: st.DrawFn) -> Cron:
    minutes = draw(fields(0, 59))
    hours = draw(fields(0, 23, star_chance=3) | small_hours())
    days = draw(fields(1, 31, star_chance=6))
    months = draw(fields(1, 12, MONTHS, star_chance=8))
    weekdays = draw(fields(0, 6, DAYS, star_chance=6))
    texts = [f.text for f in (minutes, hours, days, months, weekdays)]
    return Cron(" ".join(texts), minutes, hours, days, months, weekdays)


@cache
def transitions(zone: str) -> list[datetime]:
    """The instants in 2024-2025 at which the zone's UTC offset changes (to the minute)."""
    tz = ZoneInfo(zone)

    def offset(t: datetime) -> timedelta | None:
        return t.astimezone(tz).utcoffset()

    found = []
    day = datetime(2024, 1, 1, tzinfo=UTC)
    while day < datetime(2026, 1, 1, tzinfo=UTC):
        if offset(day) != offset(day + timedelta(days=1)):
            low, high = 0, 24 * 60  # minutes into the day: old offset at low, new at high
            while high - low > 1:
                middle = (low + high) // 2
                low, high = (
                    (middle, high)
                    if offset(day + middle * MINUTE) == offset(day)
                    else (
                        low,
                        middle,
                    )
                )
            found.append(day + high * MINUTE)
        day += timedelta(days=1)
    return found


@st.composite
def moments(draw: st.DrawFn, zone: str) -> datetime:
    """An instant: often within hours, or minutes, of a DST transition of ``zone``."""
    near = transitions(zone)
    closeness = draw(st.sampled_from(["anywhere", "hours", "minutes"]))
    if near and closeness == "hours":
        base = draw(st.sampled_from(near)) + draw(st.integers(-4 * 60, 4 * 60)) * MINUTE
    elif near and closeness == "minutes":
        base = draw(st.sampled_from(near)) + draw(st.integers(-30, 90)) * MINUTE
    else:
        base = datetime(2024, 1, 1, tzinfo=UTC) + draw(st.integers(0, 2 * 366 * 24 * 60)) * MINUTE
    second = draw(st.sampled_from([0, 0, 1, 30, 59]))
    micro = draw(st.sampled_from([0, 0, 1, 500_000, 999_999]))
    return base + timedelta(seconds=second, microseconds=micro)


@st.composite
def cases(draw: st.DrawFn) -> tuple[Cron, str, datetime]:
    zone = draw(st.sampled_from(ZONES))
    return draw(crons()), zone, draw(moments(zone))


@st.composite
def transition_cases(draw: st.DrawFn) -> tuple[Cron, str, datetime]:
    """A schedule, a zone with DST, and an instant up to 75 minutes before a transition."""
    zone = draw(st.sampled_from([z for z in ZONES if transitions(z)]))
    before = draw(st.integers(0, 75)) * MINUTE + draw(st.sampled_from([0, 1, 30])) * SECOND
    return draw(crons()), zone, draw(st.sampled_from(transitions(zone))) - before


@st.composite
def due_cases(draw: st.DrawFn) -> tuple[Cron, str, datetime]:
    """Like cases(), but now is often inside a spring-forward gap or a repeated hour."""
    if draw(st.booleans()):
        return draw(cases())
    zone = draw(st.sampled_from([z for z in ZONES if transitions(z)]))
    shift = draw(st.integers(-75, 150)) * MINUTE + draw(st.sampled_from([0, 1, 30])) * SECOND
    return draw(crons()), zone, draw(st.sampled_from(transitions(zone))) + shift


def parsed(cron: Cron, zone: str) -> schedule.Schedule | None:
    assert schedule.validate_schedule(cron.expression) == []
    try:
        return parse_schedule(cron.expression, zone)
    except ScheduleError as exc:
        if exc.reason != "InvalidSchedule":
            raise
        return None


@settings(max_examples=120, deadline=None)
@given(cases())
def test_next_after_agrees_with_brute_force(case: tuple[Cron, str, datetime]) -> None:
    cron, zone, t = case
    subject = parsed(cron, zone)
    expected = cron.fires(ZoneInfo(zone), t, t + WINDOW)
    event("fires in the window" if expected else "does not fire in the window")
    if subject is None:
        assert expected == []
        return
    found = subject.next_after(t)
    if expected:
        assert found == expected[0]
    else:
        assert found is None or found > t + WINDOW


@settings(max_examples=60, deadline=None)
@given(transition_cases())
def test_next_after_walks_across_a_dst_transition(case: tuple[Cron, str, datetime]) -> None:
    """Step from each time to the next, through a spring-forward gap or a repeated hour."""
    cron, zone, t = case
    subject = parsed(cron, zone)
    if subject is None:
        return
    until = t + timedelta(hours=2, minutes=30)  # past any repeated hour
    expected = cron.fires(ZoneInfo(zone), t, until)
    found: list[datetime] = []
    step = subject.next_after(t)
    while step is not None and step <= until:
        assert not found or step > found[-1]
        found.append(step)
        step = subject.next_after(step)
    assert found == expected


@settings(max_examples=120, deadline=None)
@given(
    due_cases(),
    st.integers(0, int(WINDOW.total_seconds())),
    st.none() | st.integers(0, int(WINDOW.total_seconds())),
)
def test_most_recent_due_agrees_with_brute_force(
    case: tuple[Cron, str, datetime], back: int, deadline: int | None
) -> None:
    cron, zone, now = case
    subject = parsed(cron, zone)
    if subject is None:
        return
    earliest = now - timedelta(seconds=back)
    lower = earliest if deadline is None else max(earliest, now - timedelta(seconds=deadline))
    # The fall-back rule: a second pass runs only when its first pass was not run (after
    # ``earliest``) and is out of the deadline's reach.
    reach = None if deadline is None else now - timedelta(seconds=deadline)
    second_pass = (
        (lambda first: False) if reach is None else (lambda first: earliest < first <= reach)
    )
    missed = cron.fires(ZoneInfo(zone), lower, now, second_pass)
    ahead = cron.fires(ZoneInfo(zone), now, now + WINDOW, second_pass)

    due = most_recent_due(subject, earliest=earliest, now=now, starting_deadline_seconds=deadline)
    recent = cron.fires(ZoneInfo(zone), now - WINDOW, now, second_pass)
    if recent:
        assert due.latest == recent[-1]

    event("a time is due" if missed else "nothing is due")
    assert due.scheduled == (missed[-1] if missed else None)
    assert due.missed == min(len(missed), schedule.MAX_MISSED + 1)
    assert due.too_many_missed is (len(missed) > schedule.MAX_MISSED)
    if ahead:
        assert due.next_time == ahead[0]
    else:
        assert due.next_time is None or due.next_time > now + WINDOW


@settings(max_examples=100, deadline=None)
@given(
    st.integers(1, 3 * 3600).map(lambda s: max(s, 60)),  # >= 1 min: a cheap reference
    moments("UTC"),
    st.integers(0, int(WINDOW.total_seconds())),
    st.none() | st.integers(0, int(WINDOW.total_seconds())),
)
def test_every_agrees_with_brute_force(
    seconds: int, now: datetime, back: int, deadline: int | None
) -> None:
    subject = parse_schedule(f"@every {seconds}s")
    earliest = now - timedelta(seconds=back)
    lower = earliest if deadline is None else max(earliest, now - timedelta(seconds=deadline))
    anchor = earliest.replace(microsecond=0)
    times = []
    k = 1
    while anchor + k * timedelta(seconds=seconds) <= now:
        times.append(anchor + k * timedelta(seconds=seconds))
        k += 1
    missed = [t for t in times if t > lower]

    due = most_recent_due(subject, earliest=earliest, now=now, starting_deadline_seconds=deadline)

    assert due.scheduled == (missed[-1] if missed else None)
    assert due.missed == min(len(missed), schedule.MAX_MISSED + 1)
    assert due.next_time == anchor + k * timedelta(seconds=seconds)


@settings(max_examples=100, deadline=None)
@given(
    due_cases(),
    st.integers(0, int(WINDOW.total_seconds())),
    st.none() | st.integers(0, int(WINDOW.total_seconds())),
    st.integers(1, 150),
)
def test_missed_times_agree_with_brute_force(
    case: tuple[Cron, str, datetime], back: int, deadline: int | None, limit: int
) -> None:
    """catchUpPolicy All: every unmet time in reach, oldest first, the newest ``limit``."""
    cron, zone, now = case
    subject = parsed(cron, zone)
    if subject is None:
        return
    earliest = now - timedelta(seconds=back)
    lower = earliest if deadline is None else max(earliest, now - timedelta(seconds=deadline))
    reach = None if deadline is None else now - timedelta(seconds=deadline)
    second_pass = (
        (lambda first: False) if reach is None else (lambda first: earliest < first <= reach)
    )
    missed = cron.fires(ZoneInfo(zone), lower, now, second_pass)

    found = schedule.missed_times(
        subject, earliest=earliest, now=now, starting_deadline_seconds=deadline, limit=limit
    )
    due = most_recent_due(subject, earliest=earliest, now=now, starting_deadline_seconds=deadline)

    event("more than the limit" if len(missed) > limit else "within the limit")
    assert list(found) == missed[-limit:]
    assert (found[-1] if found else None) == due.scheduled


@settings(max_examples=100, deadline=None)
@given(cases(), st.integers(0, int(WINDOW.total_seconds())), st.integers(1, 40))
def test_walking_in_steps_visits_every_time_once(
    case: tuple[Cron, str, datetime], span: int, limit: int
) -> None:
    """Skip accounting resumes a bounded walk at the last time it saw: resumed walks
    together are exactly the times in the window, each once, in order."""
    cron, zone, start = case
    subject = parsed(cron, zone)
    if subject is None:
        return
    through = start + timedelta(seconds=span)
    walked: list[datetime] = []
    mark = start
    while True:
        step = list(schedule.times_between(subject, mark, through, limit=limit))
        assert len(step) <= limit
        walked.extend(step)
        if len(step) < limit:
            break
        mark = step[-1]
    assert walked == list(itertools.takewhile(lambda t: t <= through, subject.times_after(start)))


@settings(max_examples=100, deadline=None)
@given(
    st.integers(60, 3 * 3600),
    moments("UTC"),
    st.integers(0, int(WINDOW.total_seconds())),
    st.none() | st.integers(0, int(WINDOW.total_seconds())),
    st.integers(1, 150),
)
def test_every_missed_times_agree_with_brute_force(
    seconds: int, now: datetime, back: int, deadline: int | None, limit: int
) -> None:
    subject = parse_schedule(f"@every {seconds}s")
    earliest = now - timedelta(seconds=back)
    lower = earliest if deadline is None else max(earliest, now - timedelta(seconds=deadline))
    anchor = earliest.replace(microsecond=0)
    times = []
    k = 1
    while anchor + k * timedelta(seconds=seconds) <= now:
        times.append(anchor + k * timedelta(seconds=seconds))
        k += 1
    missed = [t for t in times if t > lower]

    found = schedule.missed_times(
        subject, earliest=earliest, now=now, starting_deadline_seconds=deadline, limit=limit
    )

    assert list(found) == missed[-limit:]
