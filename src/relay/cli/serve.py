"""`relay serve`: migrations, TLS, then the API and background work, in one process or N."""

from __future__ import annotations

import asyncio
import functools
import gc
import json
import math
import os
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import uvicorn
from uvicorn.config import STARTUP_FAILURE
from uvicorn.supervisors import Multiprocess

from relay.cli.listening import PortUnavailable, bind, run, url
from relay.config import Settings
from relay.db.migrate import DatabaseUnavailable, upgrade
from relay.db.urls import is_postgres
from relay.log import configure
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
    # Checked before the data dir, the database or the port is touched, so a
    # refused start leaves nothing behind.
    reason = refusal(settings, workers)
    if reason is not None:
        print(f"relay: {reason}", file=sys.stderr)
        return 2
    # Bound first: a taken port is one line and exit 1, before any migration or file.
    try:
        sock = bind(settings.host, settings.port)
    except PortUnavailable as error:
        print(f"relay: {error}", file=sys.stderr)
        return 1
    try:
        return _serve_on(sock, settings, demo=demo, workers=workers)
    finally:
        sock.close()


def _serve_on(sock: socket.socket, settings: Settings, *, demo: bool, workers: int) -> int:
    configure(settings.log_level, settings.log_format)
    warning = private_dir(settings.data_dir)
    if warning is not None:
        print(f"relay: {warning}", file=sys.stderr)
    try:
        upgrade(settings.resolved_database_url)
    except DatabaseUnavailable as error:
        # A database that cannot be reached, opened or written (down, misnamed,
        # read-only, full) is one line and exit 1, not a traceback.
        print(f"relay: database: {error}", file=sys.stderr)
        return 1
    paths = certificate(settings)
    if demo:
        account = demo_account(settings)
        print(f"Demo account {account['id']}")
        print(f"  test key:              {account['test_key']}")
        print(f"  webhook secret (test): {account['webhook_secret']}")
    if workers > 1:
        return _serve_processes(sock, settings, paths, workers)
    app = create_app(build_services(settings))
    tune_garbage_collector()
    started = run(
        _uvicorn_config(app, settings, paths),
        sock,
        announce=f"Relay listening on {url(settings.host, sock)}",
    )
    return 0 if started else 1


def _serve_processes(
    sock: socket.socket, settings: Settings, paths: CertificatePaths, workers: int
) -> int:
    """The parent binds the port once, then supervises `workers` spawned server processes.

    uvicorn's supervisor passes the listening socket to each child, restarts a
    child that dies, and on SIGTERM or SIGINT stops them all before it returns.
    """
    # Made here, once: children that each found no code.key would each write a
    # different one, and a code sent by one process would fail its check in another.
    settings.code_secret()
    config = _uvicorn_config(
        functools.partial(process_app, settings), settings, paths, workers=workers
    )
    # The children start listening as they come up; the socket is bound already.
    print(f"Relay listening on {url(settings.host, sock)} ({workers} processes)", flush=True)
    supervisor = Multiprocess(config, sockets=[sock])
    supervisor.run()
    if any(process.exitcode == STARTUP_FAILURE for process in supervisor.processes):
        print("relay: a server process failed to start; see the log above", file=sys.stderr)
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


def _uvicorn_config(
    app: Any, settings: Settings, paths: CertificatePaths, *, workers: int = 1
) -> uvicorn.Config:
    return uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        factory=workers > 1,
        workers=workers,
        ssl_certfile=os.fspath(paths.cert),
        ssl_keyfile=os.fspath(paths.key),
        log_config=None,
        access_log=False,
        server_header=False,
        # uvicorn would believe X-Forwarded-For from loopback whatever trusted_proxies
        # says; relay.web.peers alone decides who the client is.
        proxy_headers=False,
        # Its refusals of malformed framing are plain text (decision 0027).
        http="httptools",
        timeout_graceful_shutdown=math.ceil(settings.shutdown_timeout),
    )


__all__ = ["Path", "process_app", "serve"]
