"""`relay serve`: migrations, TLS, then the API and background work in one process."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import uvicorn

from relay.config import Settings
from relay.db.migrate import upgrade
from relay.log import configure
from relay.services import build_services
from relay.tls import CertificatePaths, ensure_self_signed
from relay.web.app import create_app


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
        return {"id": made.id, "test_key": made.test_key, "webhook_secret": made.webhook_secret}

    account = asyncio.run(create())
    path.touch(mode=0o600)
    path.write_text(json.dumps(account, indent=2))
    return account


def serve(settings: Settings, *, demo: bool = False) -> int:
    configure(settings.log_level)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    upgrade(settings.resolved_database_url)
    paths = certificate(settings)
    if demo:
        account = demo_account(settings)
        print(f"Demo account {account['id']}")
        print(f"  test key:       {account['test_key']}")
        print(f"  webhook secret: {account['webhook_secret']}")
    print(f"Relay listening on https://{settings.host}:{settings.port}", flush=True)
    app = create_app(build_services(settings))
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        ssl_certfile=os.fspath(paths.cert),
        ssl_keyfile=os.fspath(paths.key),
        log_config=None,
        access_log=False,
        server_header=False,
        timeout_graceful_shutdown=5,
    )
    uvicorn.Server(config).run()
    return 0


__all__ = ["Path", "serve"]
