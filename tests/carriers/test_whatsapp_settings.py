"""WhatsApp carrier tables as `relay config check` and `relay serve` read them."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from relay.carriers.registry import build_carriers, carrier_problems
from relay.carriers.whatsapp import WhatsAppCarrier, WhatsAppSettings
from relay.cli.checks import unsafe_for_live
from relay.config import Settings

EXAMPLE = Path(__file__).resolve().parents[2] / "relay.example.toml"


def whatsapp_table(**changes: Any) -> dict[str, Any]:
    return {
        "kind": "whatsapp",
        "phone_number_id": "106540352242922",
        "access_token": "EAAJB-live",
        "app_secret": "a1b2c3",
        "verify_token": "relay-verify",
        "template": "verification_code",
        "template_language": "en_US",
        **changes,
    }


def problems(**tables: dict[str, Any]) -> list[str]:
    settings = Settings(public_url="https://relay.example.com", carriers=tables)
    return carrier_problems(settings)


def test_a_complete_whatsapp_table_has_no_problem() -> None:
    assert problems(meta=whatsapp_table()) == []
    assert problems(meta=whatsapp_table(template_language="pt_BR", api_version="v23.0")) == []
    languages = ["en_US", "fr", "pt_BR", "zh_TW", "fil", "prs_AF"]
    assert problems(meta=whatsapp_table(template_languages=languages)) == []


def test_template_languages_from_a_toml_array_are_kept_in_their_order() -> None:
    table = tomllib.loads('template_languages = ["pt_BR", "en_US", "fr"]')
    options = {key: value for key, value in whatsapp_table(**table).items() if key != "kind"}
    settings = WhatsAppSettings(name="meta", status_callback_url="https://r.example/s", **options)
    assert settings.template_languages == ("pt_BR", "en_US", "fr")


@pytest.mark.parametrize(
    ("languages", "named"),
    [
        (["en_US", "fr-FR"], "language codes"),
        (["en_US", "pt_br"], "language codes"),
        (["en_US", "English"], "language codes"),
        (["en_US", 33], "language codes"),
        ("en_US", "language codes"),
        (["en_US", "fr", "fr"], "repeat"),
        (["fr", "pt_BR"], "the default"),
    ],
)
def test_a_wrong_template_languages_list_is_reported(languages: object, named: str) -> None:
    [problem] = problems(meta=whatsapp_table(template_languages=languages))
    assert problem.startswith("carriers.meta")
    assert "template_languages" in problem
    assert named in problem


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"phone_number_id": "+15550783881"}, "phone_number_id"),
        ({"access_token": ""}, "access_token"),
        ({"app_secret": ""}, "app_secret"),
        ({"verify_token": ""}, "verify_token"),
        ({"template": "Verification Code"}, "template"),
        ({"template_language": "English"}, "template_language"),
        ({"template_language": "en-US"}, "template_language"),
        ({"api_version": "21"}, "api_version"),
        ({"base_url": "graph.facebook.com"}, "base_url"),
        ({"receipt_timeout": 0}, "receipt_timeout"),
        ({"sender": "Relay"}, "sender"),
    ],
)
def test_a_wrong_whatsapp_setting_is_reported_by_name(changes: dict[str, Any], named: str) -> None:
    [problem] = problems(meta=whatsapp_table(**changes))
    assert problem.startswith("carriers.meta")
    assert named in problem


def test_a_table_without_its_template_language_is_reported() -> None:
    table = whatsapp_table()
    del table["template_language"]
    [problem] = problems(meta=table)
    assert "template_language" in problem


@pytest.mark.parametrize("key", ["access_token", "app_secret", "verify_token"])
def test_a_placeholder_credential_is_unsafe_in_live_mode(key: str) -> None:
    settings = Settings(carriers={"meta": whatsapp_table(**{key: "change-me"})})
    assert f"carriers.meta.{key} is a placeholder secret" in unsafe_for_live(settings)


def test_the_carrier_is_built_on_the_whatsapp_channel_with_relays_callback_url() -> None:
    settings = Settings(
        public_url="https://relay.example.com/", carriers={"meta": whatsapp_table()}
    )
    carrier = build_carriers(settings).carriers["meta"]
    assert isinstance(carrier, WhatsAppCarrier)
    assert carrier.channel == "whatsapp"
    assert carrier.status_callback_url == "https://relay.example.com/v1/carriers/meta/status"


def test_the_example_files_whatsapp_table_has_no_problem_but_its_placeholders() -> None:
    text = EXAMPLE.read_text()
    block = re.search(r"^# \[carriers\.meta\]\n((?:# \w.*\n)+)", text, flags=re.MULTILINE)
    assert block is not None
    lines = [line.removeprefix("# ") for line in block.group(1).splitlines()]
    table = tomllib.loads("\n".join(lines))
    assert table["kind"] == "whatsapp"
    assert problems(meta=table) == []
    unsafe = unsafe_for_live(Settings(carriers={"meta": table}))
    assert len([line for line in unsafe if line.startswith("carriers.meta.")]) == 3
