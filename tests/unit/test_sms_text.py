"""The words of an OTP SMS: locales, brand, WebOTP line, and what they cost."""

from __future__ import annotations

import pytest

from relay.sms.custom import NO_TEMPLATES
from relay.sms.encoding import is_gsm7, segment_count, septet_length
from relay.sms.locales import MalformedLocale, is_valid_bcp47, parse_locale, resolve_locale
from relay.sms.templates import BUILT_IN_LOCALES
from relay.sms.text import render_sms, render_subject, sanitize_brand

SUPPORTED_LOCALES = BUILT_IN_LOCALES
# The languages written in the GSM-7 alphabet; the others are sent as UCS-2.
GSM7_LOCALES = ("en", "es", "fr", "de", "pt", "it", "nl", "sv", "id")

LONGEST_CODE = "9" * 10
LONGEST_DOMAIN = "a" * 36 + ".com"
# 30 basic characters, and extension characters that would be 30 x 2 septets uncapped.
LONGEST_BRANDS = ["B" * 30, "€" * 30, "[" * 40]


def test_english_text_names_brand_and_code_and_warns_not_to_share() -> None:
    text = render_sms(locale="en", brand="Acme", code="123456")
    assert text == "Your Acme verification code is 123456. Do not share it."


@pytest.mark.parametrize("locale", SUPPORTED_LOCALES)
def test_each_locale_renders_its_brand_and_code(locale: str) -> None:
    text = render_sms(locale=locale, brand="Acme Bank", code="482913")
    assert "Acme Bank" in text
    assert "482913" in text


@pytest.mark.parametrize("locale", SUPPORTED_LOCALES)
def test_each_locale_has_its_own_wording(locale: str) -> None:
    others = {
        render_sms(locale=other, brand="Acme", code="1234")
        for other in SUPPORTED_LOCALES
        if other != locale
    }
    assert render_sms(locale=locale, brand="Acme", code="1234") not in others


@pytest.mark.parametrize("locale", GSM7_LOCALES)
def test_each_latin_locale_without_other_accents_stays_in_the_gsm7_alphabet(locale: str) -> None:
    assert is_gsm7(render_sms(locale=locale, brand="Acme", code="123456"))


def test_supported_locales_are_english_spanish_french_german_portuguese() -> None:
    assert set(SUPPORTED_LOCALES) >= {"en", "es", "fr", "de", "pt"}


@pytest.mark.parametrize("brand", LONGEST_BRANDS)
def test_english_text_with_longest_brand_fits_one_segment(brand: str) -> None:
    assert len(LONGEST_DOMAIN) == 40
    text = render_sms(locale="en", brand=brand, code=LONGEST_CODE, webotp_domain=LONGEST_DOMAIN)
    assert is_gsm7(text)
    assert septet_length(text) <= 160
    assert segment_count(text) == 1


@pytest.mark.parametrize("brand", LONGEST_BRANDS)
@pytest.mark.parametrize("locale", GSM7_LOCALES)
def test_every_gsm7_locale_with_longest_brand_code_and_domain_fits_one_segment(
    locale: str, brand: str
) -> None:
    text = render_sms(locale=locale, brand=brand, code=LONGEST_CODE, webotp_domain=LONGEST_DOMAIN)
    assert segment_count(text) == 1


def test_webotp_line_is_the_last_line_with_domain_and_code() -> None:
    text = render_sms(locale="en", brand="Acme", code="123456", webotp_domain="login.acme.com")
    body, last_line = text.rsplit("\n", 1)
    assert body == render_sms(locale="en", brand="Acme", code="123456")
    assert last_line == "@login.acme.com #123456"


def test_webotp_domain_is_lowercased() -> None:
    text = render_sms(locale="en", brand="Acme", code="1234", webotp_domain="Login.Acme.COM")
    assert text.endswith("\n@login.acme.com #1234")


def test_no_webotp_domain_means_a_single_line() -> None:
    assert "\n" not in render_sms(locale="fr", brand="Acme", code="1234")


@pytest.mark.parametrize(
    "domain",
    [
        "",
        "https://acme.com",
        "acme.com/login",
        "acme.com:443",
        "-acme.com",
        "acme..com",
        "a_b.com",
        "acme.com.",
        "accént.fr",
        "a" * 64 + ".com",
    ],
)
def test_webotp_domain_that_is_not_a_bare_hostname_is_rejected(domain: str) -> None:
    with pytest.raises(ValueError, match="bare hostname"):
        render_sms(locale="en", brand="Acme", code="1234", webotp_domain=domain)


FULLWIDTH_DIGITS = "\uff11\uff12\uff13\uff14"


@pytest.mark.parametrize("code", ["", "12 34", "12\n34", "{code}", FULLWIDTH_DIGITS])
def test_code_that_is_not_ascii_letters_and_digits_is_rejected(code: str) -> None:
    with pytest.raises(ValueError, match="code"):
        render_sms(locale="en", brand="Acme", code=code)


def test_brand_is_stripped_and_its_whitespace_collapsed() -> None:
    assert sanitize_brand("  Acme \t\n  Bank  ") == "Acme Bank"


