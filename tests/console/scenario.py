"""A scripted day of traffic for the console's pages: two countries, a failover, an
undeliverable number, approvals, and webhooks that succeed or fail once."""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from relay.accounts.models import NewAccount
from tests.harness import RunningServer
from tests.webhooks.receiver import Receiver, settled

US = [f"+1415555{i:04d}" for i in range(101, 106)]
FR = [f"+336123456{i:02d}" for i in range(1, 4)]
FAILOVER = "+15005550001"
UNDELIVERABLE = "+15005550002"
SLOW = "+15005550003"


@dataclass
class Scenario:
    account: NewAccount
    replayable: str  # a verification whose only webhook delivery failed
    looked_up: str  # a French number with one verification


def code_sent_to(server: RunningServer, to: str) -> str:
    body = next(sms.body for sms in reversed(server.services.sandbox.sent) if sms.to == to)
    return next(word.rstrip(".") for word in body.split() if word.rstrip(".").isdigit())


def play(
    server: RunningServer, api: httpx.Client, account: NewAccount, receiver: Receiver
) -> Scenario:
    ok = receiver.url("/ok")
    made: dict[str, str] = {}
    for number in [*US, *FR, FAILOVER, UNDELIVERABLE, SLOW]:
        answer = api.post("/v1/verifications", json={"to": number, "webhook_url": ok})
        assert answer.status_code in (200, 201), answer.text
        made[number] = answer.json()["id"]
    for number in [*US[:3], FR[0]]:
        checked = api.post(
            "/v1/verifications/check",
            json={"id": made[number], "code": code_sent_to(server, number)},
        )
        assert checked.json()["status"] == "approved", checked.text
    failing = api.post(
        "/v1/verifications", json={"to": "+14155550199", "webhook_url": receiver.url("/once")}
    ).json()["id"]
    for verification_id in [*made.values(), failing]:
        settled(api, verification_id, 1)
    return Scenario(account, failing, FR[0])
