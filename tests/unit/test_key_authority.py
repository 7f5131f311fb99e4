"""Who may manage which key: the one rule the console's key actions ask."""

from __future__ import annotations

from typing import get_args

import pytest

from relay.accounts.access import parse_networks
from relay.accounts.authority import KeyAction, may_manage, restriction

ACTIONS: tuple[KeyAction, ...] = get_args(KeyAction)


@pytest.mark.parametrize("action", ["restrict", "revoke"])
def test_a_key_session_may_revoke_or_narrow_its_own_key(action: KeyAction) -> None:
    assert may_manage("key", "key_mine", action, "key_mine")


@pytest.mark.parametrize("action", ["roll", "widen", "create"])
def test_a_key_session_may_not_roll_or_widen_its_own_key(action: KeyAction) -> None:
    assert not may_manage("key", "key_mine", action, "key_mine")


@pytest.mark.parametrize(
    ("current", "wanted", "action"),
    [
        (None, "10.0.0.0/8", "restrict"),
        (None, "any", "restrict"),
        (("10.0.0.0/8",), "10.1.0.0/16, 10.2.3.4", "restrict"),
        (("10.0.0.0/8", "2001:db8::/32"), "2001:db8:1::/48", "restrict"),
        (("10.0.0.0/8",), "any", "widen"),
        (("10.0.0.0/8",), "0.0.0.0/0", "widen"),
        (("10.0.0.0/8",), "10.0.0.0/8, 192.168.0.0/16", "widen"),
        (("10.0.0.0/8",), "::ffff:10.0.0.0/104", "widen"),
    ],
)
def test_a_change_of_ranges_is_a_restriction_only_inside_the_current_ones(
    current: tuple[str, ...] | None, wanted: str, action: KeyAction
) -> None:
    networks = parse_networks(wanted)
    assert restriction(current, networks) == action


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
