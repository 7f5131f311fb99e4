"""The failure budget of carrier callbacks: per carrier, 429 past it, one log line a minute."""

from __future__ import annotations

import asyncio

import pytest

from relay.errors import AuthenticationFailed, RateLimited, RelayError
from relay.web.callback_budget import LOG_EVERY, CallbackFailures


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def refusals(failures: CallbackFailures, carrier: str, count: int) -> list[RelayError]:
    async def go() -> list[RelayError]:
        return [await failures.refusal(carrier, "forged", "no match") for _ in range(count)]

    return asyncio.run(go())


def test_failures_past_the_burst_are_answered_429_with_the_wait_and_others_still_401() -> None:
    clock = Clock()
    failures = CallbackFailures(rate=5.0, burst=300, clock=clock)

    answers = refusals(failures, "telnyx-main", 310)

    assert [type(a) for a in answers] == [AuthenticationFailed] * 300 + [RateLimited] * 10
    assert answers[0].message == "no match"
    last = answers[-1]
    assert isinstance(last, RateLimited)
    assert 1 <= last.retry_after <= 60
    assert [type(a) for a in refusals(failures, "vonage-main", 1)] == [AuthenticationFailed]


def test_the_budget_refills_after_its_window() -> None:
    clock = Clock()
    failures = CallbackFailures(rate=5.0, burst=300, clock=clock)
    refusals(failures, "telnyx-main", 301)

    clock.now += 61

    assert [type(a) for a in refusals(failures, "telnyx-main", 1)] == [AuthenticationFailed]


def test_a_flood_of_failures_writes_one_line_a_minute_per_carrier_with_what_it_held_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    failures = CallbackFailures(rate=5.0, burst=300, clock=clock)

    with caplog.at_level("WARNING", logger="relay.callbacks"):
        refusals(failures, "telnyx-main", 310)
        refusals(failures, "vonage-main", 2)
        clock.now += LOG_EVERY
        refusals(failures, "telnyx-main", 1)

    lines = [
        (r.carrier, r.refused, r.over_budget)  # type: ignore[attr-defined]
        for r in caplog.records
        if r.getMessage() == "carrier.callback_refused"
    ]
    assert lines == [("telnyx-main", 1, 0), ("vonage-main", 1, 0), ("telnyx-main", 310, 10)]
