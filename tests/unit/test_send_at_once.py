"""`AbuseGuard.allows_at_once` lets a send through only where `refusal` would, without a read
or a write: a create PostgreSQL folds into one statement is one the whole create would send."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from relay.abuse.models import GuardMode, Kind, Rules, Totals
from relay.abuse.service import AbuseGuard
from relay.abuse.store import NumberVerification, SendContext
from relay.accounts.models import Scope
from relay.phone import Destination

NOW = datetime(2026, 11, 21, 10, 7, 30, tzinfo=UTC)
TO = Destination(e164="+14155550100", country="US")
PREFIX, COUNTRY = (Kind.PREFIX, "+1415555"), (Kind.COUNTRY, "US")
RULES = Rules(
    number_verifications_per_hour=2,
    number_failed_checks_per_day=3,
    test_mode_factor=1,
    daily_sms_cap=5,
    prefix_min_sends=4,
    country_min_sends=6,
)


class NoDatabase:
    """A Tx that fails any statement: `refusal` must decide on what was read."""

    dialect = "postgresql"

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"refusal ran {name} where allows_at_once saw no need to")


totals = st.builds(Totals, st.integers(0, 8), st.integers(0, 3), st.integers(0, 4))
contexts = st.builds(
    SendContext,
    counters=st.fixed_dictionaries(
        {
            (Kind.NUMBER, TO.e164): totals,
            PREFIX: totals,
            COUNTRY: totals,
            (Kind.ACCOUNT, ""): totals,
        }
    ),
    blocked=st.dictionaries(
        st.sampled_from([PREFIX, COUNTRY]),
        st.integers(-90, 90).map(lambda minutes: NOW + timedelta(minutes=minutes)),
    ),
    verifications=st.lists(
        st.integers(1, 120).map(
            lambda minutes: NumberVerification(
                "ver", False, NOW - timedelta(minutes=minutes), NOW + timedelta(minutes=5)
            )
        ),
        max_size=3,
    ),
)


@settings(max_examples=300, deadline=None)
@given(seen=contexts, guard=st.sampled_from(list(GuardMode)))
def test_a_send_allowed_at_once_is_one_refusal_lets_through_without_the_database(
    seen: SendContext, guard: GuardMode
) -> None:
    abuse = AbuseGuard(dataclasses.replace(RULES, guard=guard))
    scope = Scope("acct_1", livemode=False)
    if abuse.allows_at_once(scope, TO, seen, now=NOW):
        refused = asyncio.run(
            abuse.refusal(NoDatabase(), scope, TO, seen, opens=True, now=NOW)  # type: ignore[arg-type]
        )
        assert refused is None


def test_a_number_with_nothing_against_it_is_sent_at_once() -> None:
    seen = SendContext(
        counters=dict.fromkeys(
            [(Kind.NUMBER, TO.e164), PREFIX, COUNTRY, (Kind.ACCOUNT, "")], Totals()
        )
    )
    assert AbuseGuard(RULES).allows_at_once(Scope("acct_1", livemode=False), TO, seen, now=NOW)
