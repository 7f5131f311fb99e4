"""/metrics after a scripted scenario on a real `relay serve`: one process, then two."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from relay.db.urls import is_postgres
from tests.e2e.serving import Serving, relay_serve
from tests.metrics.scenario import play, scrape, value, wait_for, webhook_events
from tests.webhooks.receiver import isolated_database

pytestmark = pytest.mark.slow

PG_URL = os.environ.get("RELAY_TEST_DATABASE_URL", "")
# One quick retry, so the failing webhook is dropped within the test.
FAST_WEBHOOKS = {
    "RELAY_WEBHOOK_RETRY_SCHEDULE": "0.05",
    "RELAY_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.0/8",
    "RELAY_WEBHOOK_TIMEOUT": "2",
}


def check_every_counter(serving: Serving) -> None:
    key = serving.account["test_key"]
    with serving.client(key) as api, serving.client() as monitor:
        before = scrape(monitor)
        played = play(api)
        events = webhook_events(api, played.failing_webhook_id)
        assert events >= 1
        wait_for(monitor, "relay_webhook_deliveries_total", events, outcome="dropped")
        after = scrape(monitor)

    def grew(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    country = played.country
    assert grew("relay_verifications_created_total", mode="test", channel="sms") == 4
    assert grew("relay_verifications_approved_total", mode="test") == 2
    assert grew("relay_verifications_created_total", mode="live", channel="sms") == 0
    assert (
        grew(
            "relay_sms_attempts_total",
            carrier="sandbox",
            country=country,
            outcome="delivered",
            channel="sms",
        )
        == 3
    )
    assert (
        grew(
            "relay_sms_attempts_total",
            carrier="sandbox",
            country=country,
            outcome="carrier_unavailable",
            channel="sms",
        )
        == 1
    )
    assert (
        grew(
            "relay_sms_attempts_total",
            carrier="sandbox-backup",
            country=country,
            outcome="delivered",
            channel="sms",
        )
        == 1
    )
    assert grew("relay_sms_receipt_seconds_count", carrier="sandbox") == 3
    assert grew("relay_sms_receipt_seconds_count", carrier="sandbox-backup") == 1
    assert grew("relay_webhook_deliveries_total", outcome="failed") == events
    assert grew("relay_webhook_deliveries_total", outcome="dropped") == events
    assert grew("relay_webhook_deliveries_total", outcome="delivered") == 0
    assert grew("relay_webhook_delivery_seconds_count") == 2 * events
    http = "relay_http_requests_total"
    assert grew(http, route="/v1/verifications", method="POST", status="200") == 4
    assert grew(http, route="/v1/verifications/check", method="POST", status="200") == 2
    assert grew(http, route="/v1/verifications/{verification_id}", method="GET", status="200") == 1
    assert grew(http, route="unmatched", method="GET", status="404") == 1
    assert grew("relay_http_request_duration_seconds_count", route="/v1/verifications") == 4
    # No raw path (with an id in it) ever becomes a label.
    assert not [labels for _, labels in after if any("ver_" in v for _, v in labels)]
    assert value(after, "relay_outbox_depth", kind="sms") == 0
    assert value(after, "relay_outbox_depth", kind="webhook") == 0
    assert ("relay_outbox_oldest_seconds", frozenset({("kind", "webhook")})) in after


def test_one_process_counts_every_committed_fact(tmp_path: Path, database_url: str) -> None:
    url = isolated_database(database_url, "metrics_one", tmp_path)
    with relay_serve(tmp_path, url, **FAST_WEBHOOKS) as serving:
        check_every_counter(serving)


@pytest.mark.skipif(
    not (PG_URL and is_postgres(PG_URL)),
    reason="needs RELAY_TEST_DATABASE_URL=postgresql://…: several processes need PostgreSQL",
)
def test_two_processes_add_up_in_one_scrape(tmp_path: Path, database_url: str) -> None:
    url = isolated_database(database_url, "metrics_two", tmp_path)
    with relay_serve(tmp_path, url, workers=2, **FAST_WEBHOOKS) as serving:
        check_every_counter(serving)
        # Scrapes land on either process; each answers the sum of both.
        with serving.client() as monitor:
            totals = {
                value(
                    scrape(monitor), "relay_verifications_created_total", mode="test", channel="sms"
                )
                for _ in range(6)
            }
        assert totals == {4}
