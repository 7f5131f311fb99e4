"""Who may manage which API key, pure: the one rule every key action asks.

A console session signed in with an API key holds one secret, possibly a
leaked one. It may therefore only make that key do less: revoke it, or
narrow the ranges it answers from. Nothing a key session does may give a
secret more reach or hand it a secret the owner has not seen: it may not
create a key (a spare would outlive the revocation of the leaked one), roll
its key (the only working successor would be shown to whoever holds the
session, and an overlap of 0 would end the owner's key at once), act on
another key, or widen or lift its key's ranges. Everything else needs the
operator: an admin session (`admin_token`) or the CLI, which runs with the
deployment's own database access. The API never manages keys.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from relay.accounts.access import parsed_networks
from relay.config import IpNetwork

# Who asks: a console session signed in with an API key or with the admin token,
# the `relay keys` command, or a caller of the HTTP API.
Actor = Literal["key", "admin", "cli", "api"]
# `restrict` narrows a key's ranges; `widen` is any other change of them (lifting
# the restriction, or a range the key did not answer from).
KeyAction = Literal["create", "roll", "restrict", "widen", "revoke"]

# The actions a key session may take on its own key: each makes it answer less.
OWN_KEY_ACTIONS: frozenset[KeyAction] = frozenset({"restrict", "revoke"})


def may_manage(
    actor: str, own_key_id: str | None, action: KeyAction, key_id: str | None = None
) -> bool:
    """Whether `actor`, signed in with `own_key_id` (a key session's key), may take
    `action` on `key_id` (None for `create`, which names no key)."""
    if actor in ("admin", "cli"):
        return True
    if actor != "key" or action not in OWN_KEY_ACTIONS:
        return False
    if own_key_id is None or key_id is None:
        return False
    return own_key_id == key_id


def restriction(current: tuple[str, ...] | None, wanted: Sequence[IpNetwork] | None) -> KeyAction:
    """`restrict` when every range of `wanted` lies inside one the key answers from
    now (`current`, None: anywhere), so the key answers no address it did not;
    `widen` otherwise (`wanted` None lifts the restriction)."""
    if wanted is None:
        return "restrict" if current is None else "widen"
    if current is None:
        return "restrict"
    allowed = parsed_networks(current)
    inside = all(
        any(
            network.version == outer.version and network.subnet_of(outer)  # type: ignore[arg-type]
            for outer in allowed
        )
        for network in wanted
    )
    return "restrict" if inside else "widen"
