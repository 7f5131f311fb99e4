"""Charts drawn on the server as inline SVG: no script, no library, nothing fetched.

Colours and sizes are SVG attributes, not `style`, so the page's
Content-Security-Policy needs no 'unsafe-inline'.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

PALETTE = ("#2563eb", "#16a34a", "#dc2626", "#d97706", "#7c3aed", "#0891b2", "#64748b")
WIDTH = 640
HEIGHT = 220
_LEFT, _RIGHT, _TOP, _BOTTOM = 44, 12, 12, 36


def _frame(name: str, body: list[str], legend: Sequence[str]) -> str:
    keys = "".join(
        f'<rect x="{_LEFT + i * 130}" y="{HEIGHT - 12}" width="10" height="10"'
        f' fill="{PALETTE[i % len(PALETTE)]}"/>'
        f'<text x="{_LEFT + i * 130 + 14}" y="{HEIGHT - 3}" font-size="11">{escape(label)}</text>'
        for i, label in enumerate(legend)
    )
    return (
        f'<svg class="chart" data-chart="{escape(name)}" viewBox="0 0 {WIDTH} {HEIGHT}"'
        f' width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="{escape(name)}"'
        f' xmlns="http://www.w3.org/2000/svg">{"".join(body)}{keys}</svg>'
    )


def _axis(top: float, unit: str) -> list[str]:
    plot_bottom = HEIGHT - _BOTTOM
    return [
        f'<line x1="{_LEFT}" y1="{plot_bottom}" x2="{WIDTH - _RIGHT}" y2="{plot_bottom}"'
        ' stroke="#94a3b8"/>',
        f'<line x1="{_LEFT}" y1="{_TOP}" x2="{_LEFT}" y2="{plot_bottom}" stroke="#94a3b8"/>',
        f'<text x="{_LEFT - 4}" y="{_TOP + 10}" font-size="10" text-anchor="end">'
        f"{_number(top)}{escape(unit)}</text>",
        f'<text x="{_LEFT - 4}" y="{plot_bottom}" font-size="10" text-anchor="end">0</text>',
    ]


def _number(value: float) -> str:
    return f"{value:.0f}" if value >= 10 or value == int(value) else f"{value:.2f}"


def bars(
    name: str,
    labels: Sequence[str],
    series: Sequence[tuple[str, Sequence[float]]],
    *,
    unit: str = "",
    stacked: bool = False,
) -> str:
    """Grouped (or stacked) bars: one group per label, one bar per series."""
    height = HEIGHT - _TOP - _BOTTOM
    totals = [sum(values[i] for _, values in series) for i in range(len(labels))]
    peaks = totals if stacked else [v for _, values in series for v in values]
    top = max([*peaks, 0.0]) or 1.0
    body = _axis(top, unit)
    group = (WIDTH - _LEFT - _RIGHT) / max(1, len(labels))
    per_bar = group * 0.8 / (1 if stacked else max(1, len(series)))
    for i, label in enumerate(labels):
        x0 = _LEFT + i * group + group * 0.1
        base = 0.0
        for j, (series_name, values) in enumerate(series):
            value = values[i]
            tall = value / top * height
            x = x0 if stacked else x0 + j * per_bar
            y = HEIGHT - _BOTTOM - tall - (base / top * height if stacked else 0)
            base += value
            body.append(
                f'<rect class="bar" x="{x:.1f}" y="{y:.1f}" width="{max(per_bar - 1, 1):.1f}"'
                f' height="{tall:.1f}" fill="{PALETTE[j % len(PALETTE)]}">'
                f"<title>{escape(label)} {escape(series_name)}: {_number(value)}{unit}</title>"
                "</rect>"
            )
        if len(labels) <= 16 or i % max(1, len(labels) // 12) == 0:
            body.append(
                f'<text x="{x0 + group * 0.4:.1f}" y="{HEIGHT - _BOTTOM + 12}" font-size="10"'
                f' text-anchor="middle">{escape(label)}</text>'
            )
    return _frame(name, body, [s for s, _ in series])


def lines(
    name: str, labels: Sequence[str], series: Sequence[tuple[str, Sequence[float]]], *, unit: str
) -> str:
    """One polyline per series over the labels (time buckets)."""
    height = HEIGHT - _TOP - _BOTTOM
    top = max([v for _, values in series for v in values] + [0.0]) or 1.0
    body = _axis(top, unit)
    step = (WIDTH - _LEFT - _RIGHT) / max(1, len(labels) - 1)
    for j, (series_name, values) in enumerate(series):
        points = " ".join(
            f"{_LEFT + i * step:.1f},{HEIGHT - _BOTTOM - v / top * height:.1f}"
            for i, v in enumerate(values)
        )
        body.append(
            f'<polyline class="line" points="{points}" fill="none" stroke-width="2"'
            f' stroke="{PALETTE[j % len(PALETTE)]}"><title>{escape(series_name)}</title></polyline>'
        )
    for i, label in enumerate(labels):
        if i % max(1, len(labels) // 8) == 0:
            body.append(
                f'<text x="{_LEFT + i * step:.1f}" y="{HEIGHT - _BOTTOM + 12}" font-size="10"'
                f' text-anchor="middle">{escape(label)}</text>'
            )
    return _frame(name, body, [s for s, _ in series])
