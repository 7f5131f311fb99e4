"""The approved language of a WhatsApp template that each verification's locale gets."""

from __future__ import annotations

import pytest

from relay.carriers.whatsapp_languages import meta_language, template_language_for

APPROVED = ("en_US", "fr", "pt_BR", "pt_PT", "es_MX", "es", "zh_CN", "zh_HK", "de_DE")


@pytest.mark.parametrize(
    ("locale", "meta"),
    [
        ("fr", "fr"),
        ("pt-BR", "pt_BR"),
        ("pt_br", "pt_BR"),
        ("EN-us", "en_US"),
        ("zh-Hans", "zh_CN"),
        ("zh-Hant", "zh_TW"),
        ("zh-Hant-HK", "zh_HK"),
        ("zh", "zh_CN"),
        ("zh-TW", "zh_TW"),
        ("sr-Latn-RS", "sr_RS"),
        ("es-419", "es"),
        ("no", "nb"),
        ("iw", "he"),
        ("fil", "fil"),
        ("", ""),
    ],
)
def test_a_bcp47_locale_is_written_as_meta_writes_a_language(locale: str, meta: str) -> None:
    assert meta_language(locale) == meta


@pytest.mark.parametrize(
    ("locale", "chosen", "because"),
    [
        ("fr", "fr", "approved exactly"),
        ("pt-BR", "pt_BR", "approved exactly, after Meta's spelling"),
        ("pt-PT", "pt_PT", "approved exactly, the other region"),
        ("pt", "pt_BR", "no plain pt: the first Portuguese listed"),
        ("pt-AO", "pt_BR", "no pt_AO: the first Portuguese listed"),
        ("es-AR", "es", "no es_AR: Meta's plain es before es_MX, listed first"),
        ("fr-CA", "fr", "no fr_CA: the plain fr"),
        ("en", "en_US", "no plain en: the only English"),
        ("en-GB", "en_US", "no en_GB: the only English"),
        ("de", "de_DE", "no plain de: the only German"),
        ("zh-Hans", "zh_CN", "Simplified Chinese, exactly"),
        ("zh-Hant", "zh_HK", "no zh_TW: the other Traditional one, never zh_CN"),
        ("zh-SG", "zh_CN", "Singapore writes Simplified"),
        ("ja", "en_US", "no Japanese: the default"),
        ("", "en_US", "no locale: the default"),
    ],
)
def test_the_best_approved_language_is_chosen_for_a_locale(
    locale: str, chosen: str, because: str
) -> None:
    assert template_language_for(locale, approved=APPROVED, default="en_US") == chosen, because


def test_traditional_chinese_falls_back_to_the_default_rather_than_simplified() -> None:
    approved = ("en_US", "zh_CN")
    assert template_language_for("zh-Hant", approved=approved, default="en_US") == "en_US"
    assert template_language_for("zh-Hans", approved=approved, default="en_US") == "zh_CN"


def test_without_a_list_every_locale_gets_the_one_template_language() -> None:
    for locale in ("fr", "pt-BR", "zh-Hant", "en"):
        assert template_language_for(locale, approved=(), default="en_US") == "en_US"
