"""The composition root: builds stores, carriers, clocks and services from Settings."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from relay.abuse.models import GuardMode, Rules
from relay.abuse.service import AbuseGuard
from relay.accounts.service import AccountService
from relay.accounts.texts import AccountTexts
from relay.carriers.registry import build_carriers
from relay.carriers.sandbox import SandboxCarrier
from relay.clock import Clock, SystemClock
from relay.config import Settings
from relay.crypto import Keyring
from relay.db.driver import Db, open_db
from relay.delivery.service import Delivery
from relay.erasure.service import Erasures
from relay.events.service import DeliverySettings, EventService
from relay.idempotency.service import IdempotencyKeys
from relay.messages.sending import MessageOwner
from relay.messages.service import MessageService
from relay.private_files import private_dir
from relay.verifications.sending import VerificationOwner
from relay.verifications.service import Limits, VerificationService


@dataclass
class Services:
    settings: Settings
    db: Db
    clock: Clock
    keyring: Keyring
    sandbox: SandboxCarrier
    accounts: AccountService
    texts: AccountTexts
    verifications: VerificationService
    messages: MessageService
    delivery: Delivery
    events: EventService
    idempotency: IdempotencyKeys
    abuse: AbuseGuard
    erasures: Erasures

    async def close(self) -> None:
        await self.delivery.close()
        await self.db.close()


def build_services(
    settings: Settings, *, clock: Clock | None = None, draw: Callable[[], float] = random.random
) -> Services:
    """`draw` is the measured routes' explore draw, uniform in [0, 1): tests script it."""
    private_dir(settings.data_dir)
    clock = clock or SystemClock()
    db = open_db(settings.resolved_database_url)
    keyring = Keyring(settings.code_secret())
    limits = Limits(max_sends=settings.max_sends, resend_interval=settings.resend_interval)
    abuse = AbuseGuard(abuse_rules(settings))
    # A committed event with a webhook wakes webhook delivery (relay.events.store.record).
    wake = asyncio.Event()
    db.listen("events", wake.set)
    delivery = build_delivery(settings, db, clock, keyring, draw=draw)
    accounts = AccountService(db, keyring, clock)
    return Services(
        settings=settings,
        db=db,
        clock=clock,
        keyring=keyring,
        sandbox=delivery.carriers.sandbox,
        accounts=accounts,
        texts=AccountTexts(db, clock, max_segments=settings.max_segments),
        verifications=VerificationService(
            db, keyring, clock, delivery=delivery, limits=limits, abuse=abuse
        ),
        messages=MessageService(
            db,
            keyring,
            clock,
            delivery=delivery,
            abuse=abuse,
            sender=settings.shared_sender,
            ttl=settings.message_ttl,
        ),
        delivery=delivery,
        events=EventService(
            db, keyring, clock, delivery=DeliverySettings.from_settings(settings), wake=wake
        ),
        idempotency=IdempotencyKeys(db, clock, lease=timedelta(seconds=settings.idempotency_lease)),
        abuse=abuse,
        erasures=Erasures(db, clock),
    )


def build_delivery(
    settings: Settings,
    db: Db,
    clock: Clock,
    keyring: Keyring,
    *,
    draw: Callable[[], float] = random.random,
) -> Delivery:
    return Delivery(
        db,
        clock,
        build_carriers(settings, clock=clock.now),
        # Delivery knows what it delivers only through this interface.
        {"verification": VerificationOwner(keyring), "message": MessageOwner(keyring)},
        receipt_timeout=settings.receipt_timeout,
        lease=settings.dispatch_lease,
        max_segments=settings.max_segments,
        # Attempt errors are stored, so their doc_url cannot follow each request's
        # Host header: the public URL when set, else the address Relay serves on.
        docs=(settings.public_url or f"https://{settings.host}:{settings.port}").rstrip("/"),
        draw=draw,
    )


def abuse_rules(settings: Settings) -> Rules:
    return Rules(
        number_verifications_per_hour=settings.number_verifications_per_hour,
        number_failed_checks_per_day=settings.number_failed_checks_per_day,
        test_mode_factor=settings.test_mode_number_limit_factor,
        daily_sms_cap=settings.daily_sms_cap,
        guard=GuardMode(settings.pumping_guard),
        prefix_min_sends=settings.pumping_min_sends,
        country_min_sends=settings.pumping_country_min_sends,
        min_conversion=settings.pumping_min_conversion,
        block_for=timedelta(seconds=settings.pumping_block_seconds),
    )
