"""relay.example.toml stays in step with the Settings object."""

from __future__ import annotations

import itertools
import os
import re
import tomllib
from pathlib import Path

import pytest

from relay.config import Settings

EXAMPLE = Path(__file__).resolve().parents[2] / "relay.example.toml"


@pytest.fixture(autouse=True)
def _no_relay_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith("RELAY_")]:
        monkeypatch.delenv(name)


def commented_out(text: str) -> set[str]:
    """Settings shown as `# name = …` or `# [name.…]` / `# [name]`: those without a default."""
    return set(re.findall(r"^# \[?(\w+)[\].= ]", text, flags=re.MULTILINE))


def test_every_setting_is_listed_in_the_example_file() -> None:
    text = EXAMPLE.read_text()
    listed = set(tomllib.loads(text)) | commented_out(text)
    assert set(Settings.model_fields) - listed == set()


def test_the_example_file_names_no_setting_that_does_not_exist() -> None:
    assert set(tomllib.loads(EXAMPLE.read_text())) - set(Settings.model_fields) == set()


def test_every_value_in_the_example_file_is_the_default() -> None:
    values = tomllib.loads(EXAMPLE.read_text())
    defaults = Settings().model_dump()
    assert {name: Settings(**{name: v}).model_dump()[name] for name, v in values.items()} == {
        name: defaults[name] for name in values
    }


def test_settings_left_out_of_the_example_file_have_no_default_value() -> None:
    values = tomllib.loads(EXAMPLE.read_text())
    missing = set(Settings.model_fields) - set(values)
    assert {name: Settings.model_fields[name].default for name in missing} == {
        name: Settings.model_fields[name].default
        for name in missing
        if Settings.model_fields[name].default in (None, {}, [])
    }


def test_every_setting_in_the_example_file_has_a_comment_above_it() -> None:
    lines = EXAMPLE.read_text().splitlines()
    # A setting follows its comment, or another setting of the same comment.
    uncommented = [
        line
        for before, line in itertools.pairwise(lines)
        if re.match(r"^\w+ = ", line) and not re.match(r"^(#|\w)", before)
    ]
    assert uncommented == []
