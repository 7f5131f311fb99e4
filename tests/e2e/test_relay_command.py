"""The `relay` command as a user runs it: create an account, serve, verify over TLS."""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path

import httpx
import pytest

from tests.harness import free_port

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
    # uvicorn finishes its graceful shutdown, then re-raises the SIGTERM it caught.
    assert process.returncode in (0, -15), output
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
    assert set(account) == {"id", "name", "test_key", "live_key", "webhook_secret"}
    assert account["test_key"].startswith("sk_test_")
    assert account["live_key"].startswith("sk_live_")
    assert account["webhook_secret"].startswith("whsec_")

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
