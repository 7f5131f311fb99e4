"""Every comparison in one run: `make bench` prints one table and keeps its figures as data.

It writes bench/results/latest.json and appends the same figures as one line
to bench/results/history.jsonl.

In order, each against its floor in the same run:

1. SQLite, 1 process: create and check over HTTPS vs the reference floor, and
   Relay's p99 at half its own peak (bench/verify_bench.py), every POST with an
   Idempotency-Key of its own as relay-client sends (`sqlite_create_ratio`...),
   and the same without the header (`bare_sqlite_create_ratio`...);
2. PostgreSQL, 2 processes: the same (`pg_...`, `bare_pg_...`);
3. end to end over SMPP with a live key (bench/smpp_bench.py): the Send API,
   then verifications (an Idempotency-Key and a webhook_url on each, counted
   by their `verification.delivered` webhooks): SQLite with 1 process,
   PostgreSQL with 2; then Kannel on the same SMSC (bench/kannel_reference.py);
4. Jasmin, the Python SMS gateway, on the same SMSC (bench/jasmin_reference.py),
   beside the Send API's figure of part 3; where RabbitMQ or Redis is missing or
   Jasmin does not install, the part prints `skipped: why` and is no failure;
5. webhook deliveries vs a bare httpx client posting the same signed bodies to
   the same receiver (bench/webhook_bench.py).

A part that fails is reported in the table and the JSON (`errors`); the others
still run, and the command exits non-zero at the end.

history.jsonl is committed: one line per run, with the commit measured
(`-dirty` if tracked files differed from it), the UTC date, the cores and load
average at the start (bench/trend.py prints it as a table). A smoke run's
figures mean nothing and are never appended; `--no-history` leaves out an
exploratory run too. latest.json (and smoke.json) are the last run's, not
committed.

Usage:
  .venv/bin/python bench/run_all.py             # about 12 minutes on 2 cores
  .venv/bin/python bench/run_all.py --smoke     # a few seconds each, for CI
  .venv/bin/python bench/run_all.py --only webhooks,send   # some parts only
  .venv/bin/python bench/trend.py               # every run so far, one row each
PostgreSQL databases (created when missing): relay_bench_http, and
relay_bench_smpp and relay_bench_webhooks (dropped and created by their scripts).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import (  # noqa: E402
    jasmin_reference,
    smpp_bench,
    trend,
    verify_bench,
    verify_report,
    webhook_bench,
)
from bench.kannel_reference import run_kannel  # noqa: E402

RESULTS = ROOT / "bench" / "results"
PARTS = ("sqlite", "pg", "send", "jasmin", "webhooks")

# key, what it is, its target (None: reported only; docs/benchmarks.md)
TABLE: list[tuple[str, str, str | None]] = [
    ("sqlite_create_ratio", "create, SQLite 1 process: Relay / floor", ">= 0.50"),
    ("sqlite_check_ratio", "check, SQLite 1 process: Relay / floor", ">= 0.55"),
    ("sqlite_create_p99_ms", "create p99 at half Relay's peak, SQLite (ms)", "< 20"),
    ("sqlite_check_p99_ms", "check p99 at half Relay's peak, SQLite (ms)", "< 20"),
    ("pg_create_ratio", "create, PostgreSQL 2 processes: Relay / floor", ">= 0.45"),
    ("pg_check_ratio", "check, PostgreSQL 2 processes: Relay / floor", ">= 0.50"),
    ("pg_create_p99_ms", "create p99 at half Relay's peak, PostgreSQL (ms)", "< 20"),
    ("pg_check_p99_ms", "check p99 at half Relay's peak, PostgreSQL (ms)", "< 20"),
    ("bare_sqlite_create_ratio", "bare: create, SQLite 1 process: Relay / floor", None),
    ("bare_sqlite_check_ratio", "bare: check, SQLite 1 process: Relay / floor", None),
    ("bare_sqlite_create_p99_ms", "bare: create p99 at half Relay's peak, SQLite (ms)", None),
    ("bare_sqlite_check_p99_ms", "bare: check p99 at half Relay's peak, SQLite (ms)", None),
    ("bare_pg_create_ratio", "bare: create, PostgreSQL 2 processes: Relay / floor", None),
    ("bare_pg_check_ratio", "bare: check, PostgreSQL 2 processes: Relay / floor", None),
    ("bare_pg_create_p99_ms", "bare: create p99 at half Relay's peak, PostgreSQL (ms)", None),
    ("bare_pg_check_p99_ms", "bare: check p99 at half Relay's peak, PostgreSQL (ms)", None),
    ("send_api_msgs_per_s", "Send API end to end, SQLite 1 process (msg/s)", ">= 1000"),
    # PostgreSQL with 2 processes: at least the SQLite figure (scaling out is not slower).
    ("send_api_pg_msgs_per_s", "Send API end to end, PostgreSQL 2 processes (msg/s)", ">= SQLite"),
    ("verify_e2e_per_s", "verifications end to end, SQLite 1 process (/s)", ">= 800"),
    (
        "verify_e2e_pg_per_s",
        "verifications end to end, PostgreSQL 2 processes (/s)",
        ">= 0.8 SQLite",
    ),
    ("kannel_receipts_per_s", "Kannel, same SMSC (receipts/s)", None),
    ("send_api_kannel_ratio", "Send API SQLite / Kannel", None),
    ("send_api_pg_kannel_ratio", "Send API PostgreSQL / Kannel", None),
    ("jasmin_receipts_per_s", "Jasmin 0.11.0, same SMSC (receipts/s)", None),
    ("send_api_jasmin_ratio", "Send API SQLite / Jasmin", None),
    ("webhooks_per_s", "webhook deliveries, SQLite 1 process (per s)", None),
    ("webhooks_floor_per_s", "bare httpx client, same bodies and receiver (per s)", None),
    ("webhooks_floor_ratio", "webhooks: Relay / bare client", ">= 0.50"),
    ("webhooks_cpu_us", "webhooks: Relay's CPU per delivery (µs)", None),
    ("webhooks_floor_cpu_us", "webhooks: bare client's CPU per delivery (µs)", None),
    ("webhooks_aiohttp_floor_per_s", "bare aiohttp client, same bodies and receiver (per s)", None),
    ("webhooks_aiohttp_floor_ratio", "webhooks: Relay / bare aiohttp client (informational)", None),
    (
        "webhooks_aiohttp_floor_cpu_us",
        "webhooks: bare aiohttp client's CPU per delivery (µs)",
        None,
    ),
]


def verify(db: str, smoke: bool) -> dict[str, float]:
    args = verify_bench.parse(["--db", db, *(["--smoke"] if smoke else [])])
    if db == "pg":
        ensure_database(verify_bench.PG_URL)
    rows = verify_bench.run(args)
    verify_report.report(rows, args)
    return verify_report.figures(rows, db)


# bench/smpp_bench.py's runs in the send part: --api, --db, processes, the key of its rate.
END_TO_END = (
    ("messages", "sqlite", 1, "send_api_msgs_per_s"),
    ("messages", "pg", 2, "send_api_pg_msgs_per_s"),
    ("verifications", "sqlite", 1, "verify_e2e_per_s"),
    ("verifications", "pg", 2, "verify_e2e_pg_per_s"),
)


def send(smoke: bool) -> dict[str, float]:
    found: dict[str, float] = {}
    for api, db, workers, key in END_TO_END:
        argv = ["--api", api, "--db", db, "--workers", str(workers)]
        args = smpp_bench.parse([*argv, *(["--smoke"] if smoke else [])])
        outcome = smpp_bench.run(args)
        smpp_bench.report(args, outcome, None)
        found[key] = outcome.end_to_end_rps
    kannel = asyncio.run(run_kannel(300 if smoke else 20_000))
    print(f"Kannel {kannel.version}: {kannel.receipts_per_second:,.0f} receipts/s")
    found["kannel_receipts_per_s"] = kannel.receipts_per_second
    found["send_api_kannel_ratio"] = found["send_api_msgs_per_s"] / kannel.receipts_per_second
    found["send_api_pg_kannel_ratio"] = found["send_api_pg_msgs_per_s"] / kannel.receipts_per_second
    return found


def jasmin(smoke: bool, results: dict[str, Any]) -> dict[str, float]:
    """Jasmin on the same SMSC, when this machine can run it; else `skipped: why`."""
    reason = jasmin_reference.unavailable()
    if reason is None:
        try:
            result = asyncio.run(jasmin_reference.run_jasmin(300 if smoke else 3000))
        except jasmin_reference.JasminUnavailable as error:  # another jasmind runs here
            reason = str(error)
    if reason is not None:
        print(f"skipped: {reason}")
        results["skipped"]["jasmin"] = reason
        return {}
    jasmin_reference.report(result, None, as_json=False)
    found = {
        "jasmin_receipts_per_s": result.receipts_per_second,
        "jasmin_dropped_receipts": float(result.dropped_receipts),
    }
    if "send_api_msgs_per_s" in results:  # the Send API's, from this run's send part
        found["send_api_jasmin_ratio"] = (
            results["send_api_msgs_per_s"] / found["jasmin_receipts_per_s"]
        )
    return found


def webhooks(smoke: bool) -> dict[str, float]:
    figures = webhook_bench.measure(events=200 if smoke else 5000)
    webhook_bench.report(figures)
    return {
        "webhooks_per_s": figures.relay_per_s,
        "webhooks_floor_per_s": figures.floor_mean,
        "webhooks_floor_ratio": figures.ratio,
        "webhooks_cpu_us": figures.relay_cpu_us,
        "webhooks_floor_cpu_us": sum(figures.floor_cpu_us) / len(figures.floor_cpu_us),
        "webhooks_aiohttp_floor_per_s": figures.aiohttp_floor_mean,
        "webhooks_aiohttp_floor_ratio": figures.aiohttp_ratio,
        "webhooks_aiohttp_floor_cpu_us": sum(figures.aiohttp_floor_cpu_us) / 2,
    }


def ensure_database(url: str) -> None:
    import asyncpg

    base, _, name = url.rpartition("/")

    async def create() -> None:
        connection = await asyncpg.connect(f"{base}/postgres")
        try:
            found = await connection.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name)
            if not found:
                await connection.execute(f'CREATE DATABASE "{name}"')
        finally:
            await connection.close()

    asyncio.run(create())


def machine() -> dict[str, Any]:
    return {**trend.machine(), "commit": trend.commit_of(ROOT)}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="a few seconds per part, for CI")
    parser.add_argument("--only", help=f"comma-separated parts of: {','.join(PARTS)}")
    parser.add_argument(
        "--output", type=Path, help="default bench/results/latest.json (smoke.json)"
    )
    parser.add_argument(
        "--no-history", action="store_true", help="do not append to bench/results/history.jsonl"
    )
    args = parser.parse_args()
    parts = args.only.split(",") if args.only else list(PARTS)
    unknown = set(parts) - set(PARTS)
    if unknown:
        raise SystemExit(f"unknown parts: {', '.join(sorted(unknown))}")
    runs: dict[str, Callable[[], dict[str, float]]] = {
        "sqlite": lambda: verify("sqlite", args.smoke),
        "pg": lambda: verify("pg", args.smoke),
        "send": lambda: send(args.smoke),
        "jasmin": lambda: jasmin(args.smoke, results),
        "webhooks": lambda: webhooks(args.smoke),
    }
    results: dict[str, Any] = {
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "smoke": args.smoke,
        "machine": machine(),
        "parts": parts,
        "skipped": {},
    }
    errors: dict[str, str] = {}
    seconds: dict[str, float] = {}
    started = time.monotonic()
    for part in parts:
        print(f"\n== {part}", flush=True)
        began = time.monotonic()
        try:
            results.update(runs[part]())
        except (Exception, SystemExit) as error:
            traceback.print_exc()
            errors[part] = f"{type(error).__name__}: {error}"
        seconds[part] = round(time.monotonic() - began, 1)
    results["seconds"] = {**seconds, "total": round(time.monotonic() - started, 1)}
    results["errors"] = errors
    output = args.output or RESULTS / ("smoke.json" if args.smoke else "latest.json")
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(results, indent=2) + "\n")
    table(results)
    print(f"\nwritten: {output.relative_to(ROOT) if output.is_relative_to(ROOT) else output}")
    if not args.smoke and not args.no_history:
        trend.append(trend.HISTORY, trend.record(results))
        print(f"appended: {trend.HISTORY.relative_to(ROOT)} (bench/trend.py shows it)")
    if errors:
        raise SystemExit(f"failed: {', '.join(errors)}")


def table(results: dict[str, Any]) -> None:
    smoke = " (smoke: figures mean nothing)" if results["smoke"] else ""
    total = results["seconds"]["total"]
    print(f"\nRelay benchmarks, {results['started_at']}, {total:.0f} s{smoke}")
    print(f"| {'key':29} | {'measure':54} | {'value':>9} | target |")
    print(f"|{'-' * 31}|{'-' * 56}|{'-' * 11}|--------|")
    for key, what, target in TABLE:
        value = results.get(key)
        shown = "-" if value is None else f"{value:,.2f}" if value < 10 else f"{value:,.0f}"
        print(f"| {key:29} | {what:54} | {shown:>9} | {target or ''} |")
    for part, reason in results.get("skipped", {}).items():
        print(f"SKIPPED {part}: {reason}")
    for part, error in results["errors"].items():
        print(f"FAILED {part}: {error}")


if __name__ == "__main__":
    main()
