"""An account's own texts, set with `relay accounts template` and used by the next send."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from relay.accounts import template_store
from relay.accounts.models import NewAccount
from relay.cli.main import main as relay_main
from relay.services import Services
from tests.harness import RunningServer, create_account, using_services

_numbers = itertools.count(1000)


def french() -> str:
    return f"+3361235{next(_numbers):04d}"


@pytest.fixture
def acme(server: RunningServer) -> NewAccount:
    return create_account(server.settings, "Acme")


@pytest.fixture
def acme_api(server: RunningServer, acme: NewAccount) -> Iterator[httpx.Client]:
    with server.client(acme.test_key) as client:
        yield client


def template(server: RunningServer, *args: str) -> int:
    settings = server.settings
    where = ["--data-dir", str(settings.data_dir), "--database-url", settings.resolved_database_url]
    return relay_main(["accounts", "template", *args, *where])


def put(server: RunningServer, account: NewAccount, channel: str, locale: str, text: str) -> int:
    return template(
        server, "set", account.id, "--channel", channel, "--locale", locale, "--text", text
    )


def create(api: httpx.Client, to: str, **fields: Any) -> dict[str, Any]:
    response = api.post("/v1/verifications", json={"to": to, **fields})
    assert response.status_code == 200, response.text
    created: dict[str, Any] = response.json()
    return created


def last_sms(server: RunningServer, to: str) -> Any:
    return [sms for sms in server.services.sandbox.sent if sms.to == to][-1]


def test_the_accounts_sms_text_is_sent_with_brand_code_and_minutes(
    server: RunningServer, acme: NewAccount, acme_api: httpx.Client
) -> None:
    assert put(server, acme, "sms", "fr", "{brand} : code {code}, valable {minutes} min.") == 0
    to = french()
    create(acme_api, to, ttl=300)
    body = last_sms(server, to).body
    assert body.startswith("Acme : code ")
    assert body.endswith(", valable 5 min.")


def test_the_email_text_travels_to_carriers_with_the_passcode(
    server: RunningServer, acme: NewAccount, acme_api: httpx.Client
) -> None:
    assert put(server, acme, "email", "fr", "Bonjour, voici votre code {brand} : {code}.") == 0
    to = french()
    create(acme_api, to)
    sms = last_sms(server, to)
    assert sms.passcode.templates == {"email": "Bonjour, voici votre code {brand} : {code}."}
    assert sms.body.startswith("Votre code de vérification Acme")


def test_a_deleted_text_gives_way_to_relays_words(
    server: RunningServer, acme: NewAccount, acme_api: httpx.Client
) -> None:
    assert put(server, acme, "sms", "fr", "{brand} {code}") == 0
    assert template(server, "delete", acme.id, "--channel", "sms", "--locale", "fr") == 0
    to = french()
    create(acme_api, to)
    assert last_sms(server, to).body.startswith("Votre code de vérification Acme")


def test_a_regional_text_of_the_account_is_chosen_and_echoed(
    server: RunningServer, acme: NewAccount, acme_api: httpx.Client
) -> None:
    assert put(server, acme, "sms", "pt-br", "Seu código {brand}: {code}") == 0
    to = french()
    assert create(acme_api, to, locale="pt-BR")["locale"] == "pt-BR"
    assert last_sms(server, to).body.startswith("Seu código Acme: ")
    assert create(acme_api, french(), locale="pt-PT")["locale"] == "pt"


def test_a_text_in_a_language_relay_lacks_serves_that_languages_country(
    server: RunningServer, acme: NewAccount, acme_api: httpx.Client
) -> None:
    assert put(server, acme, "sms", "fi", "{brand}-vahvistuskoodisi on {code}.") == 0
    to = "+358401230001"
    assert create(acme_api, to)["locale"] == "fi"
    assert last_sms(server, to).body.startswith("Acme-vahvistuskoodisi on ")


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("Your code", "text: the text must hold {code}"),
        ("Your code is {code}", "text: the text must hold {brand}"),
        ("Code {code} for {user}", "text: unknown placeholder {user}"),
        ("Code {code:>8}", "text: unknown placeholder {code:>8}"),
        ("Code {code", "text: unbalanced brace"),
    ],
)
def test_a_text_relay_cannot_fill_is_refused_in_one_line_with_exit_2(
    server: RunningServer,
    acme: NewAccount,
    capsys: pytest.CaptureFixture[str],
    text: str,
    said: str,
) -> None:
    assert put(server, acme, "sms", "en", text) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert said in err
    assert template(server, "list", acme.id) == 0
    assert capsys.readouterr().out == ""


def test_a_malformed_locale_is_refused_with_exit_2(
    server: RunningServer, acme: NewAccount, capsys: pytest.CaptureFixture[str]
) -> None:
    assert put(server, acme, "sms", "english", "{brand} {code}") == 2
    assert "relay: locale: locale 'english' is not a BCP 47" in capsys.readouterr().err


def test_a_two_segment_text_is_saved_with_a_warning_giving_the_count(
    server: RunningServer, acme: NewAccount, capsys: pytest.CaptureFixture[str]
) -> None:
    assert put(server, acme, "sms", "en", "{brand} {code} " + "Thanks for choosing us. " * 7) == 0
    captured = capsys.readouterr()
    assert "saved" in captured.out
    assert "warning: this text takes 2 SMS segments" in captured.err


def test_the_list_shows_every_text_and_json_gives_its_fields(
    server: RunningServer, acme: NewAccount, capsys: pytest.CaptureFixture[str]
) -> None:
    assert put(server, acme, "sms", "en", "{brand} code {code}") == 0
    assert put(server, acme, "email", "zh_tw", "{brand}驗證碼 {code}") == 0
    capsys.readouterr()
    assert template(server, "list", acme.id, "--json") == 0
    listed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(t["channel"], t["locale"], t["text"], t["in_use"]) for t in listed] == [
        ("email", "zh-TW", "{brand}驗證碼 {code}", True),
        ("sms", "en", "{brand} code {code}", True),
    ]


def test_a_text_stored_before_the_brand_was_required_is_not_sent_and_the_list_says_so(
    server: RunningServer,
    acme: NewAccount,
    acme_api: httpx.Client,
    capsys: pytest.CaptureFixture[str],
) -> None:
    async def stored_long_ago(services: Services) -> None:
        await services.db.write(
            lambda tx: template_store.put(
                tx,
                acme.id,
                channel="sms",
                locale="fr",
                text="Code {code}",
                now=services.clock.now(),
            )
        )

    using_services(server.settings, stored_long_ago)
    to = french()
    create(acme_api, to)
    assert last_sms(server, to).body.startswith("Votre code de vérification Acme")
    assert template(server, "list", acme.id) == 0
    assert "(not sent: no {brand}; set it again)" in capsys.readouterr().out


def test_an_unknown_account_is_said_plainly(
    server: RunningServer, capsys: pytest.CaptureFixture[str]
) -> None:
    assert template(server, "list", "acct_00000000000000000000000000") == 1
    assert "No account acct_00000000000000000000000000" in capsys.readouterr().err
