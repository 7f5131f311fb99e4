"""`relay serve` with retention set in its config file deletes what is past it, once,
however many processes prune at the same time."""

from __future__ import annotations

import itertools
from pathlib import Path

import httpx

from relay.config import Settings
from relay.db.urls import is_postgres
from tests.e2e.serving import relay_serve
from tests.harness import count_rows
from tests.webhooks.receiver import events_of, isolated_database, wait_until

CONFIG = 'delete_after = "4s"\nretention_interval = "1s"\n'
_numbers = itertools.count(100)


def closed(api: httpx.Client) -> str:
    created = api.post("/v1/verifications", json={"to": f"+1415558{next(_numbers):04d}"})
    assert created.status_code == 200, created.text
    verification_id: str = created.json()["id"]
    assert api.post(f"/v1/verifications/{verification_id}/cancel").status_code == 200
    return verification_id


def test_a_served_verification_is_gone_after_the_configured_window_and_counted_once(
    tmp_path: Path, database_url: str
) -> None:
    url = isolated_database(database_url, "retention_serve", tmp_path)
    config = tmp_path / "relay.toml"
    config.write_text(CONFIG)
    # Several processes prune at once where several can serve.
    workers = 2 if is_postgres(url) else 1
    with (
        relay_serve(tmp_path, url, "--config", str(config), workers=workers) as serving,
        serving.client(serving.account["test_key"]) as api,
    ):
        made = [closed(api) for _ in range(5)]
        assert all(api.get(f"/v1/verifications/{v}").status_code == 200 for v in made)
        assert events_of(api, made[0]) != []

        wait_until(
            lambda: all(api.get(f"/v1/verifications/{v}").status_code == 404 for v in made),
            timeout=20,
            what="the served sweeper to delete the verifications",
            interval=0.3,
        )
        assert events_of(api, made[0]) == []
    settings = Settings(database_url=url)
    kept = count_rows(
        settings, "SELECT SUM(n) AS n FROM retained_figures WHERE kind = 'verification'"
    )
    assert kept == len(made)
