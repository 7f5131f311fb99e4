"""The last hour's delivery figures per carrier and country, read from the attempts table
at most once a minute per process (relay.carriers.measured decides with them).

A final attempt is one of a live send, opened in the window and delivered or
failed before the window's end; an attempt canceled before its submit, aimed
at a carrier no longer configured, or refused as longer than `max_segments`
says nothing about a carrier and is left out. The query groups by carrier,
country, outcome and receipt time in whole seconds, so what crosses the wire
is bounded by those, not by traffic, and the window's rows are found through
`ix_attempts_at`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from relay.carriers import measured, routing
from relay.carriers.registry import CarrierSet
from relay.clock import Clock
from relay.db.driver import Db
from relay.db.sql import Sql, Tx

_NOT_ABOUT_THE_CARRIER = (
    routing.SEND_CANCELED,
    routing.CARRIER_NOT_CONFIGURED,
    routing.SMS_TOO_LONG,
)
_FIGURES = """
SELECT a.carrier, coalesce(v.country, m.country) AS country, a.status,
  CASE WHEN a.status = 'delivered' THEN {seconds} END AS seconds, count(*) AS n,
  sum(CASE WHEN a.status = 'delivered' AND v.id IS NOT NULL THEN 1 ELSE 0 END) AS verified,
  sum(CASE WHEN a.status = 'delivered' AND v.approved_at IS NOT NULL THEN 1 ELSE 0 END)
    AS approved
FROM attempts a
LEFT JOIN verifications v ON v.id = a.verification_id
LEFT JOIN messages m ON m.id = a.message_id
WHERE a.at >= :since AND a.at < :until AND a.updated_at < :until
  AND a.status IN ('delivered', 'failed')
  AND coalesce(v.livemode, m.livemode) = :live
  AND (a.status = 'delivered'
    OR coalesce({code}, '') NOT IN (:canceled, :not_configured, :too_long))
GROUP BY a.carrier, coalesce(v.country, m.country), a.status,
  CASE WHEN a.status = 'delivered' THEN {seconds} END
UNION ALL
SELECT f.carrier, f.country, f.status,
  CASE WHEN f.status = 'delivered' THEN {retained_seconds} END, sum(f.n),
  sum(CASE WHEN f.status = 'delivered' AND f.of_verification THEN f.n ELSE 0 END),
  sum(CASE WHEN f.status = 'delivered' AND f.approved THEN f.n ELSE 0 END)
FROM retained_figures f
WHERE f.kind = 'attempt' AND f.minute >= :since AND f.minute < :until
  AND f.final_minute < :until AND f.status IN ('delivered', 'failed') AND f.livemode = :live
  AND (f.status = 'delivered'
    OR coalesce(f.error_code, '') NOT IN (:canceled, :not_configured, :too_long))
GROUP BY f.carrier, f.country, f.status,
  CASE WHEN f.status = 'delivered' THEN {retained_seconds} END
"""
# Figures of deleted attempts are kept per minute in `retained_figures` (relay.retention),
# with the seconds this query's dialect computes: rounded here as a live row's are. The
# window is whole minutes, so a retained row is in it exactly when its attempts were.
FIGURES = Sql(
    _FIGURES.format(
        seconds="CAST(round((julianday(a.updated_at) - julianday(a.at)) * 86400) AS INTEGER)",
        code="json_extract(a.error, '$.code')",
        retained_seconds="CAST(round(f.seconds) AS INTEGER)",
    ),
    postgres=_FIGURES.format(
        seconds="CAST(round(EXTRACT(EPOCH FROM a.updated_at - a.at)) AS integer)",
        code="a.error ->> 'code'",
        retained_seconds="CAST(round(CAST(f.seconds AS numeric)) AS integer)",
    ),
)


async def read(tx: Tx, *, since: datetime, until: datetime) -> list[measured.Tally]:
    canceled, not_configured, too_long = _NOT_ABOUT_THE_CARRIER
    params = {
        "since": since,
        "until": until,
        "live": True,
        "canceled": canceled,
        "not_configured": not_configured,
        "too_long": too_long,
    }
    return [
        measured.Tally(
            row["carrier"],
            row["country"],
            row["status"] == "delivered",
            None if row["seconds"] is None else int(row["seconds"]),
            int(row["n"]),
            int(row["verified"]),
            int(row["approved"]),
        )
        for row in await tx.fetch(FIGURES, params)
    ]


@dataclass(frozen=True)
class Snapshot:
    """The figures of one window, by (carrier, country)."""

    until: datetime | None
    figures: dict[tuple[str, str], measured.Figures]

    def in_country(self, country: str) -> dict[str, measured.Figures]:
        wanted = country.upper()
        return {carrier: f for (carrier, where), f in self.figures.items() if where == wanted}


class RecentFigures:
    """The current window's figures, read once when the window moves (each minute)."""

    def __init__(self, db: Db, clock: Clock) -> None:
        self._db = db
        self._clock = clock
        self._snapshot = Snapshot(None, {})
        self._reading = asyncio.Lock()

    async def current(self) -> Snapshot:
        since, until = measured.window(self._clock.now())
        if self._snapshot.until == until:
            return self._snapshot
        # Sends that arrive together wait for one read instead of each making its own.
        async with self._reading:
            if self._snapshot.until != until:
                rows = await self._db.read(lambda tx: read(tx, since=since, until=until))
                self._snapshot = Snapshot(until, measured.tally(rows))
        return self._snapshot


class MeasuredRoutes:
    """Measured routes in the order a send takes them now."""

    def __init__(
        self, figures: RecentFigures, carriers: CarrierSet, draw: Callable[[], float]
    ) -> None:
        self.figures = figures
        self._carriers = carriers
        # The explore draw: a share of sends, not a secret, so no CSPRNG.
        self._draw = draw

    async def order(
        self, country: str, route: tuple[str, ...], *, draw: float | None = None
    ) -> measured.Ordered | None:
        """The order of a live send to `country` now; None when its route is not measured."""
        policy = self._carriers.routes.policy_for(country)
        if policy is None:
            return None
        snapshot = await self.figures.current()
        return measured.order(
            route,
            snapshot.in_country(country),
            self._carriers.prices_in(country),
            policy,
            draw=self._draw() if draw is None else draw,
        )
