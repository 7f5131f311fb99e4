"""With `--log-format json`, everything `relay serve` and `relay worker` print after their
start-up banner is JSON: the data directory's warning, the migrations' lines, a refused
start, and what they say when they stop."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.e2e.serving import relay_serve
from tests.harness import TEST_CODE_KEY, free_port
from tests.webhooks.receiver import isolated_database

RELAY = [sys.executable, "-m", "relay.cli.main"]
# What `relay serve` prints for a person at start, on stdout, in either format.
BANNER = (
    "TLS certificate: ",
    "SHA-256 fingerprint: ",
    "Relay listening on ",
    "Relay worker running",
)


def entries(lines: list[str]) -> list[dict[str, Any]]:
    """Each line parsed as JSON (a line that is not fails the test, naming it)."""
    parsed = []
    for line in lines:
        try:
            parsed.append(json.loads(line))
        except ValueError:
            raise AssertionError(f"not JSON: {line!r}") from None
    assert all({"time", "level", "logger", "action"} <= entry.keys() for entry in parsed)
    return parsed


def after_the_banner(stdout: str) -> list[str]:
    lines = stdout.splitlines()
    while lines and lines[0].startswith(BANNER):
        lines.pop(0)
    return lines


def open_data_dir(tmp_path: Path) -> Path:
    """A data directory others may read: Relay starts, and warns."""
    data = tmp_path / "data"
    data.mkdir()
    data.chmod(0o755)
    return data


def test_serve_logs_the_data_directory_warning_and_every_later_line_as_json(
    tmp_path: Path, database_url: str
) -> None:
    open_data_dir(tmp_path)
    url = isolated_database(database_url, "json_start", tmp_path)
    with (
        relay_serve(tmp_path, url, "--log-format", "json") as serving,
        serving.client(serving.account["test_key"]) as api,
    ):
        assert api.get("/v1/verifications").status_code == 200
    assert serving.process.returncode == 0
    stdout = serving.stdout.read_text()
    assert "Relay listening on " in stdout
    assert after_the_banner(stdout) == [], stdout
    logged = entries(serving.stderr.read_text().splitlines())
    warned = [entry for entry in logged if entry["action"] == "serve.data_dir_open"]
    assert len(warned) == 1, logged
    assert warned[0]["level"] == "warning"
    assert "is open to other users (mode 0755)" in warned[0]["detail"]
    assert any(entry["logger"].startswith("alembic") for entry in logged)
    assert any(entry["action"] == "http.request" for entry in logged)


def test_a_start_refused_after_logging_began_is_one_json_line(tmp_path: Path) -> None:
    open_data_dir(tmp_path)
    closed = f"postgresql://relay@127.0.0.1:{free_port()}/relay"
    refused = subprocess.run(
        [*RELAY, "serve", "--log-format", "json", "--port", str(free_port())],
        env={
            **os.environ,
            "RELAY_DATA_DIR": os.fspath(tmp_path / "data"),
            "RELAY_DATABASE_URL": closed,
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 1
    assert refused.stdout == ""
    actions = [entry["action"] for entry in entries(refused.stderr.splitlines())]
    assert actions == ["serve.data_dir_open", "serve.database_unavailable"], refused.stderr


def test_a_worker_says_it_stopped_in_json(tmp_path: Path, database_url: str) -> None:
    open_data_dir(tmp_path)
    url = isolated_database(database_url, "json_worker", tmp_path)
    env = {
        **os.environ,
        "RELAY_DATA_DIR": os.fspath(tmp_path / "data"),
        "RELAY_DATABASE_URL": url,
        "RELAY_CODE_KEY": TEST_CODE_KEY,
    }
    stdout, stderr = tmp_path / "stdout.log", tmp_path / "stderr.log"
    with stdout.open("wb") as out, stderr.open("wb") as err:
        worker = subprocess.Popen(
            [*RELAY, "worker", "--log-format", "json"], env=env, stdout=out, stderr=err
        )
    try:
        deadline = time.monotonic() + 60
        while "Relay worker running" not in stdout.read_text():
            assert worker.poll() is None, stderr.read_text()
            assert time.monotonic() < deadline, stderr.read_text()
            time.sleep(0.05)
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=30)
    assert worker.returncode == 0, stderr.read_text()
    assert after_the_banner(stdout.read_text()) == []
    logged = entries(stderr.read_text().splitlines())
    assert logged[-1]["action"] == "worker.stopped", logged
    assert any(entry["logger"].startswith("alembic") for entry in logged)
