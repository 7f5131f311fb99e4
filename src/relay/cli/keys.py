"""`relay keys`: list, create, roll, restrict and revoke API keys (a secret is printed once)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from relay.accounts.access import DEFAULT_OVERLAP, MAX_OVERLAP, parse_networks
from relay.accounts.models import ApiKey
from relay.clock import isoformat
from relay.services import Services

Common = Callable[[argparse.ArgumentParser], None]


def add_parser(commands: Any, common: Common) -> None:
    keys = commands.add_parser("keys", help="manage API keys")
    actions = keys.add_subparsers(dest="action", required=True)

    def action(name: str, text: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = actions.add_parser(name, help=text)
        common(parser)
        parser.add_argument("--json", action="store_true", help="one JSON object per key")
        return parser

    create = action("create", "create a key (printed once)")
    create.add_argument("--account", required=True)
    create.add_argument("--mode", choices=["test", "live"], required=True)
    create.add_argument("--networks", help="CIDR ranges the key answers from (default: any)")
    listing = action("list", "list keys (never their secret)")
    listing.add_argument("--account")
    roll = action("roll", "create the key's successor (printed once); the old one ends later")
    roll.add_argument("key_id")
    roll.add_argument(
        "--overlap",
        type=float,
        default=float(DEFAULT_OVERLAP),
        help=f"seconds the old key keeps working (default and most {MAX_OVERLAP})",
    )
    restrict = action("restrict", "answer only requests from these CIDR ranges")
    restrict.add_argument("key_id")
    restrict.add_argument(
        "--networks", required=True, help="e.g. 10.0.0.0/8,2001:db8::/32; `any` lifts it"
    )
    revoke = action("revoke", "revoke a key: refused from the next request on")
    revoke.add_argument("key_id")


def key_document(key: ApiKey) -> dict[str, Any]:
    """A key as `--json` prints it: never its secret."""

    def when(moment: Any) -> str | None:
        return None if moment is None else isoformat(moment)

    return {
        "id": key.id,
        "account_id": key.account_id,
        "mode": key.mode,
        "redacted": key.redacted,
        "state": key.state,
        "created_at": when(key.created_at),
        "expires_at": when(key.expires_at),
        "revoked_at": when(key.revoked_at),
        "networks": None if key.networks is None else list(key.networks),
        "last_used_at": when(key.last_used_at),
        "last_refused_at": when(key.last_refused_at),
        "last_refused_reason": key.last_refused_reason,
    }


def describe(key: ApiKey) -> str:
    """One line: id, account, mode, prefix and last 4, state, ranges, last refusal."""
    state: str = key.state
    if key.state == "rolling" and key.expires_at is not None:
        state = f"rolling until {isoformat(key.expires_at)}"
    parts = [key.id, key.account_id, f"{key.mode:4}", key.redacted, state]
    if key.networks is not None:
        parts.append("restricted to " + ",".join(key.networks))
    if key.last_used_at is not None:
        parts.append(f"last used {isoformat(key.last_used_at)}")
    if key.last_refused_at is not None:
        parts.append(f"last refused {isoformat(key.last_refused_at)}: {key.last_refused_reason}")
    return "  ".join(parts)


def _show(key: ApiKey, args: argparse.Namespace) -> None:
    print(json.dumps(key_document(key)) if args.json else describe(key))


async def run(services: Services, args: argparse.Namespace) -> int:
    accounts = services.accounts
    if args.action == "create":
        networks = None if args.networks is None else parse_networks(args.networks)
        key, raw = await accounts.create_key(args.account, args.mode, networks=networks)
        if args.json:
            print(json.dumps({**key_document(key), "secret": raw}))
        else:
            # `KEY_ID SECRET` first, as scripts of earlier versions read it.
            print(f"{key.id} {raw}")
            print(describe(key))
            print("The key is shown once; Relay keeps only its hash.")
    elif args.action == "list":
        for key in await accounts.list_keys(args.account):
            _show(key, args)
    elif args.action == "roll":
        rolled = await accounts.roll_key(args.key_id, args.overlap)
        if args.json:
            print(
                json.dumps(
                    {
                        **key_document(rolled.key),
                        "secret": rolled.secret,
                        "previous": key_document(rolled.previous),
                    }
                )
            )
        else:
            print(describe(rolled.key))
            print(f"secret {rolled.secret}")
            print(describe(rolled.previous))
            print("The new key is shown once. Until the old one's overlap ends, both work.")
    elif args.action == "restrict":
        _show(await accounts.restrict_key(args.key_id, parse_networks(args.networks)), args)
    else:
        _show(await accounts.revoke_key(args.key_id), args)
    return 0
