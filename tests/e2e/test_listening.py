"""`relay serve --port`: "listening" only once the port is bound, one line when it is taken."""

from __future__ import annotations

import os
import re
import socket
import ssl
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

RELAY = [sys.executable, "-m", "relay.cli.main"]


@pytest.fixture
def env(tmp_path: Path, database_url: str) -> dict[str, str]:
    return {
        **os.environ,
        "RELAY_DATA_DIR": os.fspath(tmp_path / "data"),
        "RELAY_DATABASE_URL": database_url,
    }


def test_a_taken_port_is_one_line_and_a_failing_exit(env: dict[str, str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        served = subprocess.run(
            [*RELAY, "serve", "--port", str(port)],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert served.returncode == 1
    assert "listening" not in served.stdout
    assert served.stderr.splitlines() == [
        f"relay: cannot listen on 127.0.0.1:{port}: the port is already in use"
        " (pick one with --port)"
    ]


def test_the_port_comes_from_relay_port_and_listening_means_it_answers(
    env: dict[str, str],
) -> None:
    """Port 0 lets the system pick: the printed address is the one that answers."""
    process = subprocess.Popen(
        [*RELAY, "serve"],
        env={**env, "RELAY_PORT": "0"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = ""
        while "listening" not in line:
            line = process.stdout.readline()
            assert line, "relay serve exited before it listened"
        match = re.search(r"https://127\.0\.0\.1:(\d+)$", line.strip())
        assert match is not None, line
        cert = Path(env["RELAY_DATA_DIR"]) / "tls" / "cert.pem"
        context = ssl.create_default_context(cafile=os.fspath(cert))
        # No retry loop: once "listening" is printed, the first request answers.
        answer = httpx.get(f"https://127.0.0.1:{match[1]}/healthz", verify=context)
        assert answer.status_code == 200
    finally:
        process.terminate()
        process.wait(timeout=20)


def test_a_certificate_that_cannot_be_served_is_one_line_and_a_failing_exit(
    env: dict[str, str], tmp_path: Path
) -> None:
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    served = subprocess.run(
        [*RELAY, "serve", "--port", "0", "--tls-cert", str(garbage), "--tls-key", str(garbage)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert served.returncode == 1
    assert "listening" not in served.stdout
    refused = [line for line in served.stderr.splitlines() if line.startswith("relay:")]
    assert len(refused) == 1, served.stderr
    assert refused[0].startswith(f"relay: TLS: {garbage} and {garbage} are not a PEM certificate")
    assert "Traceback" not in served.stderr