def test_brand_loses_control_and_invisible_format_characters() -> None:
    assert sanitize_brand("Ac\x00me\x07 \u202eBank\u200b") == "Acme Bank"


def test_brand_is_capped_at_30_characters() -> None:
    assert sanitize_brand("A" * 45) == "A" * 30


def test_brand_extension_characters_count_twice_towards_the_cap() -> None:
    assert sanitize_brand("€" * 20) == "€" * 15


def test_brand_cut_on_a_space_loses_the_trailing_space() -> None:
    assert sanitize_brand("A" * 29 + " Bank") == "A" * 29


def test_brand_braces_are_shown_verbatim_not_treated_as_placeholders() -> None:
    assert "{code}" in render_sms(locale="en", brand="{code}", code="1234")


@pytest.mark.parametrize("brand", ["", "   ", "\x00\x1f\u200b"])
def test_brand_that_is_empty_once_sanitized_is_rejected(brand: str) -> None:
    with pytest.raises(ValueError, match="brand"):
        render_sms(locale="en", brand=brand, code="1234")


@pytest.mark.parametrize(
    ("tag", "locale"),
    [
        ("en", "en"),
        ("pt-BR", "pt"),
        ("en-GB", "en"),
        ("EN-gb", "en"),
        ("fr_CA", "fr"),
        ("es-419", "es"),
        ("de-Latn-CH", "de"),
        (" de ", "de"),
        ("it", "it"),
        ("ja-JP", "ja"),
        ("zh-Hant-TW", "zh-Hant"),
    ],
)
def test_language_tags_resolve_to_their_supported_language(tag: str, locale: str) -> None:
    assert resolve_locale(tag) == locale


def test_portuguese_from_brazil_renders_portuguese() -> None:
    brazilian = render_sms(locale="pt-BR", brand="Acme", code="1234")
    assert brazilian == render_sms(locale="pt", brand="Acme", code="1234")


@pytest.mark.parametrize("tag", ["fi", "xx-XX", "eng", "gsw"])
def test_a_language_without_a_template_falls_back_to_english(tag: str) -> None:
    assert resolve_locale(tag) == "en"


def test_a_language_without_a_template_renders_english() -> None:
    assert render_sms(locale="xx", brand="Acme", code="1234") == render_sms(
        locale="en", brand="Acme", code="1234"
    )


@pytest.mark.parametrize("tag", ["", "e", "english", "en-", "en--GB", "12", "en-GB-x-foo"])
def test_malformed_tag_raises_malformed_locale(tag: str) -> None:
    with pytest.raises(MalformedLocale, match="not a BCP 47") as caught:
        resolve_locale(tag)
    assert caught.value.tag == tag


def test_malformed_locale_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="not a BCP 47"):
        render_sms(locale="english", brand="Acme", code="1234")


@pytest.mark.parametrize("tag", ["en", "pt-BR", "es-419", "zh-Hant", "zh-Hant-TW", "gsw", "EN-gb"])
def test_well_formed_tags_are_valid_bcp47(tag: str) -> None:
    assert is_valid_bcp47(tag)


@pytest.mark.parametrize(
    "tag", ["", "e", "english", "fr_CA", "en-", "en-GBR", "en-12", "pt-BR\n", "ñu"]
)
def test_malformed_tags_are_not_valid_bcp47(tag: str) -> None:
    assert not is_valid_bcp47(tag)


@pytest.mark.parametrize("locale", SUPPORTED_LOCALES)
def test_an_email_subject_ends_with_the_code_in_every_language(locale: str) -> None:
    subject = render_subject(locale=locale, brand="Acme Bank", code="482913")
    assert subject.endswith(" 482913")
    assert "Acme Bank" in subject


def test_email_subjects_differ_between_languages() -> None:
    subjects = {render_subject(locale=lo, brand="Acme", code="1234") for lo in SUPPORTED_LOCALES}
    assert len(subjects) == len(SUPPORTED_LOCALES)


def test_a_brand_is_sanitized_once_however_many_codes_it_sends() -> None:
    brand = "  Once \t Only  "
    before = sanitize_brand.cache_info().misses
    bodies = {render_sms(locale="en", brand=brand, code=f"{n:06d}") for n in range(3)}
    assert sanitize_brand(brand) == "Once Only"
    assert len(bodies) == 3
    assert sanitize_brand.cache_info().misses == before + 1


def test_a_language_tag_is_read_once_however_many_messages_use_it() -> None:
    # Other tests may have read this tag already: start from an empty cache.
    parse_locale.cache_clear()
    before = parse_locale.cache_info().misses
    chosen = {resolve_locale("pt-br") for _ in range(3)}
    assert chosen == {"pt"}
    assert parse_locale("pt-br") is parse_locale("pt-br")
    assert parse_locale.cache_info().misses == before + 1


def test_an_account_without_texts_of_its_own_gets_none_in_any_locale() -> None:
    assert dict(NO_TEMPLATES.for_locale("pt-BR")) == {}
