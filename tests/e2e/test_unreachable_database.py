"""`relay serve` and `relay migrate` on a database they cannot use: one line, exit 1."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness import free_port

RELAY = [sys.executable, "-m", "relay.cli.main"]
LOCAL_POSTGRES = ("127.0.0.1", 5432)


def local_postgres_answers() -> bool:
    try:
        with socket.create_connection(LOCAL_POSTGRES, timeout=1):
            return True
    except OSError:
        return False


needs_local_postgres = pytest.mark.skipif(
    not local_postgres_answers(), reason="no PostgreSQL on 127.0.0.1:5432"
)


def run(command: str, database_url: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    extra = ["--port", str(free_port())] if command == "serve" else []
    return subprocess.run(
        [*RELAY, command, *extra],
        env={
            **os.environ,
            "RELAY_DATA_DIR": os.fspath(tmp_path / "data"),
            "RELAY_DATABASE_URL": database_url,
        },
        capture_output=True,
        text=True,
        timeout=60,
    )


def assert_one_line(refused: subprocess.CompletedProcess[str], shown_url: str, cause: str) -> None:
    assert refused.returncode == 1, refused.stderr
    lines = refused.stderr.splitlines()
    assert len(lines) == 1, refused.stderr
    assert lines[0].startswith("relay: database: "), lines[0]
    assert shown_url in lines[0]
    assert cause in lines[0]
    assert "listening" not in refused.stdout


COMMANDS = pytest.mark.parametrize("command", ["serve", "migrate"])


@COMMANDS
def test_a_closed_port_is_one_line_naming_the_url_with_its_password_masked(
    command: str, tmp_path: Path
) -> None:
    port = free_port()
    url = f"postgresql://relay:hunter2@127.0.0.1:{port}/relay"
    refused = run(command, url, tmp_path)
    assert_one_line(refused, f"postgresql://relay:***@127.0.0.1:{port}/relay", "refused")
    assert "hunter2" not in refused.stderr


@COMMANDS
def test_a_host_that_does_not_resolve_is_one_line(command: str, tmp_path: Path) -> None:
    url = "postgresql://relay@db.relay-test.invalid/relay"
    assert_one_line(run(command, url, tmp_path), url, "does not resolve")


@needs_local_postgres
@COMMANDS
def test_a_database_that_does_not_exist_is_one_line(command: str, tmp_path: Path) -> None:
    url = "postgresql://127.0.0.1:5432/relay_test_no_such_database"
    assert_one_line(run(command, url, tmp_path), url, "does not exist")


@needs_local_postgres
@COMMANDS
def test_a_user_that_does_not_exist_is_one_line(command: str, tmp_path: Path) -> None:
    url = "postgresql://relay_test_no_such_role:secret@127.0.0.1:5432/postgres"
    refused = run(command, url, tmp_path)
    # PostgreSQL names the missing role, or refuses its password, depending on pg_hba.
    assert_one_line(refused, "relay_test_no_such_role:***@127.0.0.1:5432/postgres", "relay_test")
    assert "secret" not in refused.stderr


@COMMANDS
def test_a_sqlite_file_whose_directory_cannot_be_made_is_one_line(
    command: str, tmp_path: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    url = f"sqlite:///{blocker / 'sub' / 'relay.sqlite3'}"
    assert_one_line(run(command, url, tmp_path), url, os.fspath(blocker / "sub"))


def test_a_missing_sqlite_directory_is_made_for_it(tmp_path: Path) -> None:
    database = tmp_path / "made" / "on" / "demand.sqlite3"
    migrated = run("migrate", f"sqlite:///{database}", tmp_path)
    assert migrated.returncode == 0, migrated.stderr
    assert database.exists()


@COMMANDS
def test_a_url_that_does_not_parse_is_one_line_without_echoing_it(
    command: str, tmp_path: Path
) -> None:
    refused = run(command, "postgresql://relay:hunter2@db:notaport/relay", tmp_path)
    assert_one_line(refused, "", "not well-formed")
    assert "hunter2" not in refused.stderr


def test_a_database_relay_does_not_support_is_one_line(tmp_path: Path) -> None:
    url = "mysql://relay:hunter2@db/relay"
    assert_one_line(run("migrate", url, tmp_path), "mysql://relay:***@db/relay", "not supported")
