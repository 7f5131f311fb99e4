"""What the CLI stores fits its column, on SQLite and PostgreSQL alike: a value too long is
one line and exit 1, and nothing is written (PostgreSQL would refuse it mid-transaction,
SQLite would keep it whole)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from relay.db.limits import column_length
from tests.harness import count_rows, test_settings

RELAY = [sys.executable, "-m", "relay.cli.main"]


@pytest.fixture
def env(tmp_path: Path, database_url: str) -> dict[str, str]:
    return {
        **os.environ,
        "RELAY_DATA_DIR": os.fspath(tmp_path / "data"),
        "RELAY_DATABASE_URL": database_url,
    }


def relay(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RELAY, *args], env=env, capture_output=True, text=True, timeout=120)


def accounts(tmp_path: Path, database_url: str) -> int:
    settings = test_settings(tmp_path / "data", database_url)
    return count_rows(settings, "SELECT count(*) AS n FROM accounts")


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["N" * 201], "The account's name is at most 200 characters, not 201."),
        (["Acme", "--brand", "B" * 61], "The brand is at most 60 characters, not 61."),
        (["A" * 61], "The brand (the account's name, when no brand is given) is at most 60"),
        (["   "], "The account's name must not be empty."),
        (["Acme", "--brand", "\u200b\u200b"], "The brand must hold a character an SMS can show."),
    ],
)
def test_an_account_whose_name_or_brand_does_not_fit_is_refused_in_one_line(
    tmp_path: Path, database_url: str, env: dict[str, str], args: list[str], named: str
) -> None:
    before = accounts(tmp_path, database_url)
    made = relay("accounts", "create", *args, "--json", env=env)
    assert made.returncode == 1, made.stdout + made.stderr
    assert made.stdout == ""
    assert made.stderr.splitlines() == [made.stderr.strip()], made.stderr
    assert made.stderr.startswith("relay: ")
    assert named in made.stderr
    assert "Traceback" not in made.stderr
    assert accounts(tmp_path, database_url) == before


def test_a_name_and_a_brand_of_their_columns_length_are_stored_whole(
    env: dict[str, str],
) -> None:
    name = "N" * column_length("accounts", "name")
    brand = "B" * column_length("accounts", "brand")
    made = relay("accounts", "create", name, "--brand", brand, "--json", env=env)
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["name"] == name
