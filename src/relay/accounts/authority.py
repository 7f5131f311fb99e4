"""Who may manage which API key, pure: the one rule every key action asks.

A console session signed in with an API key holds one secret, possibly a
leaked one. It may therefore act on that key only: roll it, restrict it,
revoke it. It may not create a key (a spare would outlive the revocation of
the leaked one), nor roll or revoke another (rolling with no overlap would lock
the owner out and leave the only working successor with whoever holds the
session). Everything else needs the operator: an admin session (`admin_token`)
or the CLI, which runs with the deployment's own database access. The API
never manages keys.
"""

from __future__ import annotations

from typing import Literal

# Who asks: a console session signed in with an API key or with the admin token,
# the `relay keys` command, or a caller of the HTTP API.
Actor = Literal["key", "admin", "cli", "api"]
KeyAction = Literal["create", "roll", "restrict", "revoke"]

# The actions a key session may take on its own key.
OWN_KEY_ACTIONS: frozenset[KeyAction] = frozenset({"roll", "restrict", "revoke"})


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
