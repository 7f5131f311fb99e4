"""Erasure: every row that names one destination, deleted in one unit of work, with the
figures kept as retention keeps them (decision 0052)."""

from __future__ import annotations

import logging
from datetime import datetime

from relay.clock import Clock
from relay.db.driver import Db
from relay.db.sql import Tx
from relay.delivery import erased_receipts
from relay.erasure import store
from relay.erasure.models import Erasure, destination_key
from relay.idempotency.claims import Pending
from relay.masking import mask
from relay.retention.store import remove

log = logging.getLogger("relay.erasure")

# What an erasure's Idempotency-Key records as its resource: it has no other.
RESOURCE_PATH = "/v1/erasures"


class Erasures:
    def __init__(self, db: Db, clock: Clock) -> None:
        self._db = db
        self._clock = clock

    async def erase(
        self,
        to: str,
        *,
        account_id: str | None,
        livemode: bool | None = None,
        claim: Pending | None = None,
    ) -> Erasure:
        """Delete what names `to`: of one account in one mode (an API key), of one account
        (`livemode` None: both modes), of one mode of every account (`account_id` None), or
        of every account in both. A pending verification goes with its queued attempts, so
        the dispatcher finds nothing to send."""
        key = destination_key(to)
        now = self._clock.now()

        async def unit(tx: Tx) -> Erasure:
            return await _erase(tx, key, account_id, livemode, claim, now)

        erasure = await self._db.write(unit)
        counts = " ".join(f"{kind}={n}" for kind, n in erasure.deleted.items())
        mode = "both" if livemode is None else ("live" if livemode else "test")
        log.info(
            "erasure.done account=%s mode=%s to=%s %s",
            account_id or "all",
            mode,
            erasure.to,
            counts,
        )
        return erasure


async def _erase(
    tx: Tx,
    key: str,
    account_id: str | None,
    livemode: bool | None,
    claim: Pending | None,
    now: datetime,
) -> Erasure:
    found = await store.find(tx, key, account_id=account_id, livemode=livemode)
    counts = await store.count(tx, found, key, account_id=account_id, livemode=livemode)
    erasure = Erasure(to=mask(key), livemode=livemode, deleted=counts)
    if claim is not None:
        # The key first among the unit's writes, with the answer a retry replays.
        await claim.take(tx, resource_path=RESOURCE_PATH, result=erasure, now=now)
    for messages, owners in ((False, found.verifications), (True, found.messages)):
        for owner_account, ids in owners.items():
            sent = await store.carrier_ids(tx, messages=messages, ids=ids)
            await erased_receipts.keep(tx, sent, now=now)
            await remove(tx, messages=messages, account_id=owner_account, ids=ids)
    await store.delete_limits(tx, key, account_id=account_id, livemode=livemode)
    return erasure
