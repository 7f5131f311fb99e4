"""`relay erase` and `relay export`: every row that names one destination, deleted or
printed (docs/privacy.md)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from relay.erasure.export import export
from relay.services import Services

Common = Callable[[argparse.ArgumentParser], None]


def add_parser(commands: Any, common: Common) -> None:
    erase = commands.add_parser(
        "erase",
        help="delete every verification, message, attempt, event, webhook delivery and"
        " limit counter naming a phone number or email address (both modes)",
    )
    common(erase)
    erase.add_argument("--to", required=True, help="E.164 number or email address")
    erase.add_argument("--account", help="only this account id (default: every account)")
    exported = commands.add_parser(
        "export",
        help="print every record naming a phone number or email address, one JSON object"
        " per line (no codes, no secrets)",
    )
    common(exported)
    exported.add_argument("--to", required=True, help="E.164 number or email address")
    exported.add_argument("--account", help="only this account id (default: every account)")


async def run(services: Services, args: argparse.Namespace) -> int:
    if args.command == "erase":
        erasure = await services.erasures.erase(args.to, account_id=args.account)
        answer = erasure.to_api()
        answer["account"] = args.account
        print(json.dumps(answer))
        return 0
    for record in await export(services.db, args.to, account_id=args.account):
        print(json.dumps(record, ensure_ascii=False))
    return 0
