"""`[carriers.NAME] kind = "smtp"` tables as `relay config check` and `relay serve` read them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from relay.carriers.registry import build_carriers, carrier_problems
from relay.carriers.smtp import SmtpCarrier
from relay.cli.checks import unsafe_for_live
from relay.config import Settings
from tests.webhooks.tls_receiver import write_identity


def smtp_table(**changes: Any) -> dict[str, Any]:
    return {
        "kind": "smtp",
        "host": "smtp.example.net",
        "from": "Acme <no-reply@acme.example>",
        **changes,
    }


def problems(**tables: dict[str, Any]) -> list[str]:
    return carrier_problems(Settings(carriers=tables))


def test_a_host_and_a_from_address_are_enough() -> None:
    assert problems(mail=smtp_table()) == []


def test_the_carrier_is_built_for_the_email_channel() -> None:
    carrier = build_carriers(Settings(carriers={"mail": smtp_table()})).carriers["mail"]
    assert isinstance(carrier, SmtpCarrier)
    assert carrier.channel == "email"


def test_a_complete_table_with_a_login_and_a_private_ca_has_no_problem(tmp_path: Path) -> None:
    ca = write_identity(tmp_path, "Private CA").ca_path
    table = smtp_table(
        port=465,
        security="tls",
        username="relay",
        password="s3cret",
        timeout=5,
        ca_file=str(ca),
        helo_name="relay.acme.example",
    )
    assert problems(mail=table) == []


def test_plain_text_is_refused_unless_the_table_says_it_means_it() -> None:
    [problem] = problems(mail=smtp_table(security="none"))
    assert problem.startswith("carriers.mail: ")
    assert "allow_plaintext = true" in problem
    assert problems(mail=smtp_table(security="none", allow_plaintext=True, port=25)) == []


def test_a_login_is_refused_without_tls_even_when_plain_text_is_allowed() -> None:
    table = smtp_table(security="none", allow_plaintext=True, username="u", password="p")
    [problem] = problems(mail=table)
    assert "need TLS" in problem


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"host": ""}, "host"),
        ({"port": 0}, "port"),
        ({"port": "587"}, "port"),
        ({"security": "ssl"}, "security"),
        ({"username": "relay"}, "username and password"),
        ({"password": "s3cret"}, "username and password"),
        ({"from": "not an address"}, "from"),
        ({"from": "a@one.example, b@two.example"}, "from"),
        ({"from": "relay@bücher.example"}, "from"),
        ({"timeout": 0}, "timeout"),
        ({"ca_file": "/nonexistent/ca.pem"}, "ca_file"),
        ({"ca_file": __file__}, "ca_file"),
        ({"helo_name": "relay host"}, "helo_name"),
        ({"tls": True}, "tls"),
        ({"sender": "a@b.example"}, "the address is `from`"),
    ],
)
def test_a_wrong_setting_is_reported_by_name(changes: dict[str, Any], named: str) -> None:
    [problem] = problems(mail=smtp_table(**changes))
    assert problem.startswith("carriers.mail")
    assert named in problem


def test_a_table_without_from_says_it_is_required() -> None:
    table = smtp_table()
    del table["from"]
    assert problems(mail=table) == ["carriers.mail.from is required (the sender's address)"]


def test_a_placeholder_password_is_unsafe_in_live_mode() -> None:
    settings = Settings(carriers={"mail": smtp_table(username="relay", password="change-me")})
    assert "carriers.mail.password is a placeholder secret" in unsafe_for_live(settings)


def test_relay_config_check_refuses_plain_text_by_default(tmp_path: Path) -> None:
    path = tmp_path / "relay.toml"
    path.write_text(
        '[carriers.mail]\nkind = "smtp"\nhost = "smtp.example.net"\nsecurity = "none"\n'
        'from = "no-reply@acme.example"\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("RELAY_")}
    checked = subprocess.run(
        [sys.executable, "-m", "relay.cli.main", "config", "check", os.fspath(path)],
        env={**env, "RELAY_DATA_DIR": os.fspath(tmp_path / "data")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert checked.returncode != 0
    assert "allow_plaintext" in checked.stdout
