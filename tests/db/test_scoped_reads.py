"""A verification read in its caller's scope leaves the scope's columns out and takes them
from the scope: the record is the one a read without a scope makes (`store.joined`)."""

from __future__ import annotations

import uuid
from datetime import timedelta

import httpx
import pytest

from relay.accounts.models import Scope
from relay.db.sql import Tx
from relay.services import Services
from relay.verifications import check_store, store
from relay.web.app import create_app


@pytest.mark.asyncio
async def test_each_read_in_a_scope_makes_the_record_a_read_without_one_makes(
    services: Services,
) -> None:
    account = await services.accounts.create_account("Acme")
    key, livemode = account.test_key, False
    transport = httpx.ASGITransport(app=create_app(services))
    async with httpx.AsyncClient(
        transport=transport,
        base_url="https://relay.test",
        headers={"Authorization": f"Bearer {key}"},
    ) as client:
        made = await client.post(
            "/v1/verifications",
            json={"to": "+14155550123", "metadata": {"order": "42"}},
            headers={"Idempotency-Key": str(uuid.uuid4())},
        )
    assert made.status_code == 200, made.text
    verification_id = made.json()["id"]
    scope = Scope(account_id=account.id, livemode=livemode)
    now = services.clock.now()

    async def reads(tx: Tx) -> list[object]:
        material = await check_store.check_material(
            tx, scope, verification_id=verification_id, to=None, failed_since=now - timedelta(1)
        )
        sealed = await store.load_sealed(tx, scope, verification_id)
        assert material is not None
        assert sealed is not None
        return [await store.load(tx, scope, verification_id), material.verification, sealed[0]]

    unscoped = await services.db.read(lambda tx: store.load_any(tx, verification_id))
    assert unscoped is not None
    assert unscoped.account_id == scope.account_id
    assert unscoped.livemode is livemode
    assert await services.db.read(reads) == [unscoped, unscoped, unscoped]
    other = Scope(account_id=scope.account_id, livemode=not livemode)
    assert await services.db.read(lambda tx: store.load(tx, other, verification_id)) is None
