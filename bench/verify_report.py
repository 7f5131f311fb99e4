"""bench/verify_bench.py's rows as figures (bench/results keys) and as its printed table."""

from __future__ import annotations

import argparse

from bench.serving import Row
from bench.wrk_scripts import SHAPES

P99_TARGET_MS = 20.0


def figures(rows: list[Row], db: str) -> dict[str, float]:
    """Relay's rate over the floor's at peak, and Relay's p99 at half its peak, by
    their bench/results keys: `{db}_create_ratio` for the keyed shape (what
    production sends), `bare_{db}_create_ratio` for the bare one."""
    peak = {(r.server, r.call, r.shape): r.result for r in rows if r.result.target_rps is None}
    paced = {(r.call, r.shape): r.result for r in rows if r.result.target_rps is not None}
    found: dict[str, float] = {}
    for shape in SHAPES:
        prefix = db if shape == "keyed" else f"bare_{db}"
        for call in ("create", "check"):
            relay, floor = peak[("relay", call, shape)], peak[("reference", call, shape)]
            found[f"{prefix}_{call}_ratio"] = relay.rps / floor.rps
            found[f"{prefix}_{call}_rps"] = relay.rps
            found[f"{prefix}_{call}_floor_rps"] = floor.rps
            found[f"{prefix}_{call}_p99_ms"] = paced[(call, shape)].p99_ms
    return found


def report(rows: list[Row], args: argparse.Namespace) -> None:
    print(
        f"db={args.db} processes={args.processes} seconds={args.seconds} "
        f"connections={args.connections} wrk threads={args.threads} "
        "(HTTPS, wrk on the same machine)"
    )
    header = f"{'server':10} {'call':9} {'shape':6} {'load':15} {'req/s':>8} {'p50 ms':>8}"
    print(f"{header} {'p95 ms':>8} {'p99 ms':>8} {'non-2xx':>8} {'errors':>7} {'CPU µs/req':>11}")
    for row in rows:
        result = row.result
        load = "peak" if result.target_rps is None else f"half {result.target_rps:,.0f}/s"
        latency = f"{result.p50_ms:8.2f} {result.p95_ms:8.2f} {result.p99_ms:8.2f}"
        print(
            f"{row.server:10} {row.call:9} {row.shape or '-':6} {load:15} {result.rps:8,.0f}"
            f" {latency} {result.non_2xx:8} {result.socket_errors:7} {result.cpu_us or 0:11,.0f}"
        )
    peak = {(r.server, r.call, r.shape): r.result for r in rows if r.result.target_rps is None}
    for shape in SHAPES:
        for call in ("create", "check"):
            relay, floor = peak[("relay", call, shape)], peak[("reference", call, shape)]
            print(
                f"relay {call} ({shape}) = {relay.rps / floor.rps:.0%} of the reference floor "
                f"({relay.rps:,.0f} vs {floor.rps:,.0f} req/s)"
            )
    for row in rows:
        result = row.result
        if result.target_rps is None:
            continue
        verdict = "met" if result.p99_ms < P99_TARGET_MS else "NOT met"
        slips = f"{result.late} late of {result.requests}"
        print(
            f"relay {row.call} ({row.shape}) at half the peak rate: p99 {result.p99_ms:.1f} ms, "
            f"target < {P99_TARGET_MS:.0f} ms {verdict}; achieved {result.rps:,.0f} of "
            f"{result.target_rps:,.0f} req/s, {slips}"
        )
