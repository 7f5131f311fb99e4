"""`relay accounts template`: an account's own OTP texts per channel (sms, email) and locale."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from relay.clock import isoformat
from relay.errors import ParameterInvalid
from relay.services import Services
from relay.sms.custom import CUSTOM_CHANNELS, MAX_LENGTH

Common = Callable[[argparse.ArgumentParser], None]


def add_parser(accounts_commands: Any, common: Common) -> None:
    template = accounts_commands.add_parser(
        "template",
        help="an account's own OTP text per channel and locale (WhatsApp uses Meta's template)",
    )
    actions = template.add_subparsers(dest="template_action", required=True)

    def action(name: str, text: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = actions.add_parser(name, help=text)
        common(parser)
        parser.add_argument("account_id")
        return parser

    put = action("set", "create or replace a text: {code} and {brand} required, {minutes} allowed")
    _channel_and_locale(put)
    put.add_argument(
        "--text",
        required=True,
        help=f"the text; at most {MAX_LENGTH['sms']} characters for sms, {MAX_LENGTH['email']}"
        " for email",
    )
    listing = action("list", "list the account's texts")
    listing.add_argument("--json", action="store_true", help="one JSON object per text")
    delete = action("delete", "delete a text: Relay's own words apply again")
    _channel_and_locale(delete)


def _channel_and_locale(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--channel", choices=CUSTOM_CHANNELS, required=True)
    parser.add_argument("--locale", required=True, help="BCP 47 tag: en, pt-BR, zh-Hant")


async def run(services: Services, args: argparse.Namespace) -> int:
    try:
        if args.template_action == "set":
            return await _set(services, args)
        if args.template_action == "delete":
            await services.texts.delete(args.account_id, channel=args.channel, locale=args.locale)
            print(f"{args.account_id} {args.channel} {args.locale}: deleted")
            return 0
        return await _list(services, args)
    except ParameterInvalid as error:
        # A refused text is a usage error, as argparse's own are.
        print(f"relay: {error.param}: {error.message}", file=sys.stderr)
        return 2


async def _set(services: Services, args: argparse.Namespace) -> int:
    saved = await services.texts.set(
        args.account_id, channel=args.channel, locale=args.locale, text=args.text
    )
    shown = saved.template
    print(f"{shown.account_id} {shown.channel} {shown.locale}: saved")
    if saved.warning is not None:
        print(f"relay: warning: {saved.warning}", file=sys.stderr)
    return 0


async def _list(services: Services, args: argparse.Namespace) -> int:
    for template in await services.texts.list(args.account_id):
        document = {
            "account_id": template.account_id,
            "channel": template.channel,
            "locale": template.locale,
            "text": template.text,
            "updated_at": isoformat(template.updated_at),
            "in_use": template.in_use,
        }
        if args.json:
            print(json.dumps(document, ensure_ascii=False))
        else:
            unused = "" if template.in_use else "  (not sent: no {brand}; set it again)"
            shown = json.dumps(template.text, ensure_ascii=False)
            print(f"{template.channel:5}  {template.locale:10}  {shown}{unused}")
    return 0
