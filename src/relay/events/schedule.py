"""The webhook retry schedule, pure: retries are data, time and chance are arguments."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from relay.events.models import DeliveryStatus

# ±10 %: enough to spread a burst of failures to one receiver (it went down
# for everyone at once) so the retries do not all arrive in the same second.
JITTER = 0.1


@dataclass(frozen=True)
class Next:
    """What becomes of a delivery after one attempt."""

    status: DeliveryStatus
    attempt_at: datetime | None  # set exactly when status is PENDING


def max_attempts(schedule: Sequence[float]) -> int:
    """The first attempt plus one retry per entry of the schedule."""
    return 1 + len(schedule)


def retry_delay(
    retry: int, schedule: Sequence[float], *, random: Callable[[], float], jitter: float = JITTER
) -> float:
    """Seconds before retry number `retry` (1-based), jittered within ±`jitter`.

    `random` returns a float in [0, 1), like `random.random`.
    """
    base = schedule[retry - 1]
    return max(0.0, base * (1 + jitter * (2 * random() - 1)))


def after_attempt(
    *,
    ok: bool,
    number: int,
    schedule: Sequence[float],
    now: datetime,
    random: Callable[[], float],
) -> Next:
    """Delivered on success; otherwise the next retry, or dropped after the last one."""
    if ok:
        return Next(DeliveryStatus.DELIVERED, None)
    if number >= max_attempts(schedule):
        return Next(DeliveryStatus.DROPPED, None)
    delay = retry_delay(number, schedule, random=random)
    return Next(DeliveryStatus.PENDING, now + timedelta(seconds=delay))
