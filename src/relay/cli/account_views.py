"""`relay accounts list` and `relay accounts show ID`: which accounts exist and what each
holds, never a key's or a secret's value."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

from relay.accounts.models import AccountRecord
from relay.accounts.overview import AccountOverview, list_accounts, overview
from relay.cli.keys import describe, key_document
from relay.clock import isoformat
from relay.durations import shown
from relay.services import Services

Common = Callable[[argparse.ArgumentParser], None]


def add_parser(accounts_commands: Any, common: Common) -> None:
    listed = accounts_commands.add_parser("list", help="list the accounts, one line each")
    common(listed)
    listed.add_argument("--json", action="store_true", help="one JSON object per account")
    shown = accounts_commands.add_parser(
        "show", help="an account's brand, keys, webhook secrets' ages, own texts and limits"
    )
    common(shown)
    shown.add_argument("account_id")
    shown.add_argument("--json", action="store_true", help="one JSON object")


async def run(services: Services, args: argparse.Namespace) -> int:
    if args.action == "list":
        for account in await list_accounts(services.db):
            document = account_document(account)
            print(json.dumps(document) if args.json else _line(document))
        return 0
    now = services.clock.now()
    found = await overview(services.db, args.account_id, now=now)
    document = overview_document(found, services, now)
    print(json.dumps(document) if args.json else _text(found, document))
    return 0


def account_document(account: AccountRecord) -> dict[str, Any]:
    countries = account.allowed_countries
    return {
        "id": account.id,
        "name": account.name,
        "brand": account.brand,
        "webotp_domain": account.webotp_domain,
        "created_at": isoformat(account.created_at),
        "allowed_countries": None if countries is None else list(countries),
        "delete_after": account.delete_after,
    }


def overview_document(found: AccountOverview, services: Services, now: datetime) -> dict[str, Any]:
    settings = services.settings
    return {
        **account_document(found.account),
        "keys": [key_document(key) for key in found.keys],
        "webhook_secrets": [
            {
                "id": secret.id,
                "mode": "live" if secret.livemode else "test",
                "created_at": isoformat(secret.created_at),
                "age_seconds": int((now - secret.created_at).total_seconds()),
                "expires_at": None if secret.expires_at is None else isoformat(secret.expires_at),
            }
            for secret in found.webhook_secrets
        ],
        "texts": [
            {
                "channel": text.channel,
                "locale": text.locale,
                "text": text.text,
                "in_use": text.in_use,
                "updated_at": isoformat(text.updated_at),
            }
            for text in found.texts
        ],
        # The server's settings apply to every account alike; shown where they bind it.
        "kept_for": shown(
            settings.delete_after
            if found.account.delete_after is None
            else found.account.delete_after
        ),
        "limits": {
            "rate_limit": settings.rate_limit,
            "rate_limit_burst": settings.rate_limit_burst,
            "daily_sms_cap": settings.daily_sms_cap,
            "max_sends": settings.max_sends,
            "max_segments": settings.max_segments,
            "test_mode_number_limit_factor": settings.test_mode_number_limit_factor,
        },
    }


def _line(document: dict[str, Any]) -> str:
    countries = document["allowed_countries"]
    allowed = "all countries" if countries is None else ",".join(countries)
    return "  ".join(
        [document["id"], document["created_at"], repr(document["name"]), document["brand"], allowed]
    )


def _text(found: AccountOverview, document: dict[str, Any]) -> str:
    countries = document["allowed_countries"]
    lines = [
        f"{'id':16} {document['id']}",
        f"{'name':16} {document['name']}",
        f"{'brand':16} {document['brand']}",
        f"{'webotp domain':16} {document['webotp_domain'] or '-'}",
        f"{'created':16} {document['created_at']}",
        f"{'countries':16} {'all' if countries is None else ','.join(countries)}",
        f"{'kept for':16} {document['kept_for']}"
        + (" (the delete_after setting)" if document["delete_after"] is None else " (its own)"),
        "keys:",
        *(f"  {describe(key)}" for key in found.keys),
        "webhook secrets:",
        *(
            f"  {secret['id']}  {secret['mode']:4}  created {secret['created_at']}"
            f" ({_age(secret['age_seconds'])} ago)"
            + ("" if secret["expires_at"] is None else f", signs until {secret['expires_at']}")
            for secret in document["webhook_secrets"]
        ),
        "own texts:" + ("" if document["texts"] else " none (Relay's words)"),
        *(
            f"  {text['channel']:5} {text['locale']:8} {text['text']!r}"
            + ("" if text["in_use"] else "  (not sent: it does not name {brand})")
            for text in document["texts"]
        ),
        "limits:",
        *(f"  {name:30} {value}" for name, value in document["limits"].items()),
    ]
    return "\n".join(lines)


def _age(seconds: int) -> str:
    days, rest = divmod(seconds, 86_400)
    if days:
        return f"{days} d {rest // 3600} h"
    return f"{rest // 3600} h {rest % 3600 // 60} min"
