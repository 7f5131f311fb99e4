"""The metric families, by the names operators alert on (docs/metrics.md).

Each labelled family keeps its children in a dict of its own: a child looked
up by a tuple is cheaper on the request path than prometheus-client's `labels`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, TypeVar

from prometheus_client import Counter, Histogram, disable_created_metrics

M = TypeVar("M", Counter, Histogram)

# A `_created` series per child doubles the scrape for a value no alert reads.
disable_created_metrics()  # type: ignore[no-untyped-call]

HTTP_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
RECEIPT_BUCKETS = (0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)
WEBHOOK_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class Family(Generic[M]):
    def __init__(self, metric: M) -> None:
        self.metric: M = metric
        self._children: dict[tuple[str, ...], M] = {}

    def child(self, *values: str) -> M:
        found = self._children.get(values)
        if found is None:
            found = self._children[values] = self.metric.labels(*values)
        return found


def _counter(name: str, doc: str, labels: Sequence[str]) -> Family[Counter]:
    return Family(Counter(name, doc, labels))


def _histogram(
    name: str, doc: str, labels: Sequence[str], buckets: Sequence[float]
) -> Family[Histogram]:
    return Family(Histogram(name, doc, labels, buckets=buckets))


HTTP_REQUESTS = _counter(
    "relay_http_requests_total",
    "HTTP requests answered, by route template, method and status.",
    ["route", "method", "status"],
)
HTTP_DURATION = _histogram(
    "relay_http_request_duration_seconds",
    "Time from a request's arrival to its answer, by route template.",
    ["route"],
    HTTP_BUCKETS,
)
VERIFICATIONS_CREATED = _counter(
    "relay_verifications_created_total",
    "Verifications opened (a resend of a pending one is not counted).",
    ["mode", "channel"],
)
VERIFICATIONS_APPROVED = _counter(
    "relay_verifications_approved_total",
    "Verifications approved by a correct code.",
    ["mode"],
)
SMS_ATTEMPTS = _counter(
    "relay_sms_attempts_total",
    "Attempts that ended (on every channel, by its `channel`): delivered, or the error code"
    " they failed with.",
    ["carrier", "country", "outcome", "channel"],
)
SMS_RECEIPT = _histogram(
    "relay_sms_receipt_seconds",
    "Time from an attempt's creation to the recording of its carrier's final receipt.",
    ["carrier"],
    RECEIPT_BUCKETS,
)
WEBHOOK_DELIVERIES = _counter(
    "relay_webhook_deliveries_total",
    "Webhook delivery attempts recorded: delivered, retrying, or dropped (the last one failed).",
    ["outcome"],
)
WEBHOOK_DURATION = Histogram(
    "relay_webhook_delivery_seconds",
    "Time a webhook delivery attempt took, from the request to the receiver's answer.",
    buckets=WEBHOOK_BUCKETS,
)
