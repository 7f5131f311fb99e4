"""`relay serve`: migrations, TLS, then the API and background work, in one process or N."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import gc
import json
import logging
import ssl
from pathlib import Path
from typing import TYPE_CHECKING

from relay.cli.listening import (
    Listener,
    PortUnavailable,
    check_port,
    run,
    run_processes,
    url,
)
from relay.config import Settings
from relay.db.migrate import DatabaseUnavailable, upgrade
from relay.db.urls import is_postgres
from relay.log import configure, tell
from relay.metrics.directory import forget_dead_workers
from relay.private_files import private_dir
from relay.services import build_services
from relay.tls import CertificatePaths, ensure_self_signed
from relay.web.app import create_app

if TYPE_CHECKING:
    from starlette.applications import Starlette


def certificate(settings: Settings) -> CertificatePaths:
    if settings.tls_cert and settings.tls_key:
        return CertificatePaths(settings.tls_cert, settings.tls_key)
    paths = ensure_self_signed(settings.data_dir / "tls")
    print(f"TLS certificate: {paths.cert.resolve()}")
    print(f"SHA-256 fingerprint: {paths.fingerprint()}")
    return paths


def unusable_certificate(paths: CertificatePaths) -> str | None:
    """Why the server could not serve with this certificate and key, or None."""
    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(paths.cert, paths.key)
    except FileNotFoundError as error:
        return f"{error.filename}: no such file (tls_cert, tls_key)"
    except (OSError, ssl.SSLError) as error:
        return (
            f"{paths.cert} and {paths.key} are not a PEM certificate and its private key "
            f"({error.__class__.__name__}: {getattr(error, 'reason', None) or error})"
        )
    return None


def demo_account(settings: Settings) -> dict[str, str]:
    """Created once; its keys are kept in the data dir so every start can print them."""
    path = settings.data_dir / "demo-account.json"
    if path.exists():
        loaded: dict[str, str] = json.loads(path.read_text())
        return loaded

    async def create() -> dict[str, str]:
        services = build_services(settings)
        try:
            made = await services.accounts.create_account("Demo", brand="Relay Demo")
        finally:
            await services.close()
        # The demo prints a test key only: its events are signed with the test secret.
        return {
            "id": made.id,
            "test_key": made.test_key,
            "webhook_secret": made.test_webhook_secret,
        }

    account = asyncio.run(create())
    path.touch(mode=0o600)
    path.write_text(json.dumps(account, indent=2))
    return account


def refusal(settings: Settings, workers: int) -> str | None:
    """Why `workers` processes cannot serve this database, or None when they can."""
    if workers < 1:
        return f"--workers must be at least 1, not {workers}"
    if workers > 1 and not is_postgres(settings.resolved_database_url):
        return (
            f"--workers {workers} needs PostgreSQL: a SQLite file has one writer, so only one "
            "process may serve it; pass a postgresql:// URL with --database-url"
        )
    return None


def serve(settings: Settings, *, demo: bool = False, workers: int = 1) -> int:
    # First: with JSON logs, every line from here on is a log line (`relay.log.tell`),
    # the start-up banner on stdout (certificate, fingerprint, demo keys, address) aside.
    configure(settings.log_level, settings.log_format)
    # Checked before the data dir, the database or the port is touched, so a
    # refused start leaves nothing behind.
    reason = refusal(settings, workers)
    if reason is not None:
        tell(f"relay: {reason}", action="serve.refused", level=logging.ERROR)
        return 2
    # Checked first: a taken port is one line and exit 1, before any migration or file.
    try:
        port = check_port(settings.host, settings.port)
    except PortUnavailable as error:
        tell(f"relay: {error}", action="serve.port_unavailable", level=logging.ERROR)
        return 1
    warning = private_dir(settings.data_dir)
    if warning is not None:
        tell(f"relay: {warning}", action="serve.data_dir_open", level=logging.WARNING)
    try:
        upgrade(settings.resolved_database_url)
    except DatabaseUnavailable as error:
        # A database that cannot be reached, opened or written (down, misnamed,
        # read-only, full) is one line and exit 1, not a traceback.
        tell(f"relay: database: {error}", action="serve.database_unavailable", level=logging.ERROR)
        return 1
    paths = certificate(settings)
    unusable = unusable_certificate(paths)
    if unusable is not None:
        tell(f"relay: TLS: {unusable}", action="serve.tls_unusable", level=logging.ERROR)
        return 1
    if demo:
        account = demo_account(settings)
        print(f"Demo account {account['id']}")
        print(f"  test key:              {account['test_key']}")
        print(f"  webhook secret (test): {account['webhook_secret']}")
    listener = dataclasses.replace(listener_of(settings, paths), port=port)
    if workers > 1:
        return _serve_processes(settings, listener, workers)
    app = create_app(build_services(settings))
    tune_garbage_collector()
    started = run(app, listener, announce=f"Relay listening on {url(settings.host, port)}")
    return 0 if started else 1


def listener_of(settings: Settings, paths: CertificatePaths) -> Listener:
    return Listener(
        host=settings.host,
        port=settings.port,
        cert=paths.cert,
        key=paths.key,
        header_timeout=settings.header_timeout,
        max_request_head=settings.max_request_head,
        shutdown_timeout=settings.shutdown_timeout,
    )


def _serve_processes(settings: Settings, listener: Listener, workers: int) -> int:
    """granian's supervisor binds the port once and runs `workers` server processes on it.

    A process that dies is started again; SIGTERM or SIGINT stops them all.
    """
    # Made here, once: children that each found no code.key would each write a
    # different one, and a code sent by one process would fail its check in another.
    settings.code_secret()
    # The children start listening as they come up.
    where = url(listener.host, listener.port)
    print(f"Relay listening on {where} ({workers} processes)", flush=True)
    if not run_processes(functools.partial(process_app, settings), listener, workers):
        tell(
            "relay: a server process failed to start; see the log above",
            action="serve.process_failed",
            level=logging.ERROR,
        )
        return 1
    return 0


def tune_garbage_collector() -> None:
    """Keep collector pauses out of request latency.

    With CPython's default thresholds a loaded server collects generation 0
    every 700 allocations and now and then walks every object it holds:
    /healthz had a 70 ms p99 at peak from that alone, 11 ms with these
    settings (docs/benchmarks.md). Objects made at start-up (routes, schemas,
    compiled SQL) are frozen out of the collector's view; cycles made while
    serving are still collected, just less often.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)


def process_app(settings: Settings) -> Starlette:
    """Runs in each spawned server process, which owns its logging, pool and background work."""
    configure(settings.log_level, settings.log_format)
    # A worker starting may be the replacement of one that died.
    forget_dead_workers()
    app = create_app(build_services(settings))
    tune_garbage_collector()
    return app


__all__ = ["Path", "process_app", "serve"]
