"""What every HTTP provider's carrier does the same way, against each provider's fake.

The provider modules' own tests cover their shapes (requests, refusals,
signatures); these cover the shared plumbing once per provider: an address
that refuses connections, a provider that never answers, and logs that never
hold the SMS body or a credential.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio

from relay.carriers.base import CarrierError, CarrierUnavailable, OutboundSms
from relay.carriers.http_carrier import HttpCarrier
from relay.carriers.providers import http_carrier, http_settings
from tests.carriers.fake_server import Hang, closed_port
from tests.carriers.provider_cases import FAKES, Case, running_cases

SECRET_BODY = "Your Relay code is 482916"

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def cases() -> AsyncIterator[dict[str, Case]]:
    async with running_cases() as started:
        yield started


@pytest.fixture(params=list(FAKES))
def case(request: pytest.FixtureRequest, cases: dict[str, Case]) -> Iterator[Case]:
    chosen = cases[request.param]
    yield chosen
    chosen.fake.reset()


def carrier_for(case: Case, **changes: Any) -> HttpCarrier:
    options = {k: v for k, v in case.table.items() if k not in {"kind", "provider"}}
    options |= {"status_callback_url": "https://relay.example.com/cb", **changes}
    return http_carrier(http_settings(case.table["provider"], name=case.carrier, **options))


def sms(case: Case) -> OutboundSms:
    return OutboundSms(attempt_id="att_1", to=case.number(), sender="Relay", body=SECRET_BODY)


async def test_a_closed_port_makes_the_carrier_unavailable(case: Case) -> None:
    with closed_port() as url:
        carrier = carrier_for(case, base_url=url)
        with pytest.raises(CarrierUnavailable) as unavailable:
            await carrier.submit(sms(case))
        await carrier.close()
    assert unavailable.value.code == f"{case.table['provider']}_unreachable"


async def test_a_provider_that_never_answers_makes_it_unavailable_within_the_timeout(
    case: Case,
) -> None:
    carrier = carrier_for(case, timeout=0.3)
    case.fake.then(Hang())
    with pytest.raises(CarrierUnavailable) as unavailable:
        await carrier.submit(sms(case))
    case.fake.script.release.set()
    await carrier.close()
    assert unavailable.value.code == f"{case.table['provider']}_timeout"


async def test_the_body_and_credentials_never_reach_the_logs(
    case: Case, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    carrier = carrier_for(case)
    await carrier.submit(sms(case))
    case.fake.then(case.refusal)
    with pytest.raises(CarrierError):
        await carrier.submit(sms(case))
    await carrier.close()
    assert caplog.records
    secrets = [SECRET_BODY]
    credentials = ("api_key", "api_secret", "auth_token", "api_token")
    for key in (*credentials, "signature_secret", "callback_secret"):
        if isinstance(case.table.get(key), str):
            secrets.append(case.table[key])
    for secret in secrets:
        assert secret not in caplog.text
