"""Whose rows a console page reads: one account in one mode, or, for an admin, any."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class View:
    """None for either field reads every account, or both modes (admin sessions only)."""

    account_id: str | None
    livemode: bool | None

    def params(self) -> dict[str, Any]:
        return {"view_account": self.account_id, "view_livemode": self.livemode}


def scoped(account: str, livemode: str) -> str:
    """The condition that keeps a row of `account`/`livemode` columns inside the view.

    Both casts name the parameter's type: asyncpg cannot infer it from `IS NULL`.
    """
    return (
        f"(CAST(:view_account AS TEXT) IS NULL OR {account} = CAST(:view_account AS TEXT))"
        f" AND (CAST(:view_livemode AS BOOLEAN) IS NULL"
        f" OR {livemode} = CAST(:view_livemode AS BOOLEAN))"
    )
