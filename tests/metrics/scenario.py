"""A scripted scenario against a running Relay, and reading /metrics back."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.harness import free_port

DELIVERED = "+15005550006"
FIRST_CARRIER_FAILS = "+15005550001"


def scrape(client: httpx.Client) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of /metrics by (name, labels)."""
    answer = client.get("/metrics")
    assert answer.status_code == 200, answer.text
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(answer.text)
        for sample in family.samples
    }


def value(
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str
) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


@dataclass
class Played:
    """What the scenario did, so a test knows what to find."""

    country: str = ""
    verification_ids: list[str] = field(default_factory=list)
    failing_webhook_id: str = ""


def play(client: httpx.Client) -> Played:
    """Four creates (one failed over, one with a webhook nobody answers), two approvals,
    one retrieve and one unknown path."""
    played = Played()
    closed = f"https://127.0.0.1:{free_port()}/hook"
    for to, extra in (
        (DELIVERED, {}),
        ("+14155552671", {}),
        (FIRST_CARRIER_FAILS, {}),
        ("+14155550100", {"webhook_url": closed}),
    ):
        created = client.post("/v1/verifications", json={"to": to, **extra})
        assert created.status_code == 200, created.text
        played.verification_ids.append(created.json()["id"])
        played.country = created.json()["country"]
    played.failing_webhook_id = played.verification_ids[3]
    for verification_id in (played.verification_ids[0], played.verification_ids[2]):
        checked = client.post(
            "/v1/verifications/check", json={"id": verification_id, "code": "000000"}
        )
        assert checked.json()["status"] == "approved", checked.text
    assert client.get(f"/v1/verifications/{played.verification_ids[1]}").status_code == 200
    assert client.get("/v1/no-such-thing/42").status_code == 404
    return played


def webhook_events(client: httpx.Client, related: str) -> int:
    listed = client.get("/v1/events", params={"limit": 100}).json()["data"]
    return sum(event["data"]["object"]["id"] == related for event in listed)


def wait_for(client: httpx.Client, name: str, expected: float, **labels: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if value(scrape(client), name, **labels) >= expected:
            return
        time.sleep(0.2)
    raise AssertionError(f"{name}{labels} never reached {expected}")
