"""The overview page: conversion, SMS delivery, countries and webhooks over a window."""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response

from relay.console import store
from relay.console.scope import View
from relay.web.console import charts
from relay.web.console.auth import Console, current, view_of
from relay.web.console.pages import e, page, table

# window -> (bucket seconds, buckets)
WINDOWS = {"hour": (300, 12), "day": (3600, 24), "week": (21600, 28)}


async def overview_page(console: Console, request: Request) -> Response:
    session = await current(console, request)
    window = request.query_params.get("window", "day")
    if window not in WINDOWS:
        window = "day"
    step, buckets = WINDOWS[window]
    view = view_of(session, request)
    now = console.services.clock.now()
    # Windows end at the next whole minute: figures of deleted rows are kept per minute
    # (relay.retention), and fall in the same bucket as the rows did.
    ends = now.replace(second=0, microsecond=0) + timedelta(minutes=1)
    since = ends - timedelta(seconds=step * buckets)
    data = await console.services.db.read(
        lambda tx: store.overview(tx, view, since=since, step=step, buckets=buckets)
    )
    body = _windows(window, view) + _conversion(data) + _sms(data) + _countries(data)
    body += _webhooks(data)
    return page("Overview", body, session=session, here="overview")


def _windows(chosen: str, view: View) -> str:
    extra = {k: v for k, v in (("account", view.account_id),) if v}
    links = " · ".join(
        f"<strong>{name}</strong>"
        if name == chosen
        else f'<a href="/console/overview?{e(urlencode({"window": name, **extra}))}">{name}</a>'
        for name in WINDOWS
    )
    return f'<p id="windows">Window: {links}</p>'


def _conversion(data: store.Overview) -> str:
    created = [data.verifications.get(i, (0, 0))[0] for i in range(data.buckets)]
    approved = [data.verifications.get(i, (0, 0))[1] for i in range(data.buckets)]
    rate = [100.0 * a / c if c else 0.0 for a, c in zip(approved, created, strict=True)]
    labels = [
        (data.since + timedelta(seconds=data.step * i)).strftime(
            "%H:%M" if data.step < 86400 else "%d %b"
        )
        for i in range(data.buckets)
    ]
    total_c, total_a = sum(created), sum(approved)
    overall = f"{100 * total_a / total_c:.1f} %" if total_c else "n/a"
    return (
        "<h2>Verifications</h2>"
        f'<p>Created <strong id="created">{total_c}</strong>, approved'
        f' <strong id="approved">{total_a}</strong>, conversion <strong>{overall}</strong>.</p>'
        '<div class="grid">'
        + charts.bars("verifications", labels, [("created", created), ("approved", approved)])
        + charts.lines("conversion", labels, [("conversion %", rate)], unit="%")
        + "</div>"
    )


def _sms(data: store.Overview) -> str:
    carriers = sorted({carrier for carrier, *_ in data.attempts})
    statuses = sorted({status for _, status, *_ in data.attempts})
    counts: dict[tuple[str, str], int] = defaultdict(int)
    failovers: dict[str, int] = defaultdict(int)
    for carrier, status, n, moved in data.attempts:
        counts[carrier, status] += n
        failovers[carrier] += moved
    series = [(s, [float(counts[c, s]) for c in carriers]) for s in statuses]
    receipts = [(c, n, p50, p95) for c, n, p50, p95 in data.receipts]
    return (
        "<h2>SMS attempts</h2>"
        f"<p>Failovers (attempts after the first carrier): "
        f'<strong id="failovers">{sum(failovers.values())}</strong>.</p>'
        '<div class="grid">'
        + charts.bars("attempts", carriers, series, stacked=True)
        + charts.bars(
            "receipt-time",
            [c for c, *_ in receipts],
            [("median", [p50 for *_, p50, _ in receipts]), ("p95", [p95 for *_, p95 in receipts])],
            unit="s",
        )
        + "</div>"
        + table(
            ["Carrier", *statuses, "Failovers"],
            [[c, *(counts[c, s] for s in statuses), failovers[c]] for c in carriers],
        )
        + table(
            ["Carrier", "Receipts", "Median s", "p95 s"],
            [[c, n, f"{p50:.2f}", f"{p95:.2f}"] for c, n, p50, p95 in receipts],
        )
    )


def _countries(data: store.Overview) -> str:
    delivery = {country: (n, ok) for country, n, ok in data.delivery}
    names = sorted({c for c, *_ in data.countries} | set(delivery))
    conversion = {c: 100.0 * a / n if n else 0.0 for c, n, a in data.countries}
    delivered = {c: 100.0 * ok / n if n else 0.0 for c, (n, ok) in delivery.items()}
    return (
        "<h2>By country</h2>"
        + charts.bars(
            "countries",
            names,
            [
                ("conversion %", [conversion.get(c, 0.0) for c in names]),
                ("delivered %", [delivered.get(c, 0.0) for c in names]),
            ],
            unit="%",
        )
        + table(
            ["Country", "Conversion %", "Delivered %"],
            [[c, f"{conversion.get(c, 0):.1f}", f"{delivered.get(c, 0):.1f}"] for c in names],
        )
    )


def _webhooks(data: store.Overview) -> str:
    outcomes = sorted(data.webhooks)
    attempts = sorted(data.webhook_attempts)
    oldest = (
        "none"
        if data.oldest_pending is None
        else f'<a href="/console/lookup?q={e(data.oldest_pending[0])}">'
        f"{e(data.oldest_pending[0])}</a> since {e(data.oldest_pending[1])}"
    )
    return (
        "<h2>Webhooks</h2>"
        f'<p>Oldest pending delivery: <span id="oldest-pending">{oldest}</span></p>'
        '<div class="grid">'
        + charts.bars(
            "webhooks", outcomes, [("events", [float(data.webhooks[o]) for o in outcomes])]
        )
        + charts.bars(
            "webhook-attempts",
            attempts,
            [("attempts", [float(data.webhook_attempts[o]) for o in attempts])],
        )
        + "</div>"
    )
