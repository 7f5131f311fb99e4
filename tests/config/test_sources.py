"""Where a setting comes from: flags beat RELAY_* variables, which beat the file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from relay.config import load_settings


@pytest.fixture(autouse=True)
def _no_relay_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith("RELAY_")]:
        monkeypatch.delenv(name)


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "relay.toml"
    path.write_text('port = 1001\nhost = "10.0.0.1"\nmax_sends = 3\n')
    return path


def test_the_file_beats_the_defaults(config: Path) -> None:
    settings = load_settings(config=config)
    assert (settings.port, settings.host, settings.max_sends) == (1001, "10.0.0.1", 3)


def test_the_environment_beats_the_file(config: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RELAY_PORT", "2002")
    monkeypatch.setenv("RELAY_MAX_SENDS", "4")
    settings = load_settings(config=config)
    assert (settings.port, settings.host, settings.max_sends) == (2002, "10.0.0.1", 4)


def test_a_flag_beats_the_environment_and_the_file(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RELAY_PORT", "2002")
    assert load_settings(config=config, port=3003).port == 3003


def test_the_file_can_be_named_by_the_environment(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RELAY_CONFIG", os.fspath(config))
    assert load_settings().port == 1001


def test_tables_come_from_the_environment_as_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RELAY_ROUTES", '{"default": ["operator-a"]}')
    monkeypatch.setenv("RELAY_WEBHOOK_RETRY_SCHEDULE", "1,2")
    settings = load_settings()
    assert settings.routes == {"default": ["operator-a"]}
    assert settings.webhook_retry_schedule == [1.0, 2.0]
