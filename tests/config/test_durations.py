"""Retention settings take a number of seconds or a duration text, and refuse others plainly."""

from __future__ import annotations

from pathlib import Path

import pytest

from relay.config import Settings
from relay.durations import parse_duration, shown

from .test_config_command import env, relay, write  # noqa: F401


@pytest.mark.parametrize(
    ("given", "seconds"),
    [
        (90, 90),
        (2.5, 2),
        ("90", 90),
        ("90s", 90),
        ("1m", 60),
        ("12h", 43_200),
        ("30d", 2_592_000),
        ("2w", 1_209_600),
        (" 1.5H ", 5_400),
    ],
)
def test_a_duration_is_seconds_or_a_number_with_a_unit(given: object, seconds: int) -> None:
    assert parse_duration(given) == seconds


@pytest.mark.parametrize("given", ["3 months", "1mo", "-5s", "s", "", "0", 0, 0.5, True, None])
def test_anything_else_is_refused_with_what_is_accepted(given: object) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(given)


def test_a_duration_is_shown_in_its_largest_whole_unit() -> None:
    assert [shown(s) for s in (90, 60, 3600, 86_400 * 30, 604_800)] == [
        "90s",
        "1m",
        "1h",
        "30d",
        "1w",
    ]


def test_the_defaults_keep_rows_ninety_days_and_look_every_minute() -> None:
    settings = Settings()
    assert (settings.delete_after, settings.retention_interval) == (90 * 86_400, 60)


def test_the_environment_sets_retention_with_a_unit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RELAY_DELETE_AFTER", "12h")
    assert Settings().delete_after == 43_200


def test_a_bad_duration_in_a_file_is_a_problem_line_not_a_traceback(
    tmp_path: Path,
    env: dict[str, str],  # noqa: F811
) -> None:
    path = write(tmp_path, 'delete_after = "3 months"\nretention_interval = "1m"\n')
    checked = relay("config", "check", str(path), env=env)
    assert checked.returncode == 1
    assert "delete_after: " in checked.stdout
    assert "m (minutes)" in checked.stdout
    assert "Traceback" not in checked.stdout + checked.stderr
