from datetime import UTC, datetime, timedelta, timezone

import pytest

from relay.clock import isoformat

_MOMENTS = [
    datetime(2026, 11, 28, 7, 30, 1, 123456, tzinfo=UTC),
    datetime(2026, 11, 28, 7, 30, 1, 999999, tzinfo=UTC),
    datetime(2026, 11, 28, 7, 30, 2, 0, tzinfo=UTC),
    datetime(2026, 12, 31, 23, 59, 59, 999000, tzinfo=UTC),
    datetime(1969, 12, 31, 23, 59, 59, 500000, tzinfo=UTC),
    datetime(1, 1, 1, tzinfo=UTC),
    datetime(2026, 3, 29, 2, 30, 0, 7000, tzinfo=timezone(timedelta(hours=5, minutes=30))),
    datetime(2026, 3, 29, 23, 0, 0, 42, tzinfo=timezone(timedelta(hours=-8))),
]


@pytest.mark.parametrize("moment", _MOMENTS, ids=str)
def test_a_moment_is_shown_in_utc_to_the_millisecond_with_a_z(moment: datetime) -> None:
    expected = moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    assert isoformat(moment) == expected


def test_moments_in_the_same_second_keep_their_own_milliseconds() -> None:
    second = datetime(2026, 11, 28, 7, 30, 1, tzinfo=UTC)
    shown = [isoformat(second + timedelta(milliseconds=ms)) for ms in (0, 1, 998, 999)]
    assert shown == [
        "2026-11-28T07:30:01.000Z",
        "2026-11-28T07:30:01.001Z",
        "2026-11-28T07:30:01.998Z",
        "2026-11-28T07:30:01.999Z",
    ]


def test_the_same_second_on_another_day_is_shown_with_its_own_day() -> None:
    today = datetime(2026, 11, 28, 7, 30, 1, tzinfo=UTC)
    assert isoformat(today) == "2026-11-28T07:30:01.000Z"
    assert isoformat(today + timedelta(days=1)) == "2026-11-29T07:30:01.000Z"
