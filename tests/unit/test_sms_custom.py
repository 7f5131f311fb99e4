"""An account's own texts: what is refused and why, what is filled in, and what it costs."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import MappingProxyType

import pytest

from relay.sms.custom import (
    CustomTemplates,
    TemplateInvalid,
    check_template,
    longest_segments,
    remaining_minutes,
    render_text,
    sms_segments,
)
from relay.sms.text import render_sms

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Words:
    code: str = "482913"
    brand: str = "Acme"
    locale: str = "fr"
    expires_at: datetime = NOW + timedelta(minutes=10)
    templates: MappingProxyType[str, str] = field(default_factory=lambda: MappingProxyType({}))


@pytest.mark.parametrize(
    "text",
    [
        "{brand} code {code}",
        "{brand}: {code}, valid {minutes} min.",
        "Votre code {brand} : {code}\nÀ bientôt",
        "کد {brand} {code}\u200c",
    ],
)
def test_a_text_with_the_code_and_known_placeholders_is_accepted(text: str) -> None:
    check_template("sms", text)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("Your code is here", "must hold {code}"),
        ("{brand} only", "must hold {code}"),
        ("Code {code}", "must hold {brand}"),
        ("Code {code}, {minutes} min", "must hold {brand}"),
        ("Code {code} for {user}", "unknown placeholder {user}"),
        ("Code {code:>10}", "unknown placeholder {code:>10}"),
        ("Code {code!r}", "unknown placeholder {code!r}"),
        ("Code {0} {code}", "unknown placeholder {0}"),
        ("Code {} {code}", "unknown placeholder {}"),
        ("Code {code", "unbalanced brace"),
        ("Code code} {code}", "unbalanced brace"),
        ("Code {{code}}", "unbalanced brace"),
        ("Code {code}\x07", "control characters"),
    ],
)
def test_a_text_relay_cannot_fill_is_refused_with_the_reason(text: str, reason: str) -> None:
    with pytest.raises(TemplateInvalid, match=reason.replace("{", r"\{").replace("}", r"\}")):
        check_template("sms", text)


def test_whatsapp_has_no_custom_text() -> None:
    with pytest.raises(TemplateInvalid, match="WhatsApp sends the template Meta approved"):
        check_template("whatsapp", "Code {code}")


def test_a_text_past_its_channels_length_is_refused() -> None:
    check_template("email", "{brand} {code} " + "a" * 1982)
    with pytest.raises(TemplateInvalid, match="at most 480 characters"):
        check_template("sms", "{brand} {code} " + "a" * 480)


def test_a_long_sms_text_counts_its_segments_with_a_six_digit_code_and_the_brand() -> None:
    assert sms_segments("Your {brand} code: {code}", brand="Acme") == 1
    assert sms_segments("{code} " + "a" * 200, brand="Acme") == 2
    assert sms_segments("{code} " + "ж" * 70, brand="Acme") == 2


def test_the_longest_segments_count_the_longest_brand_code_and_webotp_line() -> None:
    # 133 septets of words: one segment with "Acme" and a 6-digit code, two with a
    # 30-character brand and a 10-character code.
    text = "{brand} {code} " + "a" * 133
    assert sms_segments(text, brand="Acme") == 1
    assert longest_segments(text, brand="Acme") == 2
    # A UCS-2 brand of the account's own makes the whole text UCS-2.
    assert longest_segments("{brand} {code} " + "a" * 60, brand="Łódź") == 2
    assert longest_segments("{brand} {code}", brand="Acme", webotp_domain="x" * 63) == 1
    assert longest_segments("{brand} {code} " + "a" * 80, brand="A", webotp_domain="x" * 40) == 2


def test_a_stored_text_that_does_not_name_the_brand_is_not_used() -> None:
    custom = CustomTemplates.of({("sms", "en"): "Code {code}", ("email", "en"): "{brand} {code}"})
    assert custom.for_locale("en") == {"email": "{brand} {code}"}


def test_minutes_are_what_remains_rounded_up() -> None:
    assert remaining_minutes(NOW + timedelta(minutes=10), now=NOW) == 10
    assert remaining_minutes(NOW + timedelta(seconds=61), now=NOW) == 2
    assert remaining_minutes(NOW + timedelta(seconds=5), now=NOW) == 1


def test_the_accounts_text_is_filled_with_brand_code_and_minutes() -> None:
    words = Words(templates=MappingProxyType({"sms": "{brand}: {code} ({minutes} min)"}))
    assert render_text(words, "sms", now=NOW + timedelta(minutes=4)) == "Acme: 482913 (6 min)"


def test_without_a_text_of_its_own_the_channel_gets_relays_words() -> None:
    words = Words(templates=MappingProxyType({"sms": "{code}"}))
    assert render_text(words, "email", now=NOW) == render_sms(
        locale="fr", brand="Acme", code="482913"
    )


def test_a_locales_text_is_the_exact_one_then_its_languages() -> None:
    custom = CustomTemplates(
        MappingProxyType(
            {("sms", "pt"): "pt {code}", ("sms", "pt-BR"): "br {code}", ("email", "pt"): "e"}
        )
    )
    assert custom.for_locale("pt-BR") == {"sms": "br {code}", "email": "e"}
    assert custom.for_locale("pt-PT") == {"sms": "pt {code}", "email": "e"}
    assert custom.for_locale("es") == {}
    assert custom.locales == {"pt", "pt-BR"}
