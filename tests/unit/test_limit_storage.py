"""What the log says about the limits' store: at most once a minute, never its password."""

from __future__ import annotations

import logging

import pytest

from relay.web.limit_storage import OutageLog, shown

URI = "async+redis://relay:hunter2@redis.internal:6379/0"


def test_a_storage_password_is_never_shown() -> None:
    assert shown(URI) == "redis://relay:***@redis.internal:6379/0"
    assert shown("redis://:hunter2@redis.internal/0") == "redis://:***@redis.internal/0"
    assert shown("redis://redis.internal:6379/0") == "redis://redis.internal:6379/0"


def test_an_outage_is_said_once_a_minute_and_its_end_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [0.0]
    outages = OutageLog(clock=lambda: now[0])
    with caplog.at_level(logging.INFO, logger="relay.limits"):
        for _ in range(1000):
            outages.down(URI, ConnectionRefusedError(111, "Connection refused"))
            now[0] += 0.05  # fifty seconds in all
        outages.up(URI)
        outages.up(URI)
        now[0] += 11  # a minute after the first
        outages.down(URI, TimeoutError())
    lines = [record.getMessage() for record in caplog.records]
    assert [line.split()[0] for line in lines] == [
        "rate_limit.storage_unavailable",
        "rate_limit.storage_available",
        "rate_limit.storage_unavailable",
    ]
    assert "hunter2" not in "".join(lines)
    assert "no answer within" in lines[-1]
