"""The Routes page: per country and carrier, the last hour's figures and the order a live
send takes now, with the reason for each place; then each other channel's route
(`[channel_routes]`), in its configured order.

The figures are the deployment's, every account's live sends together, so only the
admin token's sessions see them.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal

from starlette.requests import Request
from starlette.responses import Response

from relay.carriers.measured import Figures, Ordered, Placed, Policy, window
from relay.carriers.routing import DEFAULT_ROUTE
from relay.web.console.auth import Console, current
from relay.web.console.pages import e, page, refusal, table

HEADINGS = (
    "place",
    "carrier",
    "why",
    "final attempts",
    "delivered",
    "median receipt",
    "p95 receipt",
    "conversion",
    "price",
)
ONLY_ADMIN = "The Routes page shows every account's traffic: sign in with the admin token."


async def routes_page(console: Console, request: Request) -> Response:
    session = await current(console, request)
    if not session.is_admin:
        return page("Routes", refusal(ONLY_ADMIN), session=session, here="routes", status=403)
    delivery = console.services.delivery
    table_of_routes = delivery.carriers.routes
    snapshot = await delivery.measured.figures.current()
    since, until = window(console.services.clock.now())
    # An email attempt has no country ("") and no SMS route.
    seen = sorted({country for _, country in snapshot.figures if country})
    countries = [c for c in table_of_routes.routes if c != DEFAULT_ROUTE]
    countries += [c for c in seen if c not in countries]
    if DEFAULT_ROUTE in table_of_routes.routes and set(countries) <= set(table_of_routes.routes):
        countries.append(DEFAULT_ROUTE)
    body = (
        f'<p class="muted">Live sends of every account, attempts opened from {e(since)}'
        f" to {e(until)}. The order is a send's now, before exploration.</p>"
    )
    for country in countries:
        route = table_of_routes.for_country(country)
        if route is None:
            continue
        policy = table_of_routes.policy_for(country)
        # A draw of 1 never explores: the page shows the order most sends take.
        ordered = await delivery.measured.order(country, route, draw=1.0)
        if ordered is None:
            ordered = Ordered(
                tuple(
                    Placed(c, "unmeasured", snapshot.in_country(country).get(c), None)
                    for c in route
                )
            )
        prices = delivery.carriers.prices_in(country)
        default = country not in table_of_routes.routes
        body += _route(country, policy, ordered, prices, default=default)
    for channel, carriers in table_of_routes.channels.items():
        placed = tuple(Placed(c, "unmeasured", None, None) for c in carriers)
        body += _route(channel, None, Ordered(placed), {}, default=False)
    if not countries and not table_of_routes.channels:
        body += "<p>No live route is configured.</p>"
    return page("Routes", body, session=session, here="routes")


def _route(
    country: str,
    policy: Policy | None,
    ordered: Ordered,
    prices: dict[str, Decimal],
    *,
    default: bool,
) -> str:
    strategy = "measured" if policy is not None else "ordered"
    source = " (the default route)" if default and country != DEFAULT_ROUTE else ""
    settings = ""
    if policy is not None:
        settings = (
            f": below {policy.min_delivery_rate:.0%} delivered with at least"
            f" {policy.min_sample} final attempts goes last; {policy.explore:.0%} of sends"
            " explore a demoted carrier"
        )
    rows = [_row(n, p, policy, prices.get(p.carrier)) for n, p in enumerate(ordered.placed, 1)]
    heading = f'<h2 id="route-{e(country)}">{e(country)} · {strategy}{e(source)}</h2>'
    explained = f"<p>{e(settings)}</p>" if settings else ""
    return f'{heading}{explained}<div id="routes-{e(country)}">{table(HEADINGS, rows)}</div>'


def _row(
    place: int, placed: Placed, policy: Policy | None, price: Decimal | None
) -> Sequence[object]:
    figures = placed.figures or Figures(0, 0, None)
    delivered = f"{figures.delivered / figures.final:.1%}" if figures.final else "n/a"
    conversion = f"{figures.approved / figures.verified:.1%}" if figures.verified else "n/a"
    return (
        place,
        placed.carrier,
        _why(placed, policy),
        figures.final,
        delivered,
        _seconds(figures.median_seconds),
        _seconds(figures.p95_seconds),
        conversion,
        "" if price is None else str(price),
    )


def _why(placed: Placed, policy: Policy | None) -> str:
    if policy is None:
        return "configured order"
    if placed.standing == "unmeasured":
        return f"fewer than {policy.min_sample} final attempts: configured place"
    if placed.standing == "demoted":
        return f"below {policy.min_delivery_rate:.0%} delivered: last"
    return "ranked by delivery, receipt time, price"


def _seconds(value: float | None) -> str:
    return "n/a" if value is None else f"{value:g} s"
