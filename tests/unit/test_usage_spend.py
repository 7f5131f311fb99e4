"""Spend of a usage row: its billed segments times the carrier's price in its country."""

from __future__ import annotations

from decimal import Decimal

from relay.carriers.base import SubmitReceipt
from relay.delivery.usage import UsageRow

PRICES = {
    "operator-a": {"FR": Decimal("0.065"), "default": Decimal("0.09")},
    "twilio-main": {"US": Decimal("0.0079")},
}


def row(carrier: str, country: str, segments: int) -> UsageRow:
    return UsageRow("acct_1", "2026-11-26", country, carrier, "delivered", 10, segments)


def test_spend_is_segments_times_the_price_in_the_country() -> None:
    assert row("operator-a", "FR", 12).spend(PRICES) == Decimal("0.780")


def test_a_country_without_its_own_price_takes_the_carriers_default() -> None:
    assert row("operator-a", "DE", 3).spend(PRICES) == Decimal("0.27")


def test_no_price_means_no_spend_not_zero() -> None:
    assert row("twilio-main", "FR", 3).spend(PRICES) is None
    assert row("operator-b", "FR", 3).spend(PRICES) is None


def test_a_priced_row_that_billed_nothing_spent_nothing() -> None:
    assert row("twilio-main", "US", 0).spend(PRICES) == Decimal("0")


def test_a_receipt_bills_the_carriers_count_else_the_texts_segments() -> None:
    assert SubmitReceipt("m1", segments=3).billed("short") == 3
    assert SubmitReceipt("m1").billed("short") == 1
    assert SubmitReceipt("m1").billed("x" * 161) == 2
    assert SubmitReceipt("m1").billed("\u00e7" * 71) == 2  # ç is not GSM-7: 70 per part
