"""Every built-in language: one SMS segment in its natural encoding, and an email subject."""

from __future__ import annotations

import unicodedata

import pytest

from relay.sms.encoding import choose_encoding, segment_count
from relay.sms.templates import BUILT_IN_LOCALES, SMS_TEMPLATES, SUBJECT_TEMPLATES
from relay.sms.text import render_sms, render_subject

CODE = "482913"
LATIN_BRAND = "Northwind Traders Co"
# Brands in each language's own script, cut to 20 characters (UTF-16 units, as UCS-2 counts).
_OWN_SCRIPT_NAMES = {
    "ru": "Северный Торговый Бк",
    "uk": "Північна Торгівля Бк",
    "ar": "شركة التجارة الشمالي",
    "he": "חברת המסחר הצפונית בע",
    "hi": "उत्तरी व्यापार कंपनी ब",
    "ja": "北風商事株式会社北風商事株式会社北風商事",
    "ko": "북풍무역주식회사북풍무역주식회사북풍무역주",
    "zh-Hans": "北风贸易有限公司北风贸易有限公司北风贸易",
    "zh-Hant": "北風貿易有限公司北風貿易有限公司北風貿易",
    "th": "บริษัทการค้าภาคเหนือจำ",
    "pl": "Północny Handel Łódź",
    "tr": "Kuzey Ticaret Şirketi",
    "ro": "Comerțul Nordic Ștefă",
    "vi": "Công ty Thương mại Bắc",
}
OWN_SCRIPT_BRANDS = {locale: (name * 2)[:20] for locale, name in _OWN_SCRIPT_NAMES.items()}
GSM7_LANGUAGES = {"en", "es", "fr", "de", "pt", "it", "nl", "sv", "id"}
REQUIRED = {"en", "es", "fr", "de", "pt", "it", "nl", "pl", "tr", "ru", "uk", "ar", "he"} | {
    "hi", "id", "ja", "ko", "zh-Hans", "zh-Hant", "sv", "ro", "vi", "th"
}  # fmt: skip


def test_at_least_twenty_languages_including_the_required_ones() -> None:
    assert len(BUILT_IN_LOCALES) >= 20
    assert set(BUILT_IN_LOCALES) >= REQUIRED


def test_every_language_has_an_email_subject() -> None:
    assert set(SUBJECT_TEMPLATES) == set(SMS_TEMPLATES)


def test_the_brands_of_own_scripts_are_twenty_characters() -> None:
    assert {len(brand) for brand in OWN_SCRIPT_BRANDS.values()} == {20}
    assert len(LATIN_BRAND) == 20


@pytest.mark.parametrize("locale", BUILT_IN_LOCALES)
def test_latin_brand_and_six_digit_code_take_one_segment(locale: str) -> None:
    text = render_sms(locale=locale, brand=LATIN_BRAND, code=CODE)
    assert segment_count(text) == 1


@pytest.mark.parametrize("locale", sorted(OWN_SCRIPT_BRANDS))
def test_brand_in_the_languages_own_script_takes_one_segment(locale: str) -> None:
    text = render_sms(locale=locale, brand=OWN_SCRIPT_BRANDS[locale], code=CODE)
    assert OWN_SCRIPT_BRANDS[locale] in text
    assert segment_count(text) == 1


@pytest.mark.parametrize("locale", BUILT_IN_LOCALES)
def test_each_language_is_sent_in_its_natural_encoding(locale: str) -> None:
    expected = "gsm7" if locale in GSM7_LANGUAGES else "ucs2"
    assert choose_encoding(render_sms(locale=locale, brand="Acme", code=CODE)) == expected


@pytest.mark.parametrize("locale", BUILT_IN_LOCALES)
def test_each_template_is_in_composed_unicode(locale: str) -> None:
    # Decomposed accents would cost a UCS-2 unit each, and some handsets show them apart.
    assert unicodedata.is_normalized("NFC", SMS_TEMPLATES[locale])
    assert unicodedata.is_normalized("NFC", SUBJECT_TEMPLATES[locale])


@pytest.mark.parametrize("locale", BUILT_IN_LOCALES)
def test_each_subject_ends_with_the_code(locale: str) -> None:
    subject = render_subject(locale=locale, brand=LATIN_BRAND, code=CODE)
    assert subject.endswith(f" {CODE}")
    assert LATIN_BRAND in subject


def test_the_webotp_line_may_take_a_ucs2_language_to_a_second_segment() -> None:
    """The line is always sent when asked for: the browser needs it to read the code."""
    bare = render_sms(locale="tr", brand=LATIN_BRAND, code=CODE)
    text = render_sms(locale="tr", brand=LATIN_BRAND, code=CODE, webotp_domain="login.acme.com")
    assert text == f"{bare}\n@login.acme.com #{CODE}"
    assert segment_count(text) == 2
