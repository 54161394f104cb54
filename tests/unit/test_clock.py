"""The time module's pure parts: instants, the view's clock, field widths."""
import time

import pytest

from umview.modules import clock
from umview.modules.clock import NS, ViewClock


@pytest.mark.parametrize("text, seconds", [
    ("2030-01-02T03:04:05Z", 1893553445),
    ("2030-01-02T03:04:05+00:00", 1893553445),
    ("2030-01-02T05:04:05+02:00", 1893553445),
    ("2030-01-02 03:04:05.5Z", 1893553445.5),
    ("@2000000000", 2000000000),
    ("@-1.25", -1.25),
    ("1970-01-01T00:00:00Z", 0),
])
def test_instants_parse_to_nanoseconds_since_the_epoch(text, seconds):
    assert clock.parse_instant("freeze", text) == round(seconds * NS)


def test_an_instant_without_a_zone_is_local_time(monkeypatch):
    monkeypatch.setenv("TZ", "Etc/GMT-3")  # three hours east of UTC
    time.tzset()
    try:
        assert clock.parse_instant("start", "2030-01-02T06:04:05") == 1893553445 * NS
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


@pytest.mark.parametrize("text", ["yesterday", "2030-13-01", "@soon", ""])
def test_a_bad_instant_says_what_to_give(text):
    with pytest.raises(ValueError, match="ISO 8601 date and time: give e.g."):
        clock.parse_instant("freeze", text)


def test_an_offset_clock_shifts_readings_and_deadlines_alike():
    c = ViewClock(offset_ns=-5 * NS)
    assert c.view_ns(clock.CLOCK_REALTIME, 100 * NS) == 95 * NS
    assert c.real_ns(clock.CLOCK_REALTIME, 95 * NS) == 100 * NS
    assert c.view_ns(clock.CLOCK_TAI, 137 * NS) == 132 * NS


def test_a_frozen_clock_reads_its_instant_and_waits_what_lies_ahead_of_it():
    c = ViewClock(frozen_ns=1000 * NS)
    assert c.view_ns(clock.CLOCK_REALTIME, time.time_ns()) == 1000 * NS
    before = time.time_ns()
    deadline = c.real_ns(clock.CLOCK_REALTIME, 1002 * NS)
    assert before + 2 * NS <= deadline <= time.time_ns() + 2 * NS


def test_setting_an_offset_clock_moves_its_offset_and_a_frozen_one_its_instant():
    c = ViewClock()
    c.set(time.time_ns() + 3600 * NS)
    assert 3599 * NS <= c.offset_ns <= 3600 * NS
    f = ViewClock(frozen_ns=0)
    f.set(7 * NS)
    assert f.frozen_ns == 7 * NS and f.offset_ns == 0


@pytest.mark.parametrize("value, fmt, stored", [
    (2 ** 31, "i", -2 ** 31), (2 ** 31 - 1, "i", 2 ** 31 - 1), (-1, "i", -1), (2 ** 40, "q", 2 ** 40),
])
def test_a_field_keeps_what_the_kernel_truncates_it_to(value, fmt, stored):
    assert clock.wrap(value, fmt) == stored


def test_realtime_futex_ops_are_the_absolute_ones():
    assert sorted(clock.FUTEX_REALTIME_OPS) == [6, 134, 265, 267, 269, 393, 395, 397]
