"""The text `/metrics` answers: this process's values, or every worker's added up when
`relay serve --workers N` runs them in multiprocess mode, the outbox gauges and the
last hour's delivery ratios (read from the database, so the same from every worker)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client import multiprocess as multiprocess_mode
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector

from relay.metrics import families  # noqa: F401  (registers the families before a scrape)
from relay.metrics.directory import forget_dead_workers, in_use
from relay.metrics.outbox import Backlog

CONTENT_TYPE = CONTENT_TYPE_LATEST


class _Outbox(Collector):
    def __init__(self, backlogs: Sequence[Backlog]) -> None:
        self._backlogs = backlogs

    def collect(self) -> Iterator[Metric]:
        depth = GaugeMetricFamily(
            "relay_outbox_depth",
            "Items waiting to go out: SMS attempts not yet submitted, undelivered webhooks.",
            labels=["kind"],
        )
        oldest = GaugeMetricFamily(
            "relay_outbox_oldest_seconds",
            "Seconds the oldest waiting item of each kind has waited (0 when none waits).",
            labels=["kind"],
        )
        for backlog in self._backlogs:
            depth.add_metric([backlog.kind], backlog.depth)
            oldest.add_metric([backlog.kind], backlog.oldest_seconds)
        yield depth
        yield oldest


@dataclass(frozen=True)
class Delivered:
    """Live final attempts of one carrier in one country over the last full hour."""

    carrier: str
    country: str
    final: int
    delivered: int


class _Delivery(Collector):
    def __init__(self, figures: Sequence[Delivered]) -> None:
        self._figures = figures

    def collect(self) -> Iterator[Metric]:
        ratio = GaugeMetricFamily(
            "relay_sms_delivery_ratio",
            "Delivered receipts / final attempts of live sends over the last full hour.",
            labels=["carrier", "country"],
        )
        final = GaugeMetricFamily(
            "relay_sms_final_attempts",
            "Final attempts of live sends over the last full hour: the ratio's sample.",
            labels=["carrier", "country"],
        )
        for item in self._figures:
            labels = [item.carrier, item.country]
            ratio.add_metric(labels, item.delivered / item.final if item.final else 0.0)
            final.add_metric(labels, item.final)
        yield ratio
        yield final


def render(backlogs: Sequence[Backlog], delivered: Sequence[Delivered] = ()) -> bytes:
    if in_use():
        forget_dead_workers()
        counted = CollectorRegistry()
        multiprocess_mode.MultiProcessCollector(counted)  # type: ignore[no-untyped-call]
    else:
        counted = REGISTRY
    outbox = CollectorRegistry()
    outbox.register(_Outbox(backlogs))
    outbox.register(_Delivery(delivered))
    return generate_latest(counted) + generate_latest(outbox)
