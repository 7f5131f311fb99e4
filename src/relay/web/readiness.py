"""`GET /readyz`: whether this process can serve, one named check at a time.

`/healthz` says the process runs (liveness: restart it if not). `/readyz`
says it can do its work (readiness: send it traffic or not): the database
answers, its migrations are at this code's head, and every live carrier
this process sends through is bound. It also names the state of the rate
limits' store without failing on it: every process shares that one store, and
while it is down each counts the limits itself (decision 0042), so draining
them all would turn a weaker limit into an outage. Each check is cheap and bounded in time,
so a load balancer may poll it every second. Both answers name the running
version, so a rolling upgrade can tell which release each process runs.
"""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from starlette.responses import Response

from relay.carriers.smpp import SmppCarrier
from relay.db.migrate import head_revision
from relay.db.sql import Sql, Tx
from relay.db.urls import is_postgres, sqlite_path
from relay.errors import NotReady
from relay.services import Services
from relay.version import VERSION
from relay.web.errors import error_body, status_and_type
from relay.web.limit_storage import StorageCheck
from relay.web.responses import JsonResponse

# A database that takes longer than this to answer one tiny read is not ready.
CHECK_TIMEOUT = 2.0
_VERSION = "SELECT version_num FROM alembic_version"


@dataclass(frozen=True)
class Readiness:
    services: Services
    head: str
    limits: StorageCheck

    @classmethod
    def of(cls, services: Services) -> Readiness:
        return cls(services, head_revision(), StorageCheck(services.settings.rate_limit_storage))

    async def answer(self, *, base_url: str) -> Response:
        """200 with each check's state, or the `not_ready` refusal; both with the version."""
        try:
            checks = await self.check()
        except NotReady as refusal:
            status, _ = status_and_type(refusal)
            body = {**error_body(refusal, base_url=base_url), "version": VERSION}
            return JsonResponse(body, status_code=status)
        return JsonResponse({"ok": True, "version": VERSION, "checks": checks})

    async def check(self) -> dict[str, str]:
        """Every check's state when all pass; otherwise NotReady naming the first that fails."""
        revision = await self._database()
        if revision != self.head:
            raise NotReady(
                f"Not ready: migrations: the database is at {revision}, this code needs"
                f" {self.head}; run `relay migrate`."
            )
        return {
            "database": "ok",
            "migrations": revision,
            "carriers": self._carriers(),
            "rate_limit_storage": await self.limits.state(),
        }

    async def _database(self) -> str:
        url = self.services.settings.resolved_database_url
        try:
            async with asyncio.timeout(CHECK_TIMEOUT):
                if is_postgres(url):
                    return await self.services.db.read(_revision)
                return await asyncio.to_thread(_sqlite_revision, sqlite_path(url))
        except TimeoutError:
            raise NotReady(f"Not ready: database: no answer within {CHECK_TIMEOUT:g} s.") from None
        except Exception as error:
            raise NotReady(f"Not ready: database: {_describe(error)}") from None

    def _carriers(self) -> str:
        delivery = self.services.delivery
        if not delivery.dispatching:
            # This process opens no binds: `relay worker` processes send.
            return "not sending here"
        unbound = [
            name
            for name, carrier in delivery.carriers.carriers.items()
            if isinstance(carrier, SmppCarrier) and carrier.bound_sessions == 0
        ]
        if unbound:
            raise NotReady(f"Not ready: carriers: not bound: {', '.join(sorted(unbound))}.")
        return "ok"


async def _revision(tx: Tx) -> str:
    row = await tx.fetchrow(Sql(_VERSION))
    if row is None:
        raise LookupError("no migration applied")
    return str(row["version_num"])


def _sqlite_revision(path: str) -> str:
    """Through a connection of its own, read-only: the server's open connections would
    go on answering from a file that was deleted or moved away under them."""
    uri = Path(path).resolve().as_uri() + "?mode=ro"
    connection = sqlite3.connect(uri, uri=True, timeout=CHECK_TIMEOUT)
    try:
        row = connection.execute(_VERSION).fetchone()
    finally:
        connection.close()
    if row is None:
        raise LookupError("no migration applied")
    return str(row[0])


def _describe(error: Exception) -> str:
    # Driver messages name the host and the file, never a password.
    text = str(error).strip() or type(error).__name__
    return text[:200].rstrip(".") + "."
