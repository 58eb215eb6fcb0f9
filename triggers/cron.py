"""When a schedule is due: five-field cron or a fixed interval, in an IANA zone with its daylight-saving rules.

Local wall-clock times are what cron means, so the search walks local days and asks the zone which instant each
matching minute is. A minute the clock skips (spring forward) fires once, at the first minute that exists after it;
a minute the clock repeats (fall back) fires once, at its first occurrence. An interval is elapsed time and ignores
the zone.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

# Far enough for any real cron ("0 0 29 2 1" fires within 28 years); a spec that never matches in that span is
# refused when it is saved.
SEARCH_DAYS = 366 * 28
_FIELDS = (("minute", 0, 59), ("hour", 0, 23), ("day of month", 1, 31), ("month", 1, 12), ("day of week", 0, 7))
_NAMES = {
    3: {
        m: i + 1
        for i, m in enumerate(["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"])
    },
    4: {d: i for i, d in enumerate(["sun", "mon", "tue", "wed", "thu", "fri", "sat"])},
}


class ScheduleError(ValueError):
    pass


@dataclass(frozen=True)
class Cron:
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Monday, as date.weekday()
    any_day: bool  # day of month is "*"
    any_weekday: bool

    def matches_day(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        # Vixie cron: when both day fields are restricted, either one matching is enough.
        if self.any_day and self.any_weekday:
            return True
        if self.any_day:
            return day.weekday() in self.weekdays
        if self.any_weekday:
            return day.day in self.days
        return day.day in self.days or day.weekday() in self.weekdays


def _value(text: str, index: int) -> int:
    names = _NAMES.get(index, {})
    if text.lower() in names:
        return names[text.lower()]
    if not text.isdigit():
        raise ScheduleError(f"{_FIELDS[index][0]}: {text!r} is not a number")
    return int(text)


def _field(text: str, index: int) -> tuple[set[int], bool]:
    name, low, high = _FIELDS[index]
    values: set[int] = set()
    for part in text.split(","):
        step = 1
        if "/" in part:
            part, step_text = part.split("/", 1)
            if not step_text.isdigit() or int(step_text) < 1:
                raise ScheduleError(f"{name}: the step {step_text!r} is not a positive number")
            step = int(step_text)
        if part == "*":
            start, end = low, high
        elif "-" in part:
            first, last = part.split("-", 1)
            start, end = _value(first, index), _value(last, index)
        else:
            start = _value(part, index)
            end = high if step > 1 else start
        if not (low <= start <= high and low <= end <= high) or start > end:
            raise ScheduleError(f"{name}: {part!r} is outside {low}-{high}")
        values.update(range(start, end + 1, step))
    return values, text == "*"


def parse_cron(expression: str) -> Cron:
    fields = expression.split() if isinstance(expression, str) else []
    if len(fields) != 5:
        raise ScheduleError("a cron expression has five fields: minute hour day-of-month month day-of-week")
    parsed = [_field(text, i) for i, text in enumerate(fields)]
    weekdays = {(d - 1) % 7 for d in parsed[4][0]}  # cron's 0 and 7 are Sunday; date.weekday()'s Sunday is 6
    return Cron(
        minutes=tuple(sorted(parsed[0][0])),
        hours=tuple(sorted(parsed[1][0])),
        days=frozenset(parsed[2][0]),
        months=frozenset(parsed[3][0]),
        weekdays=frozenset(weekdays),
        any_day=parsed[2][1],
        any_weekday=parsed[4][1],
    )


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        raise ScheduleError(f"unknown time zone {name!r}") from None


def _instant(local: datetime, tz: ZoneInfo) -> datetime:
    """The instant of a local wall-clock minute: its first occurrence when repeated, and for a minute the clock
    skips, the first minute that exists after it."""
    for _ in range(24 * 60):
        aware = local.replace(tzinfo=tz, fold=0)
        if aware.astimezone(UTC).astimezone(tz).replace(tzinfo=None) == local:
            return aware.astimezone(UTC)
        local += timedelta(minutes=1)
    raise ScheduleError("the zone skips more than a day")  # no zone does


def cron_next(cron: Cron, tz: ZoneInfo, after: datetime) -> datetime | None:
    """The first due instant strictly after `after` (UTC), or None when none comes within SEARCH_DAYS."""
    start = after.astimezone(tz).replace(tzinfo=None, second=0, microsecond=0)
    day = start.date()
    for _ in range(SEARCH_DAYS):
        if cron.matches_day(day):
            for hour in cron.hours:
                for minute in cron.minutes:
                    local = datetime.combine(day, time(hour, minute))
                    if local < start:
                        continue
                    instant = _instant(local, tz)
                    if instant > after:
                        return instant
        day += timedelta(days=1)
    return None


@dataclass(frozen=True)
class Schedule:
    """A parsed schedule: `cron` in `tz`, or every `every_minutes`."""

    cron: Cron | None
    tz: ZoneInfo
    every_minutes: int | None

    def next_after(self, after: datetime, *, anchor: datetime | None = None) -> datetime | None:
        """The first due time after `after`. An interval counts from `anchor` (when it was started) so its due
        times do not drift with how late each sweep ran."""
        if self.cron is not None:
            return cron_next(self.cron, self.tz, after)
        step = timedelta(minutes=self.every_minutes)
        anchor = anchor or after
        if after < anchor:
            return anchor + step
        return anchor + step * ((after - anchor) // step + 1)

    def due_between(self, first: datetime, now: datetime, *, anchor: datetime | None = None, cap: int = 10_000) -> int:
        """How many due times fall in [first, now] (at most `cap`): a sweep after downtime fires once for them."""
        if first > now:
            return 0
        if self.cron is None:
            return min(cap, (now - first) // timedelta(minutes=self.every_minutes) + 1)
        count, at = 0, first
        while at is not None and at <= now and count < cap:
            count += 1
            at = cron_next(self.cron, self.tz, at)
        return count


def parse_schedule(*, cron: str | None, every_minutes: int | None, timezone: str) -> Schedule:
    tz = zone(timezone or "UTC")
    if cron:
        parsed = parse_cron(cron)
        if cron_next(parsed, tz, datetime.now(UTC)) is None:
            raise ScheduleError("the cron expression never fires")
        return Schedule(cron=parsed, tz=tz, every_minutes=None)
    if every_minutes is None:
        raise ScheduleError("give a cron expression or an interval in minutes")
    return Schedule(cron=None, tz=tz, every_minutes=int(every_minutes))
