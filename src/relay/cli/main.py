"""The `relay` command."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from logging import ERROR
from pathlib import Path
from typing import Any

from relay import durations
from relay.carriers.registry import CarrierConfigError
from relay.cli import account_views, erasure, installation, keys, texts, usage
from relay.cli.checks import check, check_file, unsafe_for_live
from relay.config import LIVE_DELETE_AFTER_FLOOR, Settings, load_settings
from relay.errors import RelayError
from relay.log import configure, tell
from relay.version import VERSION


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", type=Path, help="data directory (env RELAY_DATA_DIR)")
    parser.add_argument("--database-url", help="database URL (env RELAY_DATABASE_URL)")
    parser.add_argument("--config", type=Path, help="TOML settings file (env RELAY_CONFIG)")


def _log_format(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--log-format",
        choices=["text", "json"],
        help="text (default) or one JSON object per line (env RELAY_LOG_FORMAT)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="relay",
        description=(
            "Relay: one-time passcodes by SMS, WhatsApp and email, sent and checked by a"
            " self-hosted HTTPS API."
        ),
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {VERSION}")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="serve the HTTPS API and run background work")
    _common(serve)
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    serve.add_argument("--tls-cert", type=Path)
    serve.add_argument("--tls-key", type=Path)
    serve.add_argument("--demo", action="store_true", help="create and print a demo account")
    _log_format(serve)
    serve.add_argument(
        "--workers",
        type=int,
        default=None,
        help="API processes sharing the port (default 1, env RELAY_WORKERS); >1 needs PostgreSQL",
    )

    migrate = commands.add_parser("migrate", help="apply database migrations")
    _common(migrate)

    accounts = commands.add_parser("accounts", help="manage accounts")
    accounts_commands = accounts.add_subparsers(dest="action", required=True)
    create = accounts_commands.add_parser("create", help="create an account and print its keys")
    _common(create)
    create.add_argument("name")
    create.add_argument("--brand", help="name shown in the SMS (default: NAME)")
    create.add_argument("--json", action="store_true")
    update = accounts_commands.add_parser("update", help="change an account's settings")
    _common(update)
    update.add_argument("account_id")
    update.add_argument(
        "--allow-countries",
        help="destination countries allowed, e.g. US,CA,FR; `all` removes the restriction",
    )
    update.add_argument(
        "--delete-after",
        help="how long its verifications and messages are kept, e.g. 30d, 12h, 90s (m is"
        " minutes); `default` follows the delete_after setting",
    )

    roll = accounts_commands.add_parser(
        "roll-webhook-secret",
        help="create a new webhook signing secret for one mode's events (printed once)",
    )
    _common(roll)
    roll.add_argument("account_id")
    roll.add_argument(
        "--mode",
        choices=["test", "live"],
        required=True,
        help="whose secret: test events' or live events' (the other mode's is untouched)",
    )
    roll.add_argument(
        "--overlap",
        type=float,
        default=86400.0,
        help="seconds the previous secret keeps signing (default 86400)",
    )
    roll.add_argument("--json", action="store_true")
    texts.add_parser(accounts_commands, _common)
    account_views.add_parser(accounts_commands, _common)

    worker = commands.add_parser(
        "worker", help="run background work only (expiry sweep, webhook delivery)"
    )
    _common(worker)
    _log_format(worker)

    usage.add_parser(commands, _common)
    erasure.add_parser(commands, _common)

    config = commands.add_parser("config", help="check a settings file")
    config_commands = config.add_subparsers(dest="action", required=True)
    config_check = config_commands.add_parser(
        "check", help="report every problem of a TOML settings file (with RELAY_* applied)"
    )
    config_check.add_argument("file", type=Path)

    keys.add_parser(commands, _common)
    return parser


FLAGS = (
    "data_dir",
    "database_url",
    "config",
    "host",
    "port",
    "tls_cert",
    "tls_key",
    "log_format",
)


def settings_from(args: argparse.Namespace) -> Settings:
    return load_settings(**{name: getattr(args, name, None) for name in FLAGS})


def checked_settings(args: argparse.Namespace) -> Settings | None:
    """The settings, or None after printing every problem, one line each.

    Live mode's refusals apply to the commands that send SMS and webhooks.
    """
    checked = check({name: getattr(args, name, None) for name in FLAGS})
    for problem in checked.problems:
        print(f"relay: configuration: {problem}", file=sys.stderr)
    if checked.problems or checked.settings is None:
        return None
    settings = checked.settings
    if settings.mode == "live" and args.command in ("serve", "worker"):
        unsafe = unsafe_for_live(settings, demo=getattr(args, "demo", False))
        for problem in unsafe:
            print(f"relay: refusing to start in live mode: {problem}", file=sys.stderr)
        if unsafe:
            return None
    return settings


def check_config(path: Path) -> int:
    checked = check_file(path)
    for problem in checked.problems:
        print(f"{path}: {problem}")
    if checked.problems:
        print(f"{len(checked.problems)} problem(s) found", file=sys.stderr)
        return 1
    assert checked.settings is not None
    print(f"{path}: OK ({checked.settings.mode} mode)")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "config":
        return check_config(args.file)
    settings = checked_settings(args)
    if settings is None:
        return 2
    try:
        if args.command == "serve":
            from relay.metrics import directory

            workers = args.workers if args.workers is not None else settings.workers
            # Before prometheus-client is loaded: it picks its storage on import.
            metrics_dir = directory.prepare(workers)
            from relay.cli.serve import serve

            try:
                return serve(settings, demo=args.demo, workers=workers)
            finally:
                if metrics_dir is not None:
                    metrics_dir.remove()
        from relay.db.migrate import DatabaseUnavailable, upgrade
        from relay.private_files import private_dir

        if args.command == "worker":
            # Before the migrations: their lines are the worker's log too.
            configure(settings.log_level, settings.log_format)
        if not _may_install(args):
            missing = installation.missing(settings)
            if missing is not None:
                tell(f"relay: {missing}", action="relay.not_installed", level=ERROR)
                return 1
        # A SQLite file can only be made in a directory that exists.
        private_dir(settings.data_dir)
        try:
            upgrade(settings.resolved_database_url)
        except DatabaseUnavailable as error:
            tell(f"relay: database: {error}", action="relay.database_unavailable", level=ERROR)
            return 1
        if args.command == "migrate":
            print("migrations applied")
            return 0
        if args.command == "worker":
            from relay.cli.worker import work

            return work(settings)
        return asyncio.run(_manage(settings, args))
    # With JSON logs configured (serve, worker), these are log lines too.
    except RelayError as error:
        tell(f"relay: {error.message}", action="relay.refused", level=ERROR)
        return 1
    except CarrierConfigError as error:
        tell(f"relay: configuration: {error}", action="relay.configuration", level=ERROR)
        return 2


def _may_install(args: argparse.Namespace) -> bool:
    """A mistyped --data-dir or database URL must not become a fresh installation with a
    new code key: only these commands make one."""
    return bool(
        args.command == "migrate" or (args.command == "accounts" and args.action == "create")
    )


async def _manage(settings: Settings, args: argparse.Namespace) -> int:
    from relay.services import build_services

    services = build_services(settings)
    try:
        if args.command == "usage":
            return await usage.run(services, args)
        if args.command in ("erase", "export"):
            return await erasure.run(services, args)
        if args.command == "accounts" and args.action == "roll-webhook-secret":
            return await _roll_webhook_secret(services, args)
        if args.command == "accounts" and args.action == "update":
            return await _update_account(services, args)
        if args.command == "accounts" and args.action == "template":
            return await texts.run(services, args)
        if args.command == "accounts" and args.action in ("list", "show"):
            return await account_views.run(services, args)
        if args.command == "accounts":
            created = await services.accounts.create_account(args.name, brand=args.brand)
            payload: dict[str, Any] = {
                "id": created.id,
                "name": created.name,
                "test_key": created.test_key,
                "live_key": created.live_key,
                "test_webhook_secret": created.test_webhook_secret,
                "live_webhook_secret": created.live_webhook_secret,
            }
            if args.json:
                print(json.dumps(payload))
            else:
                print("\n".join(f"{k:19} {v}" for k, v in payload.items()))
                print(
                    "The keys and the secrets are shown once; Relay keeps only hashes of the keys."
                    " Test events are signed with the test webhook secret, live events with the"
                    " live one."
                )
            return 0
        return await keys.run(services, args)
    finally:
        await services.close()


async def _update_account(services: Any, args: argparse.Namespace) -> int:
    from relay.accounts.models import parse_country_list

    if args.allow_countries is None and args.delete_after is None:
        print("relay: give --allow-countries, --delete-after or both", file=sys.stderr)
        return 2
    keep = None if args.delete_after is None else retention_choice(args.delete_after)
    if isinstance(keep, str):
        print(f"relay: --delete-after: {keep}", file=sys.stderr)
        return 2
    live = services.settings.mode == "live"
    if live and keep is not None and keep[0] is not None and keep[0] < LIVE_DELETE_AFTER_FLOOR:
        print(
            "relay: --delete-after: under an hour is refused in live mode: the per-number"
            " limits count the last hour's verifications",
            file=sys.stderr,
        )
        return 2
    if args.allow_countries is not None:
        countries = parse_country_list(args.allow_countries)
        await services.accounts.set_allowed_countries(args.account_id, countries)
        shown = "all" if countries is None else ",".join(sorted(countries))
        print(f"{args.account_id} allowed countries: {shown}")
    if keep is not None:
        seconds = keep[0]
        await services.accounts.set_delete_after(args.account_id, seconds)
        kept = "the delete_after setting's" if seconds is None else durations.shown(seconds)
        print(f"{args.account_id} deletes verifications and messages after: {kept}")
    return 0


def retention_choice(text: str) -> tuple[int | None] | str:
    """(seconds,) or (None,) for `default`; a text saying what is wrong otherwise."""
    if text.strip().lower() == "default":
        return (None,)
    try:
        return (durations.parse_duration(text),)
    except ValueError as error:
        return str(error)


async def _roll_webhook_secret(services: Any, args: argparse.Namespace) -> int:
    from relay.clock import isoformat

    secret, ends = await services.accounts.roll_webhook_secret(
        args.account_id, args.mode, overlap=args.overlap
    )
    payload = {
        "account_id": args.account_id,
        "mode": args.mode,
        "webhook_secret": secret,
        "previous_secrets_expire_at": isoformat(ends),
    }
    if args.json:
        print(json.dumps(payload))
    else:
        print("\n".join(f"{k:27} {v}" for k, v in payload.items()))
        print(
            f"The secret is shown once and signs {args.mode} events only. Until the previous"
            f" {args.mode} secret expires, both sign them."
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
