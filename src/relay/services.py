"""The composition root: builds stores, carriers, clocks and services from Settings."""

from __future__ import annotations

from dataclasses import dataclass

from relay.accounts.service import AccountService
from relay.carriers.sandbox import SandboxCarrier
from relay.clock import Clock, SystemClock
from relay.config import Settings
from relay.crypto import Keyring
from relay.db.engine import Database, open_database
from relay.verifications.service import Limits, VerificationService


@dataclass
class Services:
    settings: Settings
    db: Database
    clock: Clock
    keyring: Keyring
    sandbox: SandboxCarrier
    accounts: AccountService
    verifications: VerificationService

    async def close(self) -> None:
        await self.sandbox.close()
        await self.db.close()


def build_services(settings: Settings, *, clock: Clock | None = None) -> Services:
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    clock = clock or SystemClock()
    db = open_database(settings.resolved_database_url)
    keyring = Keyring(settings.code_secret())
    sandbox = SandboxCarrier()
    limits = Limits(max_sends=settings.max_sends, resend_interval=settings.resend_interval)
    return Services(
        settings=settings,
        db=db,
        clock=clock,
        keyring=keyring,
        sandbox=sandbox,
        accounts=AccountService(db, keyring, clock),
        verifications=VerificationService(db, keyring, clock, sandbox=sandbox, limits=limits),
    )
