"""What a batch of deleted rows leaves in `retained_figures`: per minute, the columns the
console's charts and measured routing group by, never a destination (relay.retention.store).

Each statement groups one batch's rows and inserts the groups: nothing is read back into
the process. Seconds to a receipt are the readers' own expression, so a reader adding
these rows to its live ones answers as before the prune.
"""

from __future__ import annotations

from relay.db.sql import Sql

# The batch's ids, as one JSON list: the same statement text for any batch size.
_IDS = {
    "sqlite": "(SELECT value FROM json_each(:ids))",
    "postgres": "(SELECT json_array_elements_text(CAST(:ids AS json)))",
}
_VALUES = {
    "sqlite": "json_each(:ids)",
    "postgres": "json_array_elements_text(CAST(:ids AS json)) AS ids(value)",
}
_MINUTE = {
    "sqlite": "substr({col}, 1, 16) || ':00.000000'",
    "postgres": "date_trunc('minute', {col})",
}
_SECONDS = {
    "sqlite": "((julianday(a.updated_at) - julianday(a.at)) * 86400)",
    "postgres": "CAST(EXTRACT(EPOCH FROM (a.updated_at - a.at)) AS FLOAT)",
}
_CODE = {"sqlite": "json_extract(a.error, '$.code')", "postgres": "a.error ->> 'code'"}


_MINUTE_COLUMNS = (
    ("{minute}", "o.created_at"),
    ("{at}", "a.at"),
    ("{final}", "a.updated_at"),
    ("{event}", "e.created_at"),
    ("{tried}", "w.at"),
)


def both_ids(template: str) -> Sql:
    """`template` with {ids} (a subquery of the batch's ids) and {values} (the same as a
    table of one column, `value`) written for each dialect."""
    return Sql(_ids(template, "sqlite"), postgres=_ids(template, "postgres"))


def _ids(template: str, dialect: str) -> str:
    return template.replace("{ids}", _IDS[dialect]).replace("{values}", _VALUES[dialect])


def _both(template: str) -> Sql:
    def written(dialect: str) -> str:
        text = _ids(template, dialect).replace("{seconds}", _SECONDS[dialect])
        text = text.replace("{code}", _CODE[dialect])
        for name, col in _MINUTE_COLUMNS:
            text = text.replace(name, _MINUTE[dialect].format(col=col))
        return text

    return Sql(written("sqlite"), postgres=written("postgres"))


_INSERT = (
    "INSERT INTO retained_figures (kind, account_id, livemode, minute, final_minute, country,"
    " carrier, status, error_code, of_verification, failover, approved, seconds, n)"
)


def _owners(table: str) -> list[Sql]:
    """The statements that keep the figures of a batch of `table` (verifications or
    messages): the owners themselves (verifications only), their attempts, their events
    and those events' webhook attempts."""
    of_verification = "TRUE" if table == "verifications" else "FALSE"
    approved = "o.approved_at IS NOT NULL" if table == "verifications" else "FALSE"
    # PostgreSQL groups by no constant: a message is never approved.
    grouped = ", o.approved_at IS NOT NULL" if table == "verifications" else ""
    owner_column = "verification_id" if table == "verifications" else "message_id"
    statements = [
        f"{_INSERT} SELECT 'attempt', o.account_id, o.livemode, {{at}}, {{final}}, o.country,"
        " a.carrier, a.status, {code}, "
        f"{of_verification}, a.position > 0, {approved},"
        " CASE WHEN a.status = 'delivered' THEN {seconds} END, COUNT(*)"
        f" FROM attempts a JOIN {table} o ON o.id = a.{owner_column} WHERE o.id IN {{ids}}"
        " GROUP BY o.account_id, o.livemode, {at}, {final}, o.country, a.carrier, a.status,"
        f" {{code}}, a.position > 0{grouped},"
        " CASE WHEN a.status = 'delivered' THEN {seconds} END",
        f"{_INSERT} SELECT 'event', e.account_id, e.livemode, {{event}}, NULL, NULL, NULL,"
        " e.delivery_status, NULL, NULL, NULL, NULL, NULL, COUNT(*)"
        f" FROM events e JOIN {table} o ON o.id = e.related_id"
        " AND e.account_id = o.account_id AND e.livemode = o.livemode WHERE o.id IN {ids}"
        " GROUP BY e.account_id, e.livemode, {event}, e.delivery_status",
        f"{_INSERT} SELECT 'webhook_attempt', e.account_id, e.livemode, {{tried}}, NULL, NULL,"
        f" NULL, {WEBHOOK_OUTCOME}, NULL, NULL, NULL, NULL, NULL, COUNT(*)"
        " FROM webhook_attempts w JOIN events e ON e.id = w.event_id"
        f" JOIN {table} o ON o.id = e.related_id"
        " AND e.account_id = o.account_id AND e.livemode = o.livemode WHERE o.id IN {ids}"
        f" GROUP BY e.account_id, e.livemode, {{tried}}, {WEBHOOK_OUTCOME}",
    ]
    if table == "verifications":
        statements.insert(
            0,
            f"{_INSERT} SELECT 'verification', o.account_id, o.livemode, {{minute}}, NULL,"
            f" o.country, NULL, NULL, NULL, TRUE, NULL, {approved}, NULL, COUNT(*)"
            " FROM verifications o WHERE o.id IN {ids}"
            f" GROUP BY o.account_id, o.livemode, {{minute}}, o.country, {approved}",
        )
    return [_both(text) for text in statements]


# The console's outcome of one webhook attempt (relay.console.store).
WEBHOOK_OUTCOME = (
    "CASE WHEN w.status_code BETWEEN 200 AND 299 THEN 'ok'"
    " ELSE COALESCE(w.error, 'http_status') END"
)
VERIFICATIONS = _owners("verifications")
MESSAGES = _owners("messages")
