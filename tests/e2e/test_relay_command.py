"""The `relay` command as a user runs it: create an account, serve, verify over TLS."""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path

import httpx
import pytest

from relay.accounts import store as account_store
from relay.config import Settings
from relay.crypto import Keyring
from tests.harness import free_port, read_db

RELAY = [sys.executable, "-m", "relay.cli.main"]


def relay(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RELAY, *args], env=env, capture_output=True, text=True, timeout=120, check=True
    )


@pytest.fixture
def env(tmp_path: Path, database_url: str) -> dict[str, str]:
    return {
        **os.environ,
        "RELAY_DATA_DIR": os.fspath(tmp_path / "data"),
        "RELAY_DATABASE_URL": database_url,
    }


@pytest.fixture
def served(env: dict[str, str]) -> Iterator[tuple[str, Path]]:
    port = free_port()
    process = subprocess.Popen(
        [*RELAY, "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    cert = Path(env["RELAY_DATA_DIR"]) / "tls" / "cert.pem"
    base_url = f"https://127.0.0.1:{port}"
    try:
        _wait_until_ready(base_url, cert, process)
        yield base_url, cert
    finally:
        process.terminate()
        process.wait(timeout=20)
    output = process.stdout.read() if process.stdout else ""
    # A stop asked for with SIGTERM is a clean exit.
    assert process.returncode == 0, output
    assert "Application shutdown complete" in output, output


def _wait_until_ready(base_url: str, cert: Path, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stdout.read() if process.stdout else ""
        if cert.exists():
            try:
                context = ssl.create_default_context(cafile=os.fspath(cert))
                if httpx.get(f"{base_url}/healthz", verify=context).status_code == 200:
                    return
            except httpx.TransportError:
                pass
        time.sleep(0.2)
    raise AssertionError("relay serve did not become ready")


def test_relay_version_prints_the_installed_package_version() -> None:
    shown = subprocess.run(
        [*RELAY, "--version"], capture_output=True, text=True, timeout=60, check=True
    )
    assert shown.stdout == f"relay {version('relay-otp')}\n"


def test_a_user_creates_an_account_serves_and_verifies_over_tls(
    env: dict[str, str], served: tuple[str, Path]
) -> None:
    account = json.loads(relay("accounts", "create", "Acme", "--json", env=env).stdout)
    assert set(account) == {
        "id",
        "name",
        "test_key",
        "live_key",
        "test_webhook_secret",
        "live_webhook_secret",
    }
    assert account["test_key"].startswith("sk_test_")
    assert account["live_key"].startswith("sk_live_")
    assert account["test_webhook_secret"].startswith("whsec_")
    assert account["live_webhook_secret"].startswith("whsec_")
    assert account["test_webhook_secret"] != account["live_webhook_secret"]

    base_url, cert = served
    context = ssl.create_default_context(cafile=os.fspath(cert))
    headers = {"Authorization": f"Bearer {account['test_key']}"}
    with httpx.Client(base_url=base_url, verify=context, headers=headers) as client:
        created = client.post("/v1/verifications", json={"to": "+14155552671"})
        assert created.status_code == 200
        verification_id = created.json()["id"]
        wrong = client.post("/v1/verifications/check", json={"id": verification_id, "code": "1"})
        assert wrong.json()["status"] == "pending"
        right = client.post(
            "/v1/verifications/check", json={"id": verification_id, "code": "000000"}
        )
        assert right.json()["status"] == "approved"
        assert right.json()["verified"] is True


def test_keys_can_be_listed_revoked_and_created_from_the_command_line(
    env: dict[str, str], served: tuple[str, Path]
) -> None:
    account = json.loads(relay("accounts", "create", "Keys", "--json", env=env).stdout)
    listing = relay("keys", "list", "--account", account["id"], env=env).stdout
    assert account["test_key"] not in listing
    test_key_id = next(line.split()[0] for line in listing.splitlines() if " test " in line)
    relay("keys", "revoke", test_key_id, env=env)

    base_url, cert = served
    context = ssl.create_default_context(cafile=os.fspath(cert))
    revoked = httpx.get(
        f"{base_url}/v1/verifications",
        verify=context,
        headers={"Authorization": f"Bearer {account['test_key']}"},
    )
    assert revoked.status_code == 401

    new_key = relay("keys", "create", "--account", account["id"], "--mode", "test", env=env)
    raw = new_key.stdout.split()[1]
    fresh = httpx.get(
        f"{base_url}/v1/verifications", verify=context, headers={"Authorization": f"Bearer {raw}"}
    )
    assert fresh.status_code == 200


def signing_secrets(env: dict[str, str], account_id: str) -> dict[str, list[str]]:
    """What signs the account's test and live events now, opened with the data dir's key."""
    settings = Settings(
        data_dir=Path(env["RELAY_DATA_DIR"]), database_url=env["RELAY_DATABASE_URL"]
    )
    keyring = Keyring(settings.code_secret())
    now = datetime.now(UTC)

    def of(livemode: bool) -> list[str]:
        sealed = read_db(
            settings,
            lambda tx: account_store.active_webhook_secrets(
                tx, account_id, livemode=livemode, now=now
            ),
        )
        return [keyring.unseal(sealed_for, value) for sealed_for, value in sealed]

    return {"test": of(False), "live": of(True)}


def test_the_command_line_rolls_one_mode_s_webhook_secret_and_leaves_the_other_alone(
    env: dict[str, str],
) -> None:
    created = relay("accounts", "create", "Roll", env=env).stdout
    shown = dict(line.split(None, 1) for line in created.splitlines()[:6])
    account_id = shown["id"]
    assert signing_secrets(env, account_id) == {
        "test": [shown["test_webhook_secret"]],
        "live": [shown["live_webhook_secret"]],
    }

    roll = ["accounts", "roll-webhook-secret", account_id, "--overlap", "0", "--json"]
    rolled = json.loads(relay(*roll, "--mode", "live", env=env).stdout)

    assert rolled["mode"] == "live"
    assert signing_secrets(env, account_id) == {
        "test": [shown["test_webhook_secret"]],
        "live": [rolled["webhook_secret"]],
    }
    # Which secret rolls is never guessed.
    unnamed = subprocess.run([*RELAY, *roll], env=env, capture_output=True, text=True, timeout=120)
    assert unnamed.returncode == 2
    assert "--mode" in unnamed.stderr


def test_the_demo_prints_the_secret_that_signs_its_test_events_labelled_as_such(
    env: dict[str, str],
) -> None:
    port = free_port()
    process = subprocess.Popen(
        [*RELAY, "serve", "--demo", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    cert = Path(env["RELAY_DATA_DIR"]) / "tls" / "cert.pem"
    try:
        _wait_until_ready(f"https://127.0.0.1:{port}", cert, process)
    finally:
        process.terminate()
        process.wait(timeout=20)
    output = process.stdout.read() if process.stdout else ""
    account_id = next(line.split()[-1] for line in output.splitlines() if "Demo account" in line)
    [printed] = [line for line in output.splitlines() if "webhook secret" in line]
    label, _, secret = printed.strip().rpartition(" ")
    assert label.strip() == "webhook secret (test):"
    signing = signing_secrets(env, account_id)
    assert signing["test"] == [secret]
    assert signing["live"] != [secret]
