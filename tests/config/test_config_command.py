"""`relay config check` and the refusals of `relay serve` in live mode, as a user runs them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

RELAY = [sys.executable, "-m", "relay.cli.main"]
EXAMPLE = Path(__file__).resolve().parents[2] / "relay.example.toml"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RELAY_")}
    return {**clean, "RELAY_DATA_DIR": os.fspath(tmp_path / "data")}


def relay(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RELAY, *args], env=env, capture_output=True, text=True, timeout=60)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "relay.toml"
    path.write_text(text)
    return path


def test_the_example_file_passes_the_check(env: dict[str, str]) -> None:
    checked = relay("config", "check", os.fspath(EXAMPLE), env=env)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "OK" in checked.stdout


def test_the_check_reports_every_problem_at_once(tmp_path: Path, env: dict[str, str]) -> None:
    path = write(
        tmp_path,
        'prot = 8443\nmax_sends = "many"\n'
        '[carriers.op]\nkind = "carrier-pigeon"\n[routes]\ndefault = ["nobody"]\n',
    )
    checked = relay("config", "check", os.fspath(path), env=env)
    assert checked.returncode != 0
    problems = checked.stdout.splitlines()
    assert len(problems) == 4, checked.stdout
    for named in ("prot: no such setting", "max_sends", "carriers.op.kind", "nobody"):
        assert any(named in line for line in problems), checked.stdout


def test_the_check_reports_a_file_that_is_not_toml(tmp_path: Path, env: dict[str, str]) -> None:
    checked = relay("config", "check", os.fspath(write(tmp_path, "port = = 1\n")), env=env)
    assert checked.returncode != 0
    assert "not valid TOML" in checked.stdout


def test_the_check_applies_the_environment(tmp_path: Path, env: dict[str, str]) -> None:
    path = write(tmp_path, "port = 8443\n")
    checked = relay("config", "check", os.fspath(path), env={**env, "RELAY_PORT": "-1"})
    assert checked.returncode != 0
    assert "port" in checked.stdout


LONG_SECRET = "q8Vd2LmX7rTz4NcW9pKf3HsB"


def vonage(public_url: str = "https://relay.example.com", **changes: str) -> str:
    """A Vonage carrier whose receipts prove themselves by a secret in the callback URL."""
    table = {
        "kind": "http",
        "provider": "vonage",
        "api_key": "abcd1234",
        "api_secret": "a8f3kd93jf82hd7s",
        "sender": "Relay",
        "callback_secret": LONG_SECRET,
        **changes,
    }
    lines = "".join(f'{key} = "{value}"\n' for key, value in table.items())
    return f'public_url = "{public_url}"\n[carriers.vo]\n{lines}'


def whatsapp(**changes: str) -> str:
    table = {
        "kind": "whatsapp",
        "phone_number_id": "106540352242922",
        "access_token": "EAAG-a-long-system-user-token",
        "app_secret": "f3a9c2d1e8b7a6f5",
        "verify_token": LONG_SECRET,
        "template": "relay_code",
        "template_language": "en_US",
        **changes,
    }
    lines = "".join(f'{key} = "{value}"\n' for key, value in table.items())
    return f'public_url = "https://relay.example.com"\n[carriers.wa]\n{lines}'


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ('webhook_allowed_networks = ["127.0.0.0/8"]\n', "loopback"),
        ('[carriers.fake]\nkind = "sandbox"\n[routes]\ndefault = ["fake"]\n', "sandbox"),
        (
            '[carriers.fake]\nkind = "sandbox"\n[routes.FR]\ncarriers = ["fake"]\n'
            'strategy = "measured"\n',
            "routes.FR sends live SMS to the sandbox carrier",
        ),
        ('code_key = "change-me-to-at-least-32-random-characters"\n', "code_key"),
        (vonage(base_url="http://127.0.0.1:9"), "carriers.vo.base_url 'http://127.0.0.1:9'"),
        (vonage(callback_secret="short-random"), "carriers.vo.callback_secret is shorter"),
        (vonage(public_url="http://relay.example.com"), "carriers.vo.status_callback_url"),
        (whatsapp(base_url="http://graph.example.com"), "carriers.wa.base_url"),
        ('delete_after = "59m"\n', "delete_after is under an hour"),
    ],
)
def test_live_mode_with_an_unsafe_setting_refuses_to_start_with_one_line(
    tmp_path: Path, env: dict[str, str], text: str, named: str
) -> None:
    path = write(tmp_path, f'mode = "live"\n{text}')
    served = relay("serve", "--config", os.fspath(path), "--port", "0", env=env)
    assert served.returncode == 2
    lines = served.stderr.splitlines()
    assert len(lines) == 1, served.stderr
    assert lines[0].startswith("relay: refusing to start in live mode:")
    assert named in lines[0]
    assert not (tmp_path / "data").exists(), "a refused start must leave nothing behind"


def test_the_check_reports_live_carriers_over_plain_http_and_short_callback_secrets(
    tmp_path: Path, env: dict[str, str]
) -> None:
    text = vonage(base_url="http://127.0.0.1:9", callback_secret="short-random")
    development = relay("config", "check", os.fspath(write(tmp_path, text)), env=env)
    assert development.returncode == 0, development.stdout
    live = relay("config", "check", os.fspath(write(tmp_path, f'mode = "live"\n{text}')), env=env)
    assert live.returncode == 1
    problems = live.stdout.splitlines()
    assert len(problems) == 2, live.stdout
    assert "carriers.vo.base_url 'http://127.0.0.1:9' is not https://" in problems[0]
    assert "carriers.vo.callback_secret is shorter than 24 characters" in problems[1]


def test_a_live_carrier_over_https_with_a_long_secret_passes_the_check(
    tmp_path: Path, env: dict[str, str]
) -> None:
    path = write(tmp_path, f'mode = "live"\n{vonage()}\n[routes]\ndefault = ["vo"]\n')
    checked = relay("config", "check", os.fspath(path), env=env)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_live_mode_refuses_the_demo_account(tmp_path: Path, env: dict[str, str]) -> None:
    served = relay("serve", "--demo", "--port", "0", env={**env, "RELAY_MODE": "live"})
    assert served.returncode == 2
    assert "--demo" in served.stderr


def test_a_wrong_setting_stops_every_command_with_one_line_each(
    tmp_path: Path, env: dict[str, str]
) -> None:
    path = write(tmp_path, "max_sends = 0\nwebhook_timeout = -1\n")
    migrated = relay("migrate", "--config", os.fspath(path), env=env)
    assert migrated.returncode == 2
    assert [line.split(":")[1].strip() for line in migrated.stderr.splitlines()] == [
        "configuration",
        "configuration",
    ]


def test_the_check_reports_a_wrong_measured_route_and_price(
    tmp_path: Path, env: dict[str, str]
) -> None:
    path = write(
        tmp_path,
        '[carriers.op]\nkind = "sandbox"\n[carriers.op.prices]\nFR = "cheap"\n'
        '[routes.FR]\ncarriers = ["op"]\nstrategy = "measured"\nexplore = 1.5\n',
    )
    checked = relay("config", "check", os.fspath(path), env=env)
    assert checked.returncode != 0
    problems = checked.stdout.splitlines()
    assert any("carriers.op.prices.FR must be a number" in line for line in problems), problems
    assert any("routes: route 'FR': explore must be" in line for line in problems), problems


def test_a_measured_route_with_prices_passes_the_check(tmp_path: Path, env: dict[str, str]) -> None:
    path = write(
        tmp_path,
        '[carriers.op]\nkind = "sandbox"\n[carriers.op.prices]\nFR = 0.05\n'
        '[routes.FR]\ncarriers = ["op"]\nstrategy = "measured"\nmin_sample = 10\n',
    )
    checked = relay("config", "check", os.fspath(path), env=env)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_check_refuses_a_carrier_of_the_wrong_channel_and_unknown_names(
    tmp_path: Path, env: dict[str, str]
) -> None:
    path = write(
        tmp_path,
        '[carriers.op]\nkind = "sandbox"\n'
        '[carriers.wa]\nkind = "sandbox"\nchannel = "whatsapp"\n'
        '[routes]\ndefault = ["wa"]\n'
        '[channel_routes]\nwhatsapp = ["op"]\nemail = ["nobody"]\n',
    )
    checked = relay("config", "check", os.fspath(path), env=env)
    assert checked.returncode != 0
    problems = checked.stdout.splitlines()
    assert len(problems) == 3, checked.stdout
    for named in (
        "route 'default' takes sms carriers only, not: wa (whatsapp)",
        "channel_routes.whatsapp takes whatsapp carriers only, not: op (sms)",
        "channel_routes.email names unknown carriers: nobody",
    ):
        assert any(named in line for line in problems), checked.stdout


def test_channel_routes_of_the_right_channels_pass_the_check(
    tmp_path: Path, env: dict[str, str]
) -> None:
    path = write(
        tmp_path,
        '[carriers.op]\nkind = "sandbox"\n'
        '[carriers.wa]\nkind = "sandbox"\nchannel = "whatsapp"\n'
        '[routes]\ndefault = ["op"]\n[channel_routes]\nwhatsapp = ["wa"]\n',
    )
    checked = relay("config", "check", os.fspath(path), env=env)
    assert checked.returncode == 0, checked.stdout + checked.stderr
