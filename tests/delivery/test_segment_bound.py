"""`max_segments`: an own text that can take more SMS segments is refused when set, and an
SMS that would take more (the setting lowered, a brand changed since) is never submitted:
its attempt fails with `sms_too_long`, through carriers that answer at once and through
one reached over the network alike."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import pytest_asyncio
from hypothesis import example, given
from hypothesis import strategies as st

from relay.accounts.models import NewAccount
from relay.cli.main import main as relay_main
from relay.delivery.at_once import FITS_PER_SEGMENT
from relay.sms.custom import longest_segments, sms_segments
from relay.sms.encoding import segment_count
from tests.carriers.provider_cases import http_table
from tests.carriers.reading import attempts, event_types
from tests.carriers.twilio_fake import VALID_FROM, FakeTwilio
from tests.harness import (
    RunningServer,
    ServerThread,
    create_account,
    free_port,
    test_settings,
    using_services,
)
from tests.webhooks.receiver import isolated_database

in_module_loop = pytest.mark.asyncio(loop_scope="module")

ACCOUNT_SID = "AC00112233445566778899aabbccddeeff"
AUTH_TOKEN = "relay-segments-auth-token"
MAX_SEGMENTS = 2
# Three segments with "Acme" and a 6-digit code, and at most three with any brand and code.
THREE_SEGMENTS = "{brand} {code} " + "Thanks for choosing us. " * 14
_numbers = itertools.count(4000)


def number() -> str:
    return f"+1415558{next(_numbers) % 10000:04d}"


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def twilio() -> AsyncIterator[FakeTwilio]:
    fake = FakeTwilio(account_sid=ACCOUNT_SID, auth_token=AUTH_TOKEN)
    async with fake.running():
        yield fake


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, database_url: str, twilio: FakeTwilio
) -> Iterator[RunningServer]:
    url = isolated_database(database_url, "segments", tmp_path_factory.mktemp("db"))
    port = free_port()
    settings = test_settings(
        tmp_path_factory.mktemp("data"),
        url,
        max_segments=MAX_SEGMENTS,
        public_url=f"https://localhost:{port}",
        carriers={
            "twilio-main": http_table(
                "twilio",
                twilio,
                account_sid=ACCOUNT_SID,
                auth_token=AUTH_TOKEN,
                from_number=VALID_FROM,
            ),
        },
        routes={"default": ["twilio-main"]},
    )
    with ServerThread(settings, port=port) as running:
        yield running


def account_with_a_long_text(server: RunningServer) -> NewAccount:
    """An account whose English SMS text was set while three segments were allowed."""
    account = create_account(server.settings, "Acme")
    earlier = server.settings.model_copy(update={"max_segments": 3})
    using_services(
        earlier,
        lambda services: services.texts.set(
            account.id, channel="sms", locale="en", text=THREE_SEGMENTS
        ),
    )
    return account


def client(server: RunningServer, key: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=server.base_url,
        verify=server.tls_context(),
        headers={"Authorization": f"Bearer {key}"},
        timeout=10,
    )


def test_the_text_takes_three_segments_at_most() -> None:
    assert sms_segments(THREE_SEGMENTS, brand="Acme") == 3
    assert longest_segments(THREE_SEGMENTS, brand="Acme") == 3


@in_module_loop
async def test_a_test_key_send_over_the_bound_fails_every_sms_attempt_unsent(
    server: RunningServer,
) -> None:
    account = await asyncio.to_thread(account_with_a_long_text, server)
    to = number()
    async with client(server, account.test_key) as api:
        created = (await api.post("/v1/verifications", json={"to": to, "locale": "en"})).json()
        assert attempts(created) == [
            ("sandbox", "failed", "sms_too_long"),
            ("sandbox-backup", "failed", "sms_too_long"),
        ]
        assert created["status"] == "pending"
        assert await event_types(api, created["id"]) == ["verification.failed"] * 2
        sent = await api.post("/v1/messages", json={"to": to, "code": "482913", "locale": "en"})
        assert attempts(sent.json())[0] == ("sandbox", "failed", "sms_too_long")
    assert [sms for sms in server.services.sandbox.sent if sms.to == to] == []


@in_module_loop
async def test_a_live_send_over_the_bound_never_reaches_the_provider(
    server: RunningServer, twilio: FakeTwilio
) -> None:
    account = await asyncio.to_thread(account_with_a_long_text, server)
    to = number()
    async with client(server, account.live_key) as api:
        created = (await api.post("/v1/verifications", json={"to": to, "locale": "en"})).json()
        assert attempts(created) == [("twilio-main", "failed", "sms_too_long")]
        error: dict[str, Any] = created["attempts"][0]["error"]
        assert "max_segments" in error["message"]
        # The same account's other locales use Relay's words, which fit.
        other = (await api.post("/v1/verifications", json={"to": number(), "locale": "fr"})).json()
        assert attempts(other) == [("twilio-main", "sent", None)]
    assert [m for m in twilio.messages.values() if m.form["To"] == to] == []


def test_setting_a_text_over_the_bound_is_refused_in_one_line(
    server: RunningServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    account = create_account(server.settings, "Acme")
    monkeypatch.setenv("RELAY_MAX_SEGMENTS", str(MAX_SEGMENTS))
    where = ["--database-url", server.settings.resolved_database_url]
    where += ["--data-dir", str(server.settings.data_dir)]
    args = ["accounts", "template", "set", account.id, "--channel", "sms", "--locale", "en"]
    assert relay_main([*args, "--text", THREE_SEGMENTS, *where]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "relay: text: this text can take 3 SMS segments (with a 30-character brand, a"
        " 10-character code); at most 2 are sent (max_segments)"
    ]
    assert relay_main(["accounts", "template", "list", account.id, *where]) == 0
    assert capsys.readouterr().out == ""


@example((1, "😀" * FITS_PER_SEGMENT))
@example((3, "a" + "😀" * (3 * FITS_PER_SEGMENT - 1)))
@example((3, "€" * 3 * FITS_PER_SEGMENT))
@given(
    st.integers(min_value=1, max_value=10).flatmap(
        lambda segments: st.tuples(
            st.just(segments),
            st.text(
                alphabet=st.sampled_from("a€[😀ж\n"),
                max_size=FITS_PER_SEGMENT * segments,
            ),
        )
    )
)
def test_a_body_short_enough_to_skip_counting_always_fits(case: tuple[int, str]) -> None:
    segments, body = case
    assert segment_count(body) <= segments
