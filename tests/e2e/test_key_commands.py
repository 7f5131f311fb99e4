"""`relay keys` in one process, `relay serve` in another: what the command changes is
what the next request meets, though the server keeps the keys it authenticated."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from tests.e2e.serving import RELAY, relay_serve
from tests.harness import TEST_CODE_KEY

URL = "/v1/verifications"


def keys(database_url: str, tmp: Path, *args: str) -> Any:
    env = {
        **os.environ,
        "RELAY_DATA_DIR": os.fspath(tmp / "data"),
        "RELAY_DATABASE_URL": database_url,
        "RELAY_CODE_KEY": TEST_CODE_KEY,
    }
    done = subprocess.run(
        [*RELAY, "keys", *args, "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_keys_rolled_restricted_and_revoked_by_the_command_take_effect_in_the_server(
    tmp_path: Path, database_url: str
) -> None:
    with relay_serve(tmp_path, database_url) as serving:
        account = serving.account
        listed = keys(database_url, tmp_path, "list", "--account", account["id"])
        old = next(key for key in listed if key["redacted"].endswith(account["test_key"][-4:]))
        assert "secret" not in old
        [rolled] = keys(database_url, tmp_path, "roll", old["id"], "--overlap", "3600")
        assert rolled["previous"]["state"] == "rolling"
        with serving.client(account["test_key"]) as before, serving.client(rolled["secret"]) as new:
            assert before.get(URL).status_code == 200
            assert new.get(URL).status_code == 200

            keys(database_url, tmp_path, "restrict", rolled["id"], "--networks", "10.0.0.0/8")
            assert new.get(URL).status_code == 401
            keys(database_url, tmp_path, "restrict", rolled["id"], "--networks", "127.0.0.0/8")
            assert new.get(URL).status_code == 200

            [revoked] = keys(database_url, tmp_path, "revoke", old["id"])
            assert revoked["state"] == "revoked"
            assert before.get(URL).status_code == 401
            assert new.get(URL).status_code == 200

        after = {
            key["id"]: key
            for key in keys(database_url, tmp_path, "list", "--account", account["id"])
        }
        assert after[old["id"]]["last_refused_reason"] == "revoked"
        assert after[rolled["id"]]["networks"] == ["127.0.0.0/8"]
        assert after[rolled["id"]]["last_refused_reason"] == (
            "address 127.0.0.1 outside 10.0.0.0/8"
        )
