"""Due-time arithmetic: cron fields, intervals, and the daylight-saving edges of a zone."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from triggers.cron import ScheduleError, parse_schedule

BERLIN = "Europe/Berlin"


def utc(*parts) -> datetime:
    return datetime(*parts, tzinfo=UTC)


def test_a_weekday_cron_fires_at_8_local_time_in_summer_and_winter():
    schedule = parse_schedule(cron="0 8 * * 1-5", every_minutes=None, timezone=BERLIN)
    # Friday 2026-07-03 09:00 UTC is 11:00 in Berlin: next is Monday 06-07 08:00 CEST = 06:00 UTC.
    assert schedule.next_after(utc(2026, 7, 3, 9, 0)) == utc(2026, 7, 6, 6, 0)
    # In winter Berlin is UTC+1: 08:00 CET = 07:00 UTC.
    assert schedule.next_after(utc(2026, 1, 5, 6, 0)) == utc(2026, 1, 5, 7, 0)
    # Exactly at a due time, the next one is the following day's.
    assert schedule.next_after(utc(2026, 1, 5, 7, 0)) == utc(2026, 1, 6, 7, 0)


def test_a_local_time_the_clock_skips_fires_once_at_the_next_valid_time():
    # 2026-03-29: Berlin jumps from 02:00 CET to 03:00 CEST (01:00 UTC). 02:30 does not exist that night.
    daily = parse_schedule(cron="30 2 * * *", every_minutes=None, timezone=BERLIN)
    assert daily.next_after(utc(2026, 3, 28, 23, 0)) == utc(2026, 3, 29, 1, 0)  # 03:00 CEST, the next valid time
    assert daily.next_after(utc(2026, 3, 29, 1, 0)) == utc(2026, 3, 30, 0, 30)  # and not again that night
    # Every half hour: 02:00 and 02:30 both land on 03:00, which fires once, then 03:30.
    half = parse_schedule(cron="*/30 * * * *", every_minutes=None, timezone=BERLIN)
    at = half.next_after(utc(2026, 3, 29, 0, 30))  # 01:30 CET
    assert at == utc(2026, 3, 29, 1, 0)
    assert half.next_after(at) == utc(2026, 3, 29, 1, 30)


def test_a_local_time_the_clock_repeats_fires_once():
    # 2026-10-25: Berlin goes from 03:00 CEST back to 02:00 CET (01:00 UTC); 02:30 happens twice.
    daily = parse_schedule(cron="30 2 * * *", every_minutes=None, timezone=BERLIN)
    first = daily.next_after(utc(2026, 10, 24, 23, 0))
    assert first == utc(2026, 10, 25, 0, 30)  # 02:30 CEST, the first occurrence
    assert daily.next_after(first) == utc(2026, 10, 26, 1, 30)  # the repeat (01:30 UTC) is not a second fire


def test_an_interval_counts_from_its_anchor_and_ignores_the_zone():
    schedule = parse_schedule(cron=None, every_minutes=5, timezone=BERLIN)
    anchor = utc(2026, 3, 29, 0, 58)
    assert schedule.next_after(anchor, anchor=anchor) == utc(2026, 3, 29, 1, 3)
    assert schedule.next_after(utc(2026, 3, 29, 1, 4, 30), anchor=anchor) == utc(2026, 3, 29, 1, 8)
    assert schedule.due_between(utc(2026, 3, 29, 1, 3), utc(2026, 3, 29, 1, 30), anchor=anchor) == 6


@pytest.mark.parametrize(
    ("cron", "every", "zone", "words"),
    [
        ("0 8 * *", None, "UTC", "five fields"),
        ("61 * * * *", None, "UTC", "outside 0-59"),
        ("0 8 * * mon-xyz", None, "UTC", "not a number"),
        ("*/0 * * * *", None, "UTC", "step"),
        ("0 0 30 2 *", None, "UTC", "never fires"),
        ("0 8 * * *", None, "Mars/Olympus", "unknown time zone"),
        (None, None, "UTC", "cron expression or an interval"),
    ],
)
def test_bad_schedules_are_refused_with_words(cron, every, zone, words):
    with pytest.raises(ScheduleError, match=words):
        parse_schedule(cron=cron, every_minutes=every, timezone=zone)
