"""SQL for an account's own texts (`account_templates`), one row per channel and locale."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from relay.db.sql import Row, Sql, Tx, moment
from relay.sms.custom import CustomTemplates, names_brand


def has_templates(account: str) -> str:
    """A column saying whether the account aliased `account` has texts of its own.

    Read with the row a send already reads, so that an account without texts
    costs no statement more; one with texts costs one (`load`).
    """
    return (
        f"EXISTS (SELECT 1 FROM account_templates t WHERE t.account_id = {account}.id)"
        " AS has_templates"
    )


@dataclass(frozen=True)
class AccountTemplate:
    account_id: str
    channel: str
    locale: str
    text: str
    updated_at: datetime

    @property
    def in_use(self) -> bool:
        """False for a text stored before `{brand}` was required: Relay's words go instead."""
        return names_brand(self.text)

    @classmethod
    def from_row(cls, row: Row) -> AccountTemplate:
        return cls(
            account_id=row["account_id"],
            channel=row["channel"],
            locale=row["locale"],
            text=row["text"],
            updated_at=moment(row["updated_at"]),
        )


_COLUMNS = "account_id, channel, locale, text, updated_at"
_LIST = Sql(
    f"SELECT {_COLUMNS} FROM account_templates WHERE account_id = :account ORDER BY channel, locale"
)
# One statement whether the row exists or not: a second `set` replaces the text.
_PUT = Sql(
    f"INSERT INTO account_templates ({_COLUMNS}) VALUES (:account, :channel, :locale, :text, :now)"
    " ON CONFLICT (account_id, channel, locale)"
    " DO UPDATE SET text = excluded.text, updated_at = excluded.updated_at"
)
_DELETE = Sql(
    "DELETE FROM account_templates"
    " WHERE account_id = :account AND channel = :channel AND locale = :locale RETURNING locale"
)


async def list_templates(tx: Tx, account_id: str) -> list[AccountTemplate]:
    rows = await tx.fetch(_LIST, {"account": account_id})
    return [AccountTemplate.from_row(row) for row in rows]


async def load(tx: Tx, account_id: str) -> CustomTemplates:
    found = await list_templates(tx, account_id)
    return CustomTemplates.of({(t.channel, t.locale): t.text for t in found})


async def put(
    tx: Tx, account_id: str, *, channel: str, locale: str, text: str, now: datetime
) -> AccountTemplate:
    params = {"account": account_id, "channel": channel, "locale": locale, "text": text}
    await tx.execute(_PUT, {**params, "now": now})
    return AccountTemplate(account_id, channel, locale, text, now)


async def delete(tx: Tx, account_id: str, *, channel: str, locale: str) -> bool:
    params = {"account": account_id, "channel": channel, "locale": locale}
    return await tx.fetchrow(_DELETE, params) is not None
