"""Who may manage which key: the one rule the console's key actions ask."""

from __future__ import annotations

from typing import get_args

import pytest

from relay.accounts.authority import KeyAction, may_manage

ACTIONS: tuple[KeyAction, ...] = get_args(KeyAction)


@pytest.mark.parametrize("action", ["roll", "restrict", "revoke"])
def test_a_key_session_may_act_on_its_own_key(action: KeyAction) -> None:
    assert may_manage("key", "key_mine", action, "key_mine")


@pytest.mark.parametrize("action", ACTIONS)
def test_a_key_session_may_not_act_on_another_key(action: KeyAction) -> None:
    assert not may_manage("key", "key_mine", action, "key_theirs")


def test_a_key_session_may_not_create_a_key() -> None:
    assert not may_manage("key", "key_mine", "create")
    assert not may_manage("key", "key_mine", "create", "key_mine")


def test_a_session_without_a_key_id_may_act_on_no_key() -> None:
    assert not may_manage("key", None, "revoke", None)
    assert not may_manage("key", None, "revoke", "key_theirs")


@pytest.mark.parametrize("actor", ["admin", "cli"])
@pytest.mark.parametrize("action", ACTIONS)
def test_an_admin_session_and_the_cli_may_do_everything(actor: str, action: KeyAction) -> None:
    assert may_manage(actor, None, action, None if action == "create" else "key_any")


@pytest.mark.parametrize("actor", ["api", "someone"])
@pytest.mark.parametrize("action", ACTIONS)
def test_the_api_and_unknown_actors_may_do_nothing(actor: str, action: KeyAction) -> None:
    assert not may_manage(actor, "key_mine", action, "key_mine")
